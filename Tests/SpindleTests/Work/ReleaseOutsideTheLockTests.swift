import Dispatch
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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

  /// A queue dropped while its worker runs its last item: the pool's job holds the engine's last reference once the
  /// item retires, and the engine's deinit lets go of the observer's handler, whose captured object adds work to
  /// another queue from its deinit. Released while the worker thread held the pool's lock, that add took the lock again.
  @Test func anEngineWhoseWorkerHoldsItsLastReferenceEndsOutsideThePoolsLock() async {
    let target = WorkQueue(name: "pool.lock.target", maxConcurrent: 1)
    let added = Locked(false)
    var observation: WorkObservation?
    do {
      let queue = WorkQueue(name: "pool.lock.dropped")
      let canary = OnDeinit {
        target.add {}
        added.withLock { $0 = true }
      }
      observation = queue.observe { _ in _ = canary }
      queue.add { usleep(50_000) }
    }
    #expect(await eventually(within: 60) { added.withLock { $0 } }, "the engine's deinit never ended")
    await target.allFinishedIgnoringCancellation()
    _ = observation
  }

  /// D waits for A (finished, retired, dropped by its caller: D's list holds A's last reference) and for a delayed G.
  /// Cancelling D lets go of its list: A's value, whose deinit cancels G, must be released after D's lock, since G's
  /// cancellation ends D (its dependent) under that lock. Released inside it, the cancel spun for ever.
  @Test func aDependencyWhoseLastReferenceIsItsDependentsListIsReleasedAfterTheDependentsLock() async {
    let queue = WorkQueue(name: "item.lock.dependencies")
    let gate = queue.add(delay: .seconds(600)) {}
    var dependent: Work<Void>?
    do {
      let first = queue.add { OnDeinit { gate.cancel() } }
      #expect(await eventually { first.state == .finished })
      dependent = queue.add(dependencies: [first, gate]) {}
    }
    #expect(await eventually { queue.unfinishedCount == 2 }, "the first item never retired")
    let cancelled = Locked(false)
    let work = dependent!
    dependent = nil
    DispatchQueue.global().async {
      work.cancel()
      cancelled.withLock { $0 = true }
    }
    // (Not returned: its thread spins on the item's lock, and reading the item's state would spin too.)
    guard await eventually(within: 60, { cancelled.withLock { $0 } }) else {
      Issue.record("the cancel never returned")
      return
    }
    #expect(await eventually { gate.state == .cancelled && work.state == .cancelled })
  }

  /// `cancelAll()` takes the ready items out of the queue's order under the lock. An item cancelled while it was
  /// queued (retired, dropped by its caller) stays there until then, its last reference, and its observer's captured
  /// object reads the queue from its deinit: released after the lock.
  @Test func readyItemsThatCancelAllTakesOutAreReleasedAfterTheLock() async {
    let queue = WorkQueue(name: "cancel.all.ready", maxConcurrent: 1)
    let released = Locked(false)
    let hold = DispatchSemaphore(value: 0)
    let running = DispatchSemaphore(value: 0)
    queue.add {
      running.signal()
      hold.wait()
    }
    running.wait()
    do {
      let item = queue.add { 1 }
      let canary = OnDeinit {
        _ = queue.unfinishedCount
        released.withLock { $0 = true }
      }
      item.observe { _ in _ = canary }
      #expect(queue.unfinishedCount == 2)  // taken into the queue's order (the slot is busy)
      item.cancel()
      #expect(await eventually { queue.unfinishedCount == 1 }, "the cancelled item never retired")
    }
    #expect(!released.withLock { $0 }, "the queue's order no longer holds the cancelled item")
    queue.cancelAll()
    #expect(await eventually(within: 60) { released.withLock { $0 } })
    hold.signal()
    await queue.allFinishedIgnoringCancellation()
  }
}

/// Runs `action` from its deinit: user code whose last reference the engine lets go of.
final class OnDeinit: Sendable {
  let action: @Sendable () -> Void
  init(_ action: @escaping @Sendable () -> Void) { self.action = action }
  deinit { action() }
}

extension WorkQueue {
  /// Waits until nothing is unfinished (a cancelled wait is not this test's concern).
  fileprivate func allFinishedIgnoringCancellation() async {
    try? await allFinished()
  }
}
