import Dispatch
import Testing

@testable import Spindle

/// What a queue's critical section lets go of can be user code's last reference to the queue itself (a handler that
/// captured it): its deinit takes the queue's lock, so the release must come after the lock. Inside it, the thread
/// waited for ever on a lock it held (debug builds now stop there instead: `PlatformMutex` checks for it).
@Suite("Work: releases outside the queue's lock")
struct ReleaseOutsideTheLockTests {
  /// A queue kept alive only by its own observer's handler; ending the observation releases the handler, the queue,
  /// and the queue's engine.
  @Test(arguments: [false, true])
  func anObserverThatHoldsTheLastReferenceToItsQueueEnds(byDroppingTheObservation: Bool) async throws {
    weak var weakQueue: WorkQueue?
    var observation: WorkObservation?
    do {
      let queue = WorkQueue(name: "observer.holds.queue")
      weakQueue = queue
      let seen = Locked(0)
      observation = queue.observe { event in
        if case .finished = event.kind, queue.unfinishedCount >= 0 { seen.withLock { $0 += 1 } }
      }
      #expect(try await queue.add { 1 }.value == 1)
      #expect(await eventually { seen.withLock { $0 } == 1 })
    }
    #expect(weakQueue != nil, "the handler holds the queue")
    if byDroppingTheObservation {
      observation = nil
    } else {
      observation?.cancel()
    }
    #expect(await eventually { weakQueue == nil })
    _ = observation
  }
}
