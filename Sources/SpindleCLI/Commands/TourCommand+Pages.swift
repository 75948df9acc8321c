import Dispatch
import Foundation
import Spindle
import Synchronization
import TiltShift

// The playground's pages, re-told on Linux with Spindle. Each page prints what it does and what it measured.
extension TourCommand {
  /// A small sample photo, as the playground's `UIImage(named:)`.
  static func photo(_ seed: UInt64 = 1) -> Image { SamplePhoto(seed: seed).render(width: 480, height: 320) }

  /// The playground's `tiltShift(image)`: the real filter, plus its artificial one-second sleep shortened to 0.2 s.
  @Sendable static func tiltShift(_ image: Image) -> Image {
    usleep(200_000)
    return TiltShiftFilter().apply(to: image, bands: 1)
  }

  static func unitOfWork() throws {
    say("An Operation is a unit of work. In Spindle it is a Work<Value>: added to a WorkQueue, it runs once,")
    say("and its typed value is there when it finishes — no `outputImage` property to fish out afterwards.")
    let queue = WorkQueue(name: "tour.work", maxConcurrent: 1)
    let image = photo()
    let seconds = try time {
      let filtered = queue.add(name: "tilt-shift") { tiltShift(image) }
      let output = try filtered.wait()
      show("Work<Image> \"\(filtered.name ?? "")\" is \(filtered.state): \(output.width)×\(output.height) image")
    }
    show(String(format: "took %.2f s (the playground's filter sleeps on purpose; ours sleeps 0.2 s)", seconds))
  }

  static func queueWidth() throws {
    say("OperationQueue runs operations for you; maxConcurrentOperationCount sets how many at once.")
    say("WorkQueue's maxConcurrent does the same: 1 is a serial queue.")
    let images = (1...4).map { photo(UInt64($0)) }
    var timings: [Int: Double] = [:]
    for width in [1, 2] {
      let trace = pageTrace()
      let queue = WorkQueue(name: "tour.width\(width)", maxConcurrent: width, trace: trace)
      timings[width] = time {
        for (index, image) in images.enumerated() { queue.add(name: "filter \(index + 1)") { tiltShift(image) } }
        queue.waitUntilAllFinished()
      }
      show(String(format: "maxConcurrent %d: 4 filters in %.2f s", width, timings[width]!))
      try drawTimeline(trace, name: "tour-queue-width\(width).svg", title: "WorkQueue, maxConcurrent \(width)")
    }
    show(String(format: "width 2 took %.0f%% of the serial time", 100 * timings[2]! / timings[1]!))
  }

  static func asynchronousUnit() throws {
    say("Wrapping an asynchronous API took an AsyncOperation subclass with hand-kept KVO state.")
    say("WorkQueue.addCallback hands the body a `finish` to call whenever — and on whatever thread — the API answers.")
    let queue = WorkQueue(name: "tour.async")
    let load = queue.addCallback(name: "network load") { (finish: WorkFinish<Image>) in
      // The playground's simulateNetworkImageLoadAsync: an answer from another thread, one "network" second later.
      DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { finish(photo(2)) }
    }
    show("added; state now \(load.state)")
    let seconds = try time { _ = try load.wait() }
    show(
      String(
        format: "finished after %.2f s, state %@; a second finish() would be reported, never double-counted",
        seconds, "\(load.state)"))
  }

  static func dependencies() throws {
    say("Dependencies passed data by searching `dependencies` for a FilterDataProvider.")
    say("Here the value flows in as a typed argument: load |> filter |> output, checked by the compiler.")
    let queue = WorkQueue(name: "tour.dependencies")
    let load = queue.add(name: "load") { () -> Image in
      usleep(100_000)
      return photo(3)
    }
    let filter = queue.add(name: "filter", after: load) { image in tiltShift(image) }
    let size = queue.add(name: "output", after: filter) { image in "\(image.width)×\(image.height)" }
    show("output received: \(try size.wait()) after load → filter → output")
    let failing = queue.add(name: "load missing") { () throws -> Image in
      throw ImageError(.emptyFile, path: "missing.jpg")
    }
    let neverRuns = queue.add(after: failing) { image in tiltShift(image) }
    _ = try? neverRuns.wait()
    show("a failed load ends its dependents without running them: filter is \(neverRuns.state)")
  }

  static func pipeline() throws {
    say("In practice: a pipeline per image (load → tilt-shift → output), cancelled when the image scrolls away.")
    let trace = pageTrace()
    let queue = WorkQueue(name: "tour.pipeline", maxConcurrent: 2, trace: trace)
    let delivered = TSanVisibleMutex<[String]>([])
    var outputs: [Work<Void>] = []
    var pipelines: [[AnyWork]] = []
    for index in 1...6 {
      let load = queue.add(name: "load \(index)") { () -> Image in
        usleep(100_000)
        return photo(UInt64(index))
      }
      let filter = queue.add(name: "filter \(index)", after: load) { image in tiltShift(image) }
      let output = queue.add(name: "output \(index)", after: filter) { _ in
        delivered.withLock { $0.append("image \(index)") }
      }
      outputs.append(output)
      pipelines.append([load, filter, output])
    }
    // Images 4, 5 and 6 scroll off screen before they are done: cancel their whole pipelines.
    for pipeline in pipelines[3...] {
      for work in pipeline { work.cancel() }
    }
    queue.waitUntilAllFinished()
    show("delivered: \(delivered.withLock { $0 }.joined(separator: ", "))")
    show("states: " + outputs.enumerated().map { "\($0.offset + 1) \($0.element.state)" }.joined(separator: ", "))
    try drawTimeline(trace, name: "tour-pipeline.svg", title: "Pipelines per image, 4–6 cancelled")
  }

