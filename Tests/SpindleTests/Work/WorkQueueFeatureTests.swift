import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// WorkQueue part two: barriers, batches, delays, timeouts, retries, conditions, exclusivity, observers,
/// progress, and how they combine.
@Suite("WorkQueue features")
struct WorkQueueFeatureTests {
  @Test("a barrier runs after everything added before it and before everything added after it")
  func barrier() async throws {
    let queue = WorkQueue(name: "barrier", maxConcurrent: 4)
    let log = Locked<[String]>([])
    for index in 0..<20 {
      queue.add {
        usleep(UInt32(100 * (index % 3)))
        log.withLock { $0.append("before") }
      }
    }
    let failing: Work<Int> = queue.add { throw TestError(code: 1) }
    let gate = queue.addBarrier { log.withLock { $0.append("barrier") } }
    for _ in 0..<20 { queue.add { log.withLock { $0.append("after") } } }
    try await gate.value
    try await queue.allFinished()
    let entries = log.withLock { $0 }
    #expect(entries.count == 41)
    #expect(entries[20] == "barrier", "entries: \(entries)")
    #expect(entries.prefix(20).allSatisfy { $0 == "before" })
    #expect(failing.state == .failed)
  }

  @Test("a cancelled barrier still orders: later work runs after what came before it")
  func cancelledBarrierOnSuspendedQueue() async throws {
    let queue = WorkQueue(name: "barrier-suspended", maxConcurrent: 2)
    queue.suspend()
    let first = queue.add { 1 }
    let barrier = queue.addBarrier {}
    let later = queue.add { 2 }
    barrier.cancel()
    #expect(later.state == .pending)
    queue.resume()
    #expect(try await later.value == 2)
    #expect(try await first.value == 1)
    #expect(barrier.state == .cancelled)
  }

  @Test("batch: nothing starts before the batch is in, so priorities order within it")
  func batchOrdersByPriority() async throws {
    let queue = WorkQueue(name: "batch", maxConcurrent: 1)
    let order = Locked<[Int]>([])
    queue.batch {
      for index in 0..<50 {
        queue.add(priority: index == 49 ? .veryHigh : .normal) { order.withLock { $0.append(index) } }
      }
    }
    try await queue.allFinished()
    #expect(order.withLock { $0 }.first == 49)
  }

  @Test("delay: the work starts no earlier than asked and holds no slot while waiting")
  func delay() async throws {
    let queue = WorkQueue(name: "delay", maxConcurrent: 1)
    let start = ContinuousClock.now
    let later = queue.add(delay: .milliseconds(150)) { ContinuousClock.now }
    // Waits far longer than the test: had it held the only slot while it waits, nothing after it could run. (Not
    // "`meanwhile` ran within `later`'s 150 ms", which a loaded machine can miss without anything being wrong.)
    let parked = queue.add(name: "parked", delay: .seconds(600)) { 0 }
    let meanwhile = queue.add { ContinuousClock.now }
    let ranAt = try await later.value
    #expect(ranAt - start >= .milliseconds(150))
    #expect(await eventually { meanwhile.state == .finished }, "a delayed item held the slot: \(parked.state)")
    #expect(parked.state == .pending)
    parked.cancel()
    await #expect(throws: CancellationError.self) { try await parked.value }
  }

  @Test("timeout: the work fails with WorkTimeoutError naming it, and its body sees cancellation")
  func timeout() async throws {
    let queue = WorkQueue(name: "net")
    let sawCancel = Atomic<Bool>(false)
    let page = queue.add(name: "page", timeout: .milliseconds(50)) { () -> Int in
      let stop = DispatchSemaphore(value: 0)
      WorkContext.current?.onCancel {
        sawCancel.store(true, ordering: .relaxed)
        stop.signal()
      }
      // Returns as soon as the timeout cancels it; the bound only ends a broken timeout (a starved Dispatch pool,
      // which fires the timeout, once held it past a 10 s bound).
      _ = stop.wait(timeout: .now() + 120 * hangBoundScale)
      return 1
    }
    do {
      _ = try await page.value
      Issue.record("must time out")
    } catch let error as WorkTimeoutError {
      #expect(error.work == "page" && error.queue == "net")
      #expect(error.description.contains("'page'"))
    }
    let cancelled = sawCancel.load(ordering: .relaxed)
    #expect(cancelled)
    let asyncPage = queue.add(name: "async", timeout: .milliseconds(50)) { () async throws -> Int in
      try await Task.sleep(for: .seconds(120 * hangBoundScale))
      return 1
    }
    await #expect(throws: WorkTimeoutError.self) { try await asyncPage.value }
    let quick = queue.add(timeout: .seconds(10)) { 5 }
    #expect(try await quick.value == 5)
  }

