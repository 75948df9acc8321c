import Dispatch
import Spindle
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The README's examples, verbatim between the `README:` markers (SpindleCLITests' ReadmeTests checks that every
/// example of the README appears in a test like these), each followed by what it must produce.
@Suite struct ReadmeExampleTests {
  @Test func seeingYourWork() async throws {
    // README: seeing your work
    let trace = WorkTrace()
    let queue = WorkQueue(name: "images", maxConcurrent: 4, trace: trace)
    let load = queue.add(name: "load") { [UInt8](repeating: 7, count: 1_000) }
    let sum = queue.add(name: "sum", after: load) { bytes in bytes.reduce(0) { $0 + Int($1) } }
    try await queue.allFinished()
    let path = "/tmp/images-\(getpid()).svg"
    try trace.writeTimeline(toFile: path)  // or write(toFile:) for Perfetto, writeGraph(toFile:) for DOT
    // END README
    defer { unlink(path) }
    #expect(try await sum.value == 7_000)
    #expect(trace.events.map(\.name).sorted() == ["load", "sum"])
    let file = fopen(path, "r")
    #expect(file != nil)
    if let file { fclose(file) }
  }

  @Test func workQueuePartTwo() async throws {
    // README: work queue part two
    let queue = WorkQueue(name: "photos", maxConcurrent: 4)
    let gate = queue.addBarrier { print("everything added before me is done") }
    let page = queue.add(name: "page", timeout: .seconds(2)) { "<html>" }  // WorkTimeoutError naming "page"
    let upload = queue.add(retry: .exponential(maxAttempts: 5, initial: .milliseconds(1))) { 200 }
    let later = queue.add(delay: .milliseconds(20)) { "polled" }  // holds no slot while it waits
    let shot = queue.add(exclusive: "camera") { "click" }  // one at a time per key, across queues
    let online = queue.add(condition: .skip(unless: { true })) { "synced" }  // skipped work ends cancelled
    let album = queue.group(name: "album") { group in
      let thumbs = (1...4).map { p in group.add { "thumb \(p)" } }
      return group.add(afterAll: thumbs) { $0 }
    }
    queue.batch { for p in 1...3 { queue.add(priority: p == 3 ? .high : .normal) { p } } }
    let failures = queue.observe { event in if case .finished(.failed) = event.kind { print(event) } }
    let thumbnails = try await album.value  // ["thumb 1", "thumb 2", "thumb 3", "thumb 4"]
    try await queue.allFinished()
    let done = queue.progress  // completed of added, since the queue was last idle
    // END README
    failures.cancel()
    #expect(thumbnails == ["thumb 1", "thumb 2", "thumb 3", "thumb 4"])
    try await gate.value
    #expect(try await page.value == "<html>")
    #expect(try await upload.value == 200)
    #expect(try await later.value == "polled")
    #expect(try await shot.value == "click")
    #expect(try await online.value == "synced")
    // The counts start again when the queue goes idle, and a loaded machine can finish everything added so far
    // between two adds (a loaded full run did): only the batch's three items surely come in together.
    #expect(done.completed == done.total && done.total >= 3, "\(done)")
  }

  @Test func workGraphs() async throws {
    // README: work graphs
    let queue = WorkQueue(name: "words", maxConcurrent: 2)
    let load = queue.add(name: "load") { "the quick brown fox jumps" }
    let words = queue.add(name: "split", after: load) { text in text.split(separator: " ").map(String.init) }
    let count = queue.add(name: "count", after: words) { words in words.count }
    let longest = queue.add(name: "longest", after: words) { words in words.max { $0.count < $1.count } ?? "" }
    let report = queue.add(after: count, longest) { count, longest in "\(count) words, longest: \(longest)" }
    let fetched = queue.add { () async throws -> Int in 42 }  // async bodies hold their slot until they return
    let broken = queue.add { () throws -> Int in throw CancellationError() }
    let skipped = queue.add(after: broken) { value in value + 1 }  // never runs: its input failed
    let summary = try await report.value  // "5 words, longest: quick"
    try await queue.allFinished()
    // END README
    #expect(summary == "5 words, longest: quick")
    #expect(try await fetched.value == 42)
    await #expect(throws: CancellationError.self) { try await skipped.value }
  }

  @Test func identifiableQueues() throws {
    // README: identifiable queues
    let db = IDQ(label: "com.example.db")
    let cache = IDQ(label: "com.example.cache")
    let nested = db.sync { db.sync { "inline, no deadlock" } }  // plain DispatchQueue.sync would hang
    let stillOnDB = db.sync { cache.sync { IDQ.currentQueueIs(db) } }  // true: db is on the calling chain
    let label = db.sync { IDQ.currentLabel }  // "com.example.db"
    let cycle = Result { try db.sync { try cache.sync { try db.syncChecked { 1 } } } }
    // cycle is .failure(DeadlockError): 'com.example.db' → 'com.example.cache' → 'com.example.db'
    // END README
    #expect(nested == "inline, no deadlock")
    #expect(stillOnDB)
    #expect(label == "com.example.db")
    #expect(throws: DeadlockError.self) { try cycle.get() }
  }

  @Test func blockingWork() async throws {
    // README: blocking work
    let thumbnails = ConcurrentActionExecutor<Int, String>(maxInFlight: 2) { size in
      usleep(10_000)  // blocking is fine: actions run on BlockingExecutor's threads, not the cooperative pool
      return "\(size)px"
    }
    let one = await thumbnails.execute(128)  // "128px"
    let many = try await [64, 128, 256].concurrentMap(maxConcurrent: 3) { await thumbnails.execute($0) }
    let delivered = await withCheckedContinuation { continuation in
      thumbnails.execute(512) { continuation.resume(returning: $0) }  // the completion form
    }
    // END README
    #expect(one == "128px")
    #expect(many == ["64px", "128px", "256px"])
    #expect(delivered == "512px")
  }

  @Test func sharedState() async throws {
    // README: shared state
    struct Person: Sendable {
      var first: String
      var last: String
    }
    let person = Isolated(Person(first: "Anna", last: "Adams"))
    person.write {
      $0.first = "Brian"
      $0.last = "Biggles"
    }  // no reader ever sees "Brian Adams"
    let name = person.read { "\($0.first) \($0.last)" }  // "Brian Biggles"
    let permits = AsyncSemaphore(value: 2)
    await permits.wait()
    permits.signal()
    let squares = try await (1...5).concurrentMap(maxConcurrent: 2) { $0 * $0 }  // [1, 4, 9, 16, 25], in order
    let group = DispatchGroup()
    let lease = group.enter { lease in DispatchQueue.global().async { lease.leave() } }
    lease.leave()  // a second leave is counted as redundant, never unbalances the group
    await group.wait()
    // END README
    #expect(name == "Brian Biggles")
    #expect(permits.availablePermits == 2)
    #expect(squares == [1, 4, 9, 16, 25])
    #expect(await eventually { lease.redundantLeaves == 1 })
  }
}
