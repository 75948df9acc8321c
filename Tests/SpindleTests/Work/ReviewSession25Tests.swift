import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// A review of the checked awaits of `async` bodies (`Work.value` through `checkedValue(by:)`, `WorkQueue.allFinished()`,
/// `AnyWork.isBodyTask`): false refusals (an await refused that would have ended), races of the bookkeeping
/// (`BlockedWaits`, `BodyWaits`) with cancellation, and the simple hangs the documentation promises to refuse. Every
/// wait is bounded: a hang fails the test instead of hanging it.
@Suite("Work: review 25", .serialized, .offThePool)
struct ReviewSession25Tests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot

  struct Boom: Error {}

  /// An executor of one thread that a test can hold: a task whose preference it is cannot resume while it is held.
  static let paused = BlockingExecutor(name: "r25.paused", threadCount: 1)

  /// "CancellationError", "refused: …" or the error's type.
  static func describe(_ error: any Error) -> String {
    if error is WorkDeadlockError { return "refused: \(error)" }
    return "\(type(of: error))"
  }

  /// Suspends until the current task is cancelled (at most 10 seconds), without blocking a thread.
  static func untilCancelled() async {
    let deadline = ContinuousClock.now + .seconds(10)
    while !Task.isCancelled && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(1))
    }
  }

  /// Whether `waiter`'s body is recorded in `BodyWaits` as waiting for anything.
  static func hasBodyWaits(_ waiter: AnyWork) -> Bool {
    var found = false
    BodyWaits.shared.forEachTarget(of: waiter) { _ in found = true }
    return found
  }

  // MARK: - False refusals: the awaiting task is cancelled already

  /// Was a bug, fixed with this review (it failed before): Width 1: A's task is cancelled (`cancel()`), then A awaits `later`, unstarted
  /// on the same serial queue. Unchecked, the await of a cancelled task ends at once with `CancellationError` (the
  /// documented behaviour of `value`), and A, letting it escape, ends cancelled. Checked first, it is refused with
  /// `WorkDeadlockError`: an await that would have ended at once is refused, and the cancelled work ends *failed*
  /// with a deadlock error (a `cancelAll()` at shutdown then reports deadlocks). Fix: `checkedValue(by:)` throws
  /// `CancellationError` before the check when `Task.isCancelled`.
  @Test func aCancelledAsyncBodysAwaitEndsWithCancellationNotARefusal() async throws {
    let queue = WorkQueue(name: "r25.cancelled.value", maxConcurrent: 1)
    let result = Slot()
    queue.suspend()
    let later = queue.add(name: "L", priority: .veryLow) { 2 }
    let a = queue.add(name: "A", priority: .veryHigh) { () async throws -> Int in
      await Self.untilCancelled()
      do {
        return try await later.value
      } catch {
        result.set(Self.describe(error))
        throw error
      }
    }
    queue.resume()
    #expect(await eventually(within: 60) { a.state == .running })
    a.cancel()
    let outcome = result.await() ?? "hung"
    #expect(outcome == "CancellationError", "\(outcome)")
    #expect(await eventually(within: 60) { a.state.isFinal })
    #expect(a.state == .cancelled)
    #expect(try await later.value == 2)
  }

  /// Was a bug, fixed with this review (it failed before): The same for `allFinished()` of the body's own queue: awaited by a cancelled
  /// task it throws `CancellationError` at once, unchecked; the check refuses it first, and A ends failed.
  @Test func aCancelledAsyncBodysAllFinishedEndsWithCancellationNotARefusal() async throws {
    let queue = WorkQueue(name: "r25.cancelled.all", maxConcurrent: 2)
    let result = Slot()
    let a = queue.add(name: "A") { () async throws -> Int in
      await Self.untilCancelled()
      do {
        try await queue.allFinished()
        return 1
      } catch {
        result.set(Self.describe(error))
        throw error
      }
    }
    #expect(await eventually(within: 60) { a.state == .running })
    a.cancel()
    let outcome = result.await() ?? "hung"
    #expect(outcome == "CancellationError", "\(outcome)")
    #expect(await eventually(within: 60) { a.state.isFinal })
    #expect(a.state == .cancelled)
  }

  // MARK: - BodyWaits after a cancelled await

  /// Was a bug, fixed with this review (it failed before): A (queue 1) awaits X (queue 2, running, gated): recorded in `BodyWaits` as
  /// A → X. A is cancelled: its await ends at once (its `BlockedWait` ends in the cancellation handler), but the
  /// record goes only in `checkedValue(by:)`'s `defer`, when A's task runs again. Here A's task cannot run yet (its
  /// executor is busy: on a loaded pool this is any scheduling delay). X's body then waits for A: the walk follows
  /// the stale A → X and refuses the wait ("bodies would wait for each other"), though A no longer waits and
  /// completes as soon as its task runs; the wait would have returned 1. Fix: end the record where the await ends
  /// (the cancellation handler and the completion), once, not in the `defer`.
  @Test func aCancelledAwaitNoLongerCountsAsABodyWaitInTheWalk() async throws {
    let first = WorkQueue(name: "r25.stale.1", maxConcurrent: 2)
    let second = WorkQueue(name: "r25.stale.2", maxConcurrent: 2)
    let xGate = SpindleTestSupport.Gate()
    let hold = SpindleTestSupport.Gate()
    let held = SpindleTestSupport.Gate()
    let a = Box<Work<Int>>()
    let x = Box<Work<Int>>()
    let aResult = Slot()
    let xResult = Slot()
    first.suspend()
    second.suspend()
    x.set(
      second.add(name: "X") { () -> Int in
        xGate.wait(seconds: 10)
        xResult.set(ReviewSession24Tests.outcome(of: a.get))
        return 2
      })
    a.set(
      first.add(name: "A") { () async -> Int in
        let outcome = await withTaskExecutorPreference(Self.paused) { await AwaitCheckTests.outcome(of: x.get) }
        aResult.set(outcome)
        return 1
      })
    second.resume()
    first.resume()
    #expect(await eventually(within: 60) { AwaitCheckTests.isRecorded(a.get, waitingFor: x.get) })
    // Hold A's executor: its task, resumed by the cancellation, waits for it.
    Task(executorPreference: Self.paused) {
      held.open()
      hold.wait(seconds: 10)
    }
    #expect(held.wait(seconds: 5))
    a.get.cancel()
    // The executor is let go of once X's wait has an outcome, or after a second in which it has none (it waits).
    DispatchQueue.global().async {
      _ = xResult.await(within: 1)
      hold.open()
    }
    xGate.open()
    let xOutcome = xResult.await() ?? "hung"
    #expect(xOutcome == "value 1", "\(xOutcome)")
    let aOutcome = aResult.await() ?? "hung"
    #expect(aOutcome.hasPrefix("error:") && aOutcome.contains("Cancellation"), "\(aOutcome)")
    #expect(try await x.get.value == 2)
    #expect(!Self.hasBodyWaits(a.get))
  }

  // MARK: - Races of the blocked-wait count

  /// Width 2. Round after round, A awaits U (unstarted: it waits for G on another queue), counted as one stuck body;
  /// then G's gate opens (U runs and completes) while, on another thread at the same moment, A is cancelled. Whichever
  /// ends the wait, the count must be back to 0 and no record left in `BodyWaits`; a wait left counted would refuse a
  /// later wait (two stuck bodies on two slots): `BlockedWait.end()` is idempotent and the count takes it under the
  /// engine's lock.
  @Test func aCancelRacingTheAwaitedWorksCompletionLeavesNothingCounted() async throws {
    let queue = WorkQueue(name: "r25.race", maxConcurrent: 2)
    let other = WorkQueue(name: "r25.race.other", maxConcurrent: 2)
    for round in 0..<150 {
      let gate = SpindleTestSupport.Gate()
      let g = other.add(name: "G") { () -> Int in
        gate.wait(seconds: 10)
        return 0
      }
      let u = queue.add(name: "U", after: g) { $0 + 1 }
      let a = queue.add(name: "A") { () async throws -> Int in try await u.value }
      guard await eventually(within: 60, { ReviewSession23Tests.blockedWaits(queue) == 1 }) else {
        Issue.record("round \(round): A's await was not counted")
        gate.open()
        break
      }
      DispatchQueue.concurrentPerform(iterations: 2) { index in
        if index == 0 { gate.open() } else { a.cancel() }
      }
      #expect(await eventually(within: 60) { a.state.isFinal && u.state.isFinal })
      #expect(await eventually(within: 60) { ReviewSession23Tests.blockedWaits(queue) == 0 }, "round \(round)")
      #expect(!Self.hasBodyWaits(a), "round \(round)")
    }
    // Both slots free: a body awaiting unstarted work of the queue is one stuck body of two, allowed.
    let gate = SpindleTestSupport.Gate()
    let g = other.add(name: "G") { () -> Int in
      gate.wait(seconds: 10)
      return 0
    }
    let u = queue.add(name: "U", after: g) { $0 + 1 }
    let result = Slot()
    _ = queue.add(name: "B") { () async -> Int in
      result.set(await AwaitCheckTests.outcome(of: u))
      return 0
    }
    #expect(await eventually(within: 60) { ReviewSession23Tests.blockedWaits(queue) == 1 })
    gate.open()
    #expect(result.await() == "value 1")
  }

  /// A refused await leaves nothing behind: no `BodyWaits` record, no counted wait, and the same body may then await
  /// work that ends (width 1: its own work refused, then work of another queue returned).
  @Test func aRefusedAwaitLeavesNoRecordAndTheBodyMayAwaitAgain() async throws {
    let queue = WorkQueue(name: "r25.refused", maxConcurrent: 1)
    let other = WorkQueue(name: "r25.refused.other", maxConcurrent: 1)
    let me = Box<Work<Int>>()
    let first = Slot()
    let second = Slot()
    let records = Slot()
    queue.suspend()
    let y = other.add(name: "Y") { 5 }
    me.set(
      queue.add(name: "A") { () async -> Int in
        first.set(await AwaitCheckTests.outcome(of: me.get))
        records.set("\(Self.hasBodyWaits(me.get)) \(ReviewSession23Tests.blockedWaits(queue))")
        second.set(await AwaitCheckTests.outcome(of: y))
        return 1
      })
    queue.resume()
    let outcome = first.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("its own work"), "\(outcome)")
    #expect(records.await() == "false 0")
    #expect(second.await() == "value 5")
    #expect(try await me.get.value == 1)
  }

  // MARK: - Retries: the task of a later attempt

  /// A's first attempt fails; its second attempt (a new task) awaits A itself: refused, as the first attempt's would be.
  /// Each attempt's task is the work's `runningTask` while it runs.
  @Test func aSecondAttemptsAwaitOfItsOwnWorkIsRefused() async throws {
    let queue = WorkQueue(name: "r25.retry.own", maxConcurrent: 2)
    let me = Box<Work<Int>>()
    let result = Slot()
    queue.suspend()
    me.set(
      queue.add(name: "A", retry: .fixed(maxAttempts: 2)) { () async throws -> Int in
        if me.get.attempts == 1 { throw Boom() }
        result.set(await AwaitCheckTests.outcome(of: me.get))
        return 1
      })
    queue.resume()
    let outcome = result.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("its own work"), "\(outcome)")
    #expect(try await me.get.value == 1)
  }

  /// A task that A's first attempt started awaits X (a dependent of A, on another queue) while A's second attempt
  /// runs: the second attempt returns without awaiting the task, A completes, X runs, the await returns. Not refused:
  /// the task is not the second attempt's task (nor the first's, which has ended).
  @Test func aTaskAFirstAttemptStartedIsNotTakenForTheSecondAttempt() async throws {
    let queue = WorkQueue(name: "r25.retry.task", maxConcurrent: 2)
    let other = WorkQueue(name: "r25.retry.task.other", maxConcurrent: 2)
    let me = Box<Work<Int>>()
    let x = Box<Work<Int>>()
    let awaiting = Slot()
    let result = Slot()
    queue.suspend()
    me.set(
      queue.add(name: "A", retry: .fixed(maxAttempts: 2)) { () async throws -> Int in
        if me.get.attempts == 1 {
          Task {
            // Until the second attempt runs.
            _ = await eventually { me.get.attempts == 2 && me.get.state == .running }
            awaiting.set("yes")
            result.set(await AwaitCheckTests.outcome(of: x.get))
          }
          throw Boom()
        }
        // The task's await begins while this attempt runs.
        _ = await eventually { awaiting.get != nil }
        try? await Task.sleep(for: .milliseconds(50))
        return 1
      })
    x.set(other.add(name: "X", after: me.get) { $0 + 1 })
    queue.resume()
    #expect(result.await() == "value 2")
    #expect(try await me.get.value == 1)
  }

  // MARK: - Options, keys, barriers, the main queue

  /// A body with `timeout:` runs in the task `startTask` made, so its awaits are checked: awaiting X, a dependent of
  /// its work, is refused at once and A fails with `WorkDeadlockError`. Unchecked, the timeout would have cancelled
  /// the await (`CancellationError`) and A failed with `WorkTimeoutError` after 300 ms: the await "would have ended",
  /// by the timeout, but never with a value. Pins the current behaviour (a change of outcome worth a line in the
  /// changelog).
  @Test func anAwaitOfADependentFromABodyWithATimeoutIsRefusedAtOnce() async throws {
    let queue = WorkQueue(name: "r25.timeout", maxConcurrent: 2)
    let other = WorkQueue(name: "r25.timeout.other", maxConcurrent: 2)
    let x = Box<Work<Int>>()
    let result = Slot()
    queue.suspend()
    let a = queue.add(name: "A", timeout: .milliseconds(300)) { () async throws -> Int in
      do {
        return try await x.get.value
      } catch {
        result.set(Self.describe(error))
        throw error
      }
    }
    x.set(other.add(name: "X", after: a) { $0 + 1 })
    queue.resume()
    let outcome = result.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("dependencies"), "\(outcome)")
    #expect(await eventually(within: 60) { a.state.isFinal })
    if case .failure(let error) = a.result {
      #expect(error is WorkDeadlockError, "\(error)")
    } else {
      Issue.record("A did not fail: \(String(describing: a.result))")
    }
  }

  /// A body holding an exclusivity key awaits work that needs the key (on another queue): refused. Another body
  /// awaits work of another queue that follows a barrier waiting only for unrelated running work: it returns.
  @Test func keysAndBarriersAreCheckedForAwaitsAsForWaits() async throws {
    let queue = WorkQueue(name: "r25.key", maxConcurrent: 2)
    let other = WorkQueue(name: "r25.key.other", maxConcurrent: 2)
    let key = "r25.key.\(UUID())"
    let k = Box<Work<Int>>()
    let keyResult = Slot()
    let h = queue.add(name: "H", exclusive: key) { () async -> Int in
      // K is added once H runs (holding the key).
      _ = await eventually { k.getOptional != nil }
      keyResult.set(await AwaitCheckTests.outcome(of: k.get))
      return 1
    }
    #expect(await eventually(within: 60) { h.state == .running })
    k.set(other.add(name: "K", exclusive: key) { 2 })
    let keyOutcome = keyResult.await() ?? "hung"
    #expect(keyOutcome.hasPrefix("refused:") && keyOutcome.contains(key), "\(keyOutcome)")
    #expect(try await k.get.value == 2)

    let gate = SpindleTestSupport.Gate()
    let e = other.add(name: "E") { () -> Int in
      gate.wait(seconds: 10)
      return 0
    }
    _ = other.addBarrier(name: "barrier") {}
    let f = other.add(name: "F") { 3 }
    let barrierResult = Slot()
    _ = queue.add(name: "B") { () async -> Int in
      barrierResult.set(await AwaitCheckTests.outcome(of: f))
      return 1
    }
    #expect(await eventually(within: 60) { e.state == .running })
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { gate.open() }
    #expect(barrierResult.await() == "value 3")
  }

  /// An `async` `@MainActor` body of `WorkQueue.main` holds the queue's only slot: awaiting main-queue work it added
  /// (unstarted) is refused ("serial"); awaiting work of another queue returns.
  @Test func aMainQueueAsyncBodysAwaitsAreChecked() async throws {
    let other = WorkQueue(name: "r25.main.other", maxConcurrent: 2)
    let later = Box<Work<Int>>()
    let m = WorkQueue.main.add(name: "M") { @MainActor () async -> [String] in
      later.set(WorkQueue.main.add(name: "L") { @MainActor in 2 })
      let own = await AwaitCheckTests.outcome(of: later.get)
      let elsewhere = await AwaitCheckTests.outcome(of: other.add(name: "O") { 3 })
      return [own, elsewhere]
    }
    let outcomes = try await m.value
    #expect(outcomes.first?.hasPrefix("refused:") == true && outcomes.first?.contains("serial") == true, "\(outcomes)")
    #expect(outcomes.last == "value 3", "\(outcomes)")
    #expect(try await later.get.value == 2)
  }
}