  @Test("retry: attempts until success, ends with the last error, observers see each attempt")
  func retry() async throws {
    let queue = WorkQueue(name: "retry", maxConcurrent: 1)
    let calls = Atomic<Int>(0)
    let flaky = queue.add(retry: .fixed(maxAttempts: 5, delay: .milliseconds(5))) { () -> Int in
      let call = calls.add(1, ordering: .relaxed).newValue
      if call < 3 { throw TestError(code: call) }
      return call
    }
    #expect(try await flaky.value == 3)
    #expect(flaky.attempts == 3)
    let failures = Atomic<Int>(0)
    let hopeless: Work<Int> = queue.add(retry: .exponential(maxAttempts: 3, initial: .milliseconds(2))) {
      throw TestError(code: failures.add(1, ordering: .relaxed).newValue)
    }
    await #expect(throws: TestError(code: 3)) { try await hopeless.value }
    let picky = queue.add(retry: .fixed(maxAttempts: 5, when: { ($0 as? TestError)?.code != 7 })) { () -> Int in
      throw TestError(code: 7)
    }
    await #expect(throws: TestError(code: 7)) { try await picky.value }
    #expect(picky.attempts == 1)
  }

  /// A retried callback body gets a new `finish` for each attempt. The second attempt's was taken for a repeated
  /// call of the first's and ignored, so the work never completed and held its slot for ever.
  @Test("retry: each attempt of a callback body has its own finish; an earlier attempt's cannot end a later one")
  func retriedCallbackBodies() async throws {
    struct Flaky: Error {}
    let reports = MisuseRecorder.shared
    let queue = WorkQueue(name: "retry-callbacks", maxConcurrent: 1)
    let attempts = Atomic<Int>(0)
    let first = Locked<WorkFinish<Int>?>(nil)
    let name = "flaky-\(UInt64.random(in: 0...UInt64.max))"
    let work: Work<Int> = queue.addCallback(name: name, retry: WorkRetry(maxAttempts: 3, delay: { _ in .zero })) {
      finish in
      let attempt = attempts.add(1, ordering: .relaxed).newValue
      if attempt == 1 {
        first.withLock { $0 = finish }  // kept past this attempt's end
        DispatchQueue.global().async { finish(Flaky()) }
      } else {
        // The first attempt's finish, called again while this attempt runs (ignored and reported), then released
        // (which must not fail this attempt as a dropped finish).
        first.withLock { kept in
          kept?(99)
          kept = nil
        }
        DispatchQueue.global().async { finish(attempt) }
      }
    }
    // Bounded: broken, the work never completes.
    #expect(await eventually { work.result != nil }, "the retried work completed")
    guard work.result != nil else { return }
    #expect(try work.result?.get() == 2)
    #expect(attempts.load(ordering: .relaxed) == 2)
    #expect(work.attempts == 2)
    #expect(reports.messages(containing: name).count == 1, "the first attempt's late call is reported")
  }

  @Test("retry: cancelling stops the retrying; waiting between attempts holds no slot")
  func cancelStopsRetry() async throws {
    let queue = WorkQueue(name: "retry-cancel", maxConcurrent: 1)
    let failing: Work<Int> = queue.add(retry: .fixed(maxAttempts: 1_000_000, delay: .milliseconds(50))) {
      throw TestError(code: 1)
    }
    let other = queue.add { 9 }
    #expect(try await other.value == 9)  // ran while `failing` waited for its next attempt
    failing.cancel()
    await #expect(throws: CancellationError.self) { try await failing.value }
    #expect(failing.attempts < 1_000_000)
  }