  static func gcdQueues() throws {
    say("GCD queues have labels, useful for debugging; IdentifiableDispatchQueue also knows when code runs on one.")
    let serial = IdentifiableDispatchQueue(label: "com.spindle.tour.worker")
    let concurrent = IdentifiableDispatchQueue(label: "com.spindle.tour.concurrent", attributes: [.concurrent])
    show("on the caller: currentLabel = \(IdentifiableDispatchQueue.currentLabel)")
    serial.sync {
      show("inside sync: currentLabel = \(IdentifiableDispatchQueue.currentLabel), isCurrent = \(serial.isCurrent)")
    }
    for (queue, name) in [(serial, "serial"), (concurrent, "concurrent")] {
      // Dispatch blocks are not WorkQueue items: with --timeline each is recorded by hand, from the moment it
      // was handed to the queue.
      let trace = pageTrace()
      let label = queue.label
      let group = DispatchGroup()
      let seconds = time {
        for index in 1...4 {
          let added = ContinuousClock.now
          queue.queue.async(group: group) {
            recorded(trace, "job \(index)", queue: label, enqueued: added) { _ = usleep(200_000) }
          }
        }
        group.wait()
      }
      show(String(format: "%@: four 0.2 s jobs in %.2f s", name, seconds))
      try drawTimeline(trace, name: "tour-gcd-\(name).svg", title: "GCD \(name) queue: four 0.2 s jobs")
    }
    let reentrant = serial.sync { serial.sync { "no deadlock" } }
    show("serial.sync inside serial.sync: \(reentrant) (plain DispatchQueue.sync would hang here)")
  }

  static func groups() throws {
    say("Dispatch groups tell you when a set of asynchronous jobs has finished; wrap a callback API with enter/leave.")
    let group = DispatchGroup()
    let finished = TSanVisibleMutex<[String]>([])
    func animate(_ name: String, seconds: Double, completion: @escaping @Sendable () -> Void) {
      DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
        completion()
        completion()  // A buggy callback API that fires twice: the lease leaves the group only once.
      }
    }
    for (name, seconds) in [("move box", 0.1), ("rotate box", 0.2), ("background", 0.4)] {
      group.enter { lease in
        animate(name, seconds: seconds) {
          finished.withLock { $0.append(name) }
          lease.leave()
        }
      }
    }
    let done = DispatchSemaphore(value: 0)
    group.notify(queue: .global()) {
      show("notify: all done — \(finished.withLock { Set($0) }.sorted().joined(separator: ", "))")
      done.signal()
    }
    done.wait()
  }

  struct Person: Sendable {
    var first: String
    var last: String
  }

  static func barrier() throws {
    say("Updating two fields from many threads without protection tears the value: a first name with another's last.")
    let names = [
      ("Charlie", "Cheesecake"), ("Delia", "Dingle"), ("Eva", "Evershed"), ("Freddie", "Frost"), ("Gina", "Gregory"),
    ]
    let valid = Set(names.map { "\($0.0) \($0.1)" } + ["Anna Adams"])

    // Unprotected: two separate locks, one per field — each write is safe, the pair is not.
    let first = TSanVisibleMutex("Anna")
    let last = TSanVisibleMutex("Adams")
    let torn = Atomic<Int>(0)
    // With --timeline each write and read is recorded: unprotected, they overlap freely.
    let unprotectedTrace = pageTrace()
    DispatchQueue.concurrentPerform(iterations: 2000) { index in
      let name = names[index % names.count]
      if index % 2 == 0 {
        recorded(unprotectedTrace, "write \(name.0)", queue: "unprotected") {
          first.withLock { $0 = name.0 }
          usleep(10)
          last.withLock { $0 = name.1 }
        }
      } else {
        let seen = recorded(unprotectedTrace, "read", queue: "unprotected") {
          first.withLock { $0 } + " " + last.withLock { $0 }
        }
        if !valid.contains(seen) { torn.add(1, ordering: .relaxed) }
      }
    }
    show("unprotected: \(torn.load(ordering: .relaxed)) of 1000 reads saw a torn name")
    try drawTimeline(
      unprotectedTrace, name: "tour-barrier-unprotected.svg", title: "Unprotected: writes and reads overlap")

    // Isolated: writes are exclusive, reads see whole values — the barrier pattern, made generic.
    let person = Isolated(Person(first: "Anna", last: "Adams"))
    let tornIsolated = Atomic<Int>(0)
    // Recorded inside the closures: each write holds Isolated alone, reads never overlap a write.
    let isolatedTrace = pageTrace()
    DispatchQueue.concurrentPerform(iterations: 2000) { index in
      let name = names[index % names.count]
      if index % 2 == 0 {
        person.write { person in
          recorded(isolatedTrace, "write \(name.0)", queue: "Isolated") {
            person.first = name.0
            person.last = name.1
          }
        }
      } else {
        let seen = person.read { person in
          recorded(isolatedTrace, "read", queue: "Isolated") { "\(person.first) \(person.last)" }
        }
        if !valid.contains(seen) { tornIsolated.add(1, ordering: .relaxed) }
      }
    }
    person.writeAsync { $0.last = "Frost" }
    show("Isolated: \(tornIsolated.load(ordering: .relaxed)) of 1000 reads saw a torn name")
    try drawTimeline(isolatedTrace, name: "tour-barrier-isolated.svg", title: "Isolated: each write alone")
    show("after writeAsync { $0.last = \"Frost\" } the next read sees: \(person.read { "\($0.first) \($0.last)" })")
  }
}
