import Dispatch
import Foundation
import Testing

@testable import Spindle

private struct Refused: Error {}

/// `WorkTrace.record(name:queue:enqueued:_:)`: work that runs outside WorkQueue, in the same trace.
@Suite struct WorkTraceManualRecordingTests {
  @Test func dispatchBlocksAreRecordedWithTheirThreadWaitAndOutcome() async throws {
    let trace = WorkTrace()
    let serial = DispatchQueue(label: "gcd.serial")
    let group = DispatchGroup()
    let added = ContinuousClock.now
    // The thread each block ran on, as the block saw it.
    let ranOn = Locked<[String: UInt64]>([:])
    for index in 1...3 {
      serial.async(group: group) {
        trace.record(name: "job \(index)", queue: "gcd.serial", enqueued: added) {
          ranOn.withLock { $0["job \(index)"] = currentThreadID() }
          _ = usleep(5_000)
        }
      }
    }
    await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
    let value = trace.record(name: "inline", queue: "caller") { 42 }
    #expect(value == 42, "the body's value comes back")
    #expect(throws: Refused.self) { try trace.record(name: "refused", queue: "caller") { throw Refused() } }
    #expect(throws: CancellationError.self) {
      try trace.record(name: "stopped", queue: "caller") { throw CancellationError() }
    }

    let events = Dictionary(uniqueKeysWithValues: trace.events.map { ($0.name, $0) })
    #expect(Set(events.keys) == ["job 1", "job 2", "job 3", "inline", "refused", "stopped"])
    #expect(Set(trace.events.map(\.id)).count == 6, "every item has its own id")
    let jobs = (1...3).compactMap { events["job \($0)"] }
    #expect(jobs.allSatisfy { $0.queue == "gcd.serial" && $0.outcome == .finished && $0.ran && $0.attempts == 1 })
    #expect(jobs.allSatisfy { $0.duration >= .milliseconds(5) })
    // One serial queue: the jobs ran one after another, and the later ones waited for the earlier.
    for (earlier, later) in zip(jobs, jobs.dropFirst()) {
      #expect(later.start >= earlier.end)
      #expect(later.enqueued == earlier.enqueued, "all were handed over at the same moment")
    }
    #expect(jobs[2].waited >= .milliseconds(10), "job 3 waited for jobs 1 and 2: \(jobs[2].waited)")
    #expect(events["inline"]?.waited == .zero, "without `enqueued`, added when it started")
    #expect(events["inline"]?.thread == currentThreadID(), "recorded on the calling thread")
    // Each job is recorded on the thread that ran its block. (Not "a thread other than this test's": on Linux the
    // cooperative pool that runs this test is made of Dispatch's threads, so one of them may have run a job.)
    let threads = ranOn.withLock { $0 }
    #expect(jobs.allSatisfy { threads[$0.name] == $0.thread }, "recorded on the threads that ran the blocks")
    #expect(events["refused"]?.outcome == .failed)
    #expect(events["stopped"]?.outcome == .cancelled)
  }

  @Test func recordedItemsShareTheTimelineWithQueueItems() async throws {
    let trace = WorkTrace()
    let queue = WorkQueue(name: "work", trace: trace)
    queue.add(name: "queued") { usleep(1_000) }
    try await queue.allFinished()
    trace.record(name: "by hand", queue: "dispatch") { _ = usleep(1_000) }
    #expect(trace.events.map(\.name) == ["queued", "by hand"], "in the order they completed")
    let svg = WorkTimeline(trace: trace, title: "mixed").svg()
    #expect(svg.contains("2 items · 2 queues"), "\(svg.prefix(600))")
  }
}