  @Test("conditions: skip ends cancelled or with a value, fail fails, and the body never runs")
  func conditions() async throws {
    let queue = WorkQueue(name: "conditions")
    let ran = Atomic<Int>(0)
    let skipped = queue.add(condition: .skip(unless: { false })) { ran.add(1, ordering: .relaxed) }
    let valued = queue.add(condition: .skip(unless: { false }, value: 42)) { () -> Int in
      ran.add(1, ordering: .relaxed)
      return 0
    }
    let failed = queue.add(condition: .fail(unless: { false }, error: TestError(code: 5))) { () -> Int in
      ran.add(1, ordering: .relaxed)
      return 0
    }
    let runs = queue.add(condition: .skip(unless: { true })) { () -> Int in 7 }
    await #expect(throws: CancellationError.self) { try await skipped.value }
    #expect(try await valued.value == 42)
    await #expect(throws: TestError(code: 5)) { try await failed.value }
    #expect(try await runs.value == 7)
    #expect(ran.load(ordering: .relaxed) == 0)
  }

  @Test("exclusive: items with the same key never overlap, across queues, and waiting holds no slot")
  func exclusivity() async throws {
    let a = WorkQueue(name: "a", maxConcurrent: 4)
    let b = WorkQueue(name: "b", maxConcurrent: 1)
    let inside = Atomic<Int>(0)
    let overlap = Atomic<Bool>(false)
    var all: [Work<Void>] = []
    for index in 0..<40 {
      let queue = index.isMultiple(of: 2) ? a : b
      all.append(
        queue.add(exclusive: "camera") {
          if inside.add(1, ordering: .relaxed).newValue > 1 { overlap.store(true, ordering: .relaxed) }
          usleep(200)
          inside.subtract(1, ordering: .relaxed)
        })
    }
    // A plain item on the width-1 queue still runs while camera items wait for the key.
    let plain = b.add { 1 }
    #expect(try await plain.value == 1)
    for work in all { try await work.value }
    let overlapped = overlap.load(ordering: .relaxed)
    #expect(!overlapped)
  }

  @Test("exclusive: waiting from a body that holds the key for work that needs it throws, not hangs")
  func exclusiveSelfWait() async throws {
    let queue = WorkQueue(name: "key", maxConcurrent: 2)
    let outer = queue.add(name: "outer", exclusive: "k") { () -> Int in
      let inner = queue.add(name: "inner", exclusive: "k") { 1 }
      return (try? inner.wait()) ?? -1
    }
    #expect(try await outer.value == -1)
  }

  // The hang a CI run found: `inner` is briefly `.running` while a worker finds its key taken and parks it again.
  // A check that trusted "started" let `wait()` block in that window, and the two waited for each other forever.
  @Test("exclusive self-wait throws at every moment of the inner item's start, never hangs (race, 2,000 laps)")
  func exclusiveSelfWaitRace() async throws {
    let laps = Stress.size(small: 2_000, large: 20_000)
    let queue = WorkQueue(name: "key-race", maxConcurrent: 2)
    let done = Atomic<Int>(0)
    let wrong = Atomic<Int>(0)
    // Off the cooperative pool: with the bug, a lap blocks its thread for good, and the test must fail, not hang.
    DispatchQueue.global().async {
      for lap in 0..<laps {
        let outer = queue.add(name: "outer", exclusive: "race") { () -> Int in
          let inner = queue.add(name: "inner", exclusive: "race") { 1 }
          // Spin a different while each lap, to wait at every point of the inner item's start.
          let spin = ContinuousClock.now + .microseconds(lap % 50)
          while ContinuousClock.now < spin {}
          do {
            _ = try inner.wait()
            return 1
          } catch {
            return error is WorkDeadlockError ? -1 : 2
          }
        }
        if (try? outer.wait()) != -1 { wrong.add(1, ordering: .relaxed) }
        done.add(1, ordering: .relaxed)
      }
    }
    // A hang stops the laps for good; a loaded machine (a sanitizer, other suites) only slows them down: fail when
    // no lap ends for 60 s, not when the laps take longer than 60 s in all.
    var progressing = true
    while progressing && done.load(ordering: .relaxed) < laps {
      let before = done.load(ordering: .relaxed)
      progressing = await eventually(within: 60) { done.load(ordering: .relaxed) != before }
    }
    let finished = done.load(ordering: .relaxed) == laps
    #expect(finished, "a self-wait hung after \(done.load(ordering: .relaxed)) of \(laps) laps")
    #expect(wrong.load(ordering: .relaxed) == 0)
  }

  // Work that retries (or waits for an exclusivity key) gives its slot back and needs one again: waiting bodies
  // must leave it one, as they do for work that has not started.
  @Test("waiting for work between retry attempts never takes its last slot: the extra waiter throws, no hang")
  func waitForRetryingWork() async throws {
    let queue = WorkQueue(name: "retry-wait", maxConcurrent: 2)
    let firstAttempt = Gate()
    let attempts = Atomic<Int>(0)
    let flaky = queue.add(name: "flaky", retry: .fixed(maxAttempts: 3, delay: .milliseconds(20))) { () -> Int in
      if attempts.add(1, ordering: .relaxed).newValue == 1 {
        firstAttempt.wait()
        throw TestError(code: 1)
      }
      return 5
    }
    #expect(await eventually { flaky.state == .running })
    let outcomes = Locked<[String]>([])
    func waiter(_ name: String) -> Work<Void> {
      queue.add(name: name) {
        do {
          let value = try flaky.wait()
          outcomes.withLock { $0.append("\(name): \(value)") }
        } catch let error as WorkDeadlockError {
          outcomes.withLock { $0.append("\(name): refused") }
          #expect(error.description.contains("flaky"))
        } catch {
          outcomes.withLock { $0.append("\(name): \(error)") }
        }
      }
    }
    let first = waiter("x")  // takes the second slot while `flaky` runs its first attempt
    #expect(await eventually { first.state == .running })
    let second = waiter("y")  // starts when the first attempt fails and gives its slot back
    firstAttempt.open()
    let finished = await eventually { first.state == .finished && second.state == .finished }
    #expect(finished, "the waiters and the retrying work waited for each other: \(String(reflecting: queue))")
    guard finished else { return }  // the deadlock holds both slots for good; awaiting `flaky` would hang
    // One waiter gets the value and the one that would hold the last free slot is refused. Which is which depends
    // on which reached `flaky.wait()` first (x usually; a preempted x lets y go first).
    let results = outcomes.withLock { $0 }.map { $0.split(separator: ": ").last.map(String.init) ?? $0 }
    #expect(results.sorted() == ["5", "refused"], "\(outcomes.withLock { $0 })")
    #expect(try await flaky.value == 5)
  }

  @Test("cancel(reason:) shows the reason in the error and to observers")
  func cancelReason() async throws {
    let queue = WorkQueue(name: "reasons", maxConcurrent: 1)
    let events = Locked<[String]>([])
    let observation = queue.observe { event in events.withLock { $0.append("\(event.kind)") } }
    let gate = Gate()
    queue.add { gate.wait() }
    let thumb = queue.add(name: "thumb") { 1 }
    thumb.cancel(reason: "scrolled away")
    gate.open()
    do {
      _ = try await thumb.value
      Issue.record("must be cancelled")
    } catch let error as WorkCancellationError {
      #expect(error.description == "work 'thumb' was cancelled: scrolled away")
    }
    #expect(thumb.state == .cancelled)
    try await queue.allFinished()
    #expect(events.withLock { $0 }.contains { $0.contains("scrolled away") })
    observation.cancel()
  }

  /// Running work cancelled with a reason ends with that reason whatever its body's kind: a plain synchronous body
  /// that threw `CancellationError` ended as a bare `CancellationError` (its ending skipped the step that applies the
  /// reason), where an `async` body ended with `WorkCancellationError`.
  @Test("cancel(reason:) on running work: the error carries the reason for sync, async and callback bodies alike")
  func cancelReasonWhileRunning() async throws {
    let queue = WorkQueue(name: "running-reasons", maxConcurrent: 3)
    let started = Atomic<Int>(0)
    let sync = queue.add(name: "sync") { () throws -> Int in
      started.add(1, ordering: .relaxed)
      while WorkContext.current?.isCancelled == false { usleep(200) }
      try WorkContext.current?.checkCancellation()
      return 1
    }
    let async = queue.add(name: "async") { () async throws -> Int in
      started.add(1, ordering: .relaxed)
      while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(1)) }
      throw CancellationError()
    }
    let callback: Work<Int> = queue.addCallback(name: "callback") { finish in
      started.add(1, ordering: .relaxed)
      finish.onCancel { finish(CancellationError()) }
    }
    #expect(await eventually { started.load(ordering: .relaxed) == 3 })
    for work in [sync, async, callback] { work.cancel(reason: "user left") }
    for (label, work) in [("sync", sync), ("async", async), ("callback", callback)] {
      do {
        _ = try await work.value
        Issue.record("\(label): must be cancelled")
      } catch let error as WorkCancellationError {
        #expect(error.reason == "user left", "\(label)")
      } catch {
        Issue.record("\(label): ended with \(error), not the reason")
      }
      #expect(work.state == .cancelled, "\(label)")
    }
  }

  @Test("observers: every item's events, in order, exactly once; the stream and item observers too")
  func observers() async throws {
    let queue = WorkQueue(name: "observed", maxConcurrent: 2)
    let counts = Locked<[String: Int]>([:])
    let observation = queue.observe { event in
      let key: String =
        switch event.kind {
        case .added: "added"
        case .willStart: "willStart"
        case .started: "started"
        case .finished: "finished"
        case .retrying: "retrying"
        case .cancelRequested: "cancel"
        }
      counts.withLock { $0[key, default: 0] += 1 }
    }
    let perItem = Locked<[String]>([])
    let items = (0..<100).map { index in queue.add { index } }
    items[0].observe { event in perItem.withLock { $0.append("\(event.kind)") } }
    for item in items { _ = try await item.value }
    try await queue.allFinished()
    #expect(await eventually(within: 60) { counts.withLock { $0["finished"] } == 100 })
    #expect(counts.withLock { $0["added"] } == 100)
    #expect(counts.withLock { $0["finished"] } == 100)
    #expect(counts.withLock { ($0["started"] ?? 0) <= 100 })
    observation.cancel()
    queue.add {}
    try await queue.allFinished()
    #expect(counts.withLock { $0["added"] } == 100)
  }

  @Test("progress counts the current burst; progressUpdates reports it")
  func progress() async throws {
    let queue = WorkQueue(name: "progress", maxConcurrent: 1)
    queue.suspend()
    for _ in 0..<10 { queue.add {} }
    #expect(queue.progress == WorkProgress(completed: 0, total: 10))
    let updates = queue.progressUpdates
    let watcher = Task {
      for await p in updates where p.completed == p.total && p.total == 10 { return true }
      return false
    }
    queue.resume()
    try await queue.allFinished()
    #expect(queue.progress == WorkProgress(completed: 10, total: 10))
    #expect(await watcher.value)
    queue.add {}
    #expect(queue.progress.total == 1)
  }

  /// A loop over a queue's stream (a progress bar's task, SpindleFoundation's `makeProgress`) once waited for ever
  /// when the queue went away, and the task and the stream were never freed (found by LeakSanitizer); an observation
  /// kept by its caller kept the queue's engine alive.
  @Test("progressUpdates and events end once the queue is gone, and neither keeps the queue alive")
  func streamsEndWithTheQueue() async throws {
    var queue: WorkQueue? = WorkQueue(name: "ending", maxConcurrent: 2)
    weak let engine = queue!.engine
    let progress = queue!.progressUpdates
    let events = queue!.events
    let observation = queue!.observe { _ in }
    let progressEnded = Locked(false)
    let eventsSeen = Locked(0)
    let eventsEnded = Locked(false)
    let progressLoop = Task {
      for await _ in progress {}
      progressEnded.withLock { $0 = true }
    }
    let eventsLoop = Task {
      for await _ in events { eventsSeen.withLock { $0 += 1 } }
      eventsEnded.withLock { $0 = true }
    }
    for index in 0..<20 { queue!.add { index } }
    try await queue!.allFinished()
    #expect(await eventually { eventsSeen.withLock { $0 } >= 20 }, "the stream saw the events first")
    #expect(!progressEnded.withLock { $0 } && !eventsEnded.withLock { $0 }, "a live queue's streams go on")
    queue = nil
    #expect(await eventually { engine == nil }, "neither the streams nor the observation keep it")
    #expect(await eventually { progressEnded.withLock { $0 } }, "progressUpdates ended")
    #expect(await eventually { eventsEnded.withLock { $0 } }, "events ended")
    observation.cancel()  // after its queue is gone: nothing to remove, no crash
    // Bounded even if a stream never ended: cancelling its task ends the loop.
    progressLoop.cancel()
    eventsLoop.cancel()
    await progressLoop.value
    await eventsLoop.value
  }

  @Test("dependencies and the stuck-queue report name what each item waits for")
  func dependenciesAndReport() async throws {
    let queue = WorkQueue(name: "report", maxConcurrent: 1)
    let gate = Gate()
    let blocker = queue.add(name: "blocker") { gate.wait() }
    let child = queue.add(name: "child", dependencies: [blocker]) { 1 }
    #expect(child.dependencies.map(\.name) == ["blocker"])
    #expect(await eventually(within: 60) { blocker.state == .running })
    let report = String(reflecting: queue)
    #expect(report.contains("WorkQueue 'report': width 1, 1 running"))
    #expect(report.contains("pending 'child' (normal), waits for 'blocker'"))
    try await Task.sleep(for: .milliseconds(300))
    let later = String(reflecting: queue)
    let running = later.split(separator: "\n").first { $0.contains("running 'blocker' (normal), for ") }
    let seconds = running.flatMap { $0.split(separator: "for ").last }.flatMap { Double($0.dropLast(2)) }
    #expect(seconds.map { $0 >= 0.2 && $0 < 600 } == true, "how long it runs: \(later)")
    gate.open()
    _ = try await child.value
    #expect(child.dependencies.isEmpty)
  }
}

@Suite("WorkQueue groups and the main queue")
struct WorkGroupTests {
  @Test("a group's value is its final item's; cancelling it cancels its members")
  func groupValueAndCancel() async throws {
    let queue = WorkQueue(name: "album", maxConcurrent: 2)
    let album = queue.group(name: "album") { group in
      let thumbs = (1...10).map { p in group.add { p * 10 } }
      return group.add(afterAll: thumbs) { $0 }
    }
    #expect(try await album.value == Array(stride(from: 10, through: 100, by: 10)))
    let gate = Gate()
    let stuck = queue.group(name: "stuck") { group in
      let slow = group.add { gate.wait() }
      let pending = (0..<5).map { _ in group.add(after: slow) { 1 } }
      return group.add(afterAll: pending) { $0.count }
    }
    stuck.cancel()
    gate.open()
    await #expect(throws: CancellationError.self) { try await stuck.value }
    try await queue.allFinished()
    #expect(queue.unfinishedCount == 0)
  }

  @Test("a group's progress counts its members as one: completed of members, streamed, ending when all are done")
  func groupProgress() async throws {
    let queue = WorkQueue(name: "album", maxConcurrent: 2)
    let gate = Gate()
    let album = queue.group(name: "album") { group in
      let quick = (0..<3).map { p in group.add { p } }
      let slow = group.add { gate.wait() }
      let thumbs = quick + [group.add(after: slow) { 99 }]
      let last = group.add(afterAll: thumbs) { $0.count }
      #expect(group.progress.total == 6)
      return last
    }
    #expect(await eventually { album.progress.completed == 3 })
    #expect(album.progress.total == 6, "the final item counts once although build returns it")
    #expect(album.progress.fractionCompleted == 0.5)
    let updates = Task {
      var seen: [WorkProgress] = []
      for await p in album.progressUpdates { seen.append(p) }
      return seen
    }
    gate.open()
    #expect(try await album.value == 4)
    let seen = await updates.value
    #expect(seen.last == WorkProgress(completed: 6, total: 6), "the stream ends with every member done")
    #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.completed <= $1.completed }, "never goes back: \(seen)")
    #expect(album.progress == WorkProgress(completed: 6, total: 6))

    // A cancelled group still reaches the end: its members complete as cancelled.
    let blocker = Gate()
    let stuck = queue.group(name: "stuck") { group in
      let slow = group.add { blocker.wait() }
      return group.add(afterAll: (0..<4).map { _ in group.add(after: slow) { 1 } }) { $0.count }
    }
    stuck.cancel(reason: "scrolled away")
    blocker.open()
    var last = WorkProgress(completed: 0, total: 0)
    for await p in stuck.progressUpdates { last = p }
    #expect(last == WorkProgress(completed: 6, total: 6))

    // Plain work: 0 of 1, then 1 of 1.
    let one = queue.add { 1 }
    _ = try await one.value
    #expect(one.progress == WorkProgress(completed: 1, total: 1))
    var plain: [WorkProgress] = []
    for await p in one.progressUpdates { plain.append(p) }
    #expect(plain.last == WorkProgress(completed: 1, total: 1))
    try await queue.allFinished()
  }

  @Test("a group times out as one, and a retry inside a group is cancelled with it")
  func groupTimeoutWithRetry() async throws {
    let queue = WorkQueue(name: "g", maxConcurrent: 2)
    let attempts = Atomic<Int>(0)
    let group = queue.group(name: "sync", timeout: .milliseconds(100)) { group in
      group.add(retry: .fixed(maxAttempts: 1000, delay: .milliseconds(5))) { () -> Int in
        attempts.add(1, ordering: .relaxed)
        throw TestError(code: 1)
      }
    }
    do {
      _ = try await group.value
      Issue.record("must time out")
    } catch let error as WorkTimeoutError {
      #expect(error.work == "sync")
    }
    try await queue.allFinished()
    let made = attempts.load(ordering: .relaxed)
    try await Task.sleep(for: .milliseconds(50))
    #expect(attempts.load(ordering: .relaxed) == made, "retrying must stop with the group")
  }

  @Test("WorkQueue.main runs bodies on the main actor, in dependency order")
  func mainQueue() async throws {
    let queue = WorkQueue(name: "bg")
    let value = queue.add { 20 }
    let ui = WorkQueue.main.add(after: value) { @MainActor v in
      MainActor.assertIsolated()
      return v + 1
    }
    #expect(try await ui.value == 21)
    let asyncUI = WorkQueue.main.add { @MainActor () async -> Int in 5 }
    #expect(try await asyncUI.value == 5)
  }

  @Test("WorkQueue.main works after dispatchMain()")
  func mainQueueAfterDispatchMain() async {
    await #expect(processExitsWith: .success) {
      startDispatchMainOnAPlainThread()
      let ui = WorkQueue.main.add { @MainActor in 41 + 1 }
      let value = try? await ui.value
      exit(value == 42 ? EXIT_SUCCESS : EXIT_FAILURE)
    }
  }

  @Test("a barrier added to a suspended queue, and lowering the width while bodies run, keep order and width")
  func interactions() async throws {
    let queue = WorkQueue(name: "mix", maxConcurrent: 3)
    queue.suspend()
    let log = Locked<[String]>([])
    for _ in 0..<6 {
      queue.add {
        usleep(500)
        log.withLock { $0.append("a") }
      }
    }
    queue.addBarrier { log.withLock { $0.append("|") } }
    for _ in 0..<6 { queue.add(exclusive: "x") { log.withLock { $0.append("b") } } }
    queue.resume()
    queue.maxConcurrent = 1
    try await queue.allFinished()
    #expect(log.withLock { $0 } == Array(repeating: "a", count: 6) + ["|"] + Array(repeating: "b", count: 6))
  }

  @Test("the timeout of an exclusive item counts from its start, not while it waits for the key")
  func exclusiveTimeout() async throws {
    let queue = WorkQueue(name: "ex-timeout", maxConcurrent: 2)
    // The holder keeps the key past the waiter's timeout counted from its add; the waiter's own run, from its
    // start, has all of that timeout (half a second; 100 ms is time a loaded machine can spend between two lines).
    let holder = queue.add(exclusive: "disk") { usleep(600_000) }
    let waiter = queue.add(timeout: .milliseconds(500), exclusive: "disk") { 1 }
    _ = try await holder.value
    #expect(try await waiter.value == 1)
  }
}

@Suite("WorkQueue priority changes")
struct WorkPriorityChangeTests {
  @Test("raising the priority of ready work moves it ahead; started work keeps its place")
  func raisePriority() async throws {
    let queue = WorkQueue(name: "reprioritize", maxConcurrent: 1)
    let gate = Gate()
    let order = Locked<[String]>([])
    let blocker = queue.add { gate.wait() }
    queue.add { order.withLock { $0.append("a") } }
    queue.add { order.withLock { $0.append("b") } }
    let late = queue.add(name: "late", priority: .low) { order.withLock { $0.append("late") } }
    #expect(await eventually(within: 60) { blocker.state == .running })
    late.priority = .veryHigh
    #expect(late.priority == .veryHigh)
    blocker.priority = .veryLow  // running: no effect on anything
    gate.open()
    try await queue.allFinished()
    #expect(order.withLock { $0 } == ["late", "a", "b"])
    late.priority = .low  // finished: no effect
    #expect(late.priority == .veryHigh)
  }
}
