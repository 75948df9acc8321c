import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// A body of one queue that waits for another queue to have nothing unfinished (`try await q.allFinished()`, or
/// `q.waitUntilAllFinished()`) while that queue holds work that can only complete after the body's own work: the wait
/// could never end. It hung; now the `async` form throws `WorkDeadlockError` and the blocking form stops the program
/// with a message, as they do from a body of the same queue. These tests try to break both sides of the rule: each
/// link of the walk forward from the body's work (a dependent, a dependent's dependent on a third queue, a barrier's
/// follower, a body waiting for it) must be seen, and a wait that ends must never be refused.
@Suite("Work: allFinished() of another queue from a body", .serialized, .offThePool)
struct AllFinishedAcrossQueuesTests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot

  /// What an await of `queue.allFinished()` did: "returned", "refused: …" or "error: …".
  static func outcome(ofAllFinished queue: WorkQueue) async -> String {
    do {
      try await queue.allFinished()
      return "returned"
    } catch let error as WorkDeadlockError {
      return "refused: \(error)"
    } catch {
      return "error: \(error)"
    }
  }

  /// An `async` body A on P that awaits `q.allFinished()`, added to a suspended P so that what the test adds next to
  /// the queues exists before A runs; `resume` starts it. The outcome lands in the returned slot.
  static func awaitingBody(on p: WorkQueue, for q: WorkQueue) -> (Work<Int>, Slot) {
    let result = Slot()
    p.suspend()
    let a = p.add(name: "A") { () async -> Int in
      result.set(await Self.outcome(ofAllFinished: q))
      return 1
    }
    return (a, result)
  }

  /// The outcome of A's await; if it did not end within the bound, "hung", after cancelling A (its await then ends
  /// with `CancellationError`, and what waits for A can run: the test fails instead of hanging).
  static func settle(_ result: Slot, cancelling a: Work<Int>) -> String {
    if let outcome = result.await() { return outcome }
    a.cancel()
    return "hung"
  }

  // MARK: - Refused: the queue holds work that can only complete after the body's

  @Test func awaitingTheQueueOfADependentOfTheBodysWorkIsRefused() async throws {
    let p = WorkQueue(name: "af.dependent.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.dependent.q", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let d = q.add(name: "D", after: a) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'") && outcome.contains("depends on it"), "\(outcome)")
    // Refused, the body ends: D runs and Q drains.
    #expect(try await d.value == 2)
    try await q.allFinished()
  }

  /// D1 on R depends on A, D2 on Q on D1: Q's D2 can only complete after A, through R.
  @Test func aDependentOfADependentOnAThirdQueueIsSeen() async throws {
    let p = WorkQueue(name: "af.transitive.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.transitive.q", maxConcurrent: 2)
    let r = WorkQueue(name: "af.transitive.r", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let d1 = r.add(name: "D1", after: a) { $0 + 1 }
    let d2 = q.add(name: "D2", after: d1) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D2'"), "\(outcome)")
    #expect(try await d2.value == 3)
  }

  /// On R: D depends on A, a barrier follows D, and F was added after the barrier (a follower: it waits for the
  /// barrier, but is not in its list of dependents). G on Q depends on F. Only the barrier's followers lead to G.
  @Test func aBarriersFollowerOnTheWayIsSeen() async throws {
    let p = WorkQueue(name: "af.barrier.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.barrier.q", maxConcurrent: 2)
    let r = WorkQueue(name: "af.barrier.r", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    r.add(name: "D", after: a) { $0 + 1 }
    r.addBarrier(name: "barrier") {}
    let f = r.add(name: "F") { 5 }
    let g = q.add(name: "G", after: f) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'G'"), "\(outcome)")
    #expect(try await g.value == 6)
  }

  /// B, running on Q, waits (`Work.wait()`) for A's work: B's work can only complete after A's.
  @Test func aBodyOfTheQueueWaitingForTheBodysWorkIsSeen() async throws {
    let p = WorkQueue(name: "af.waits.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.waits.q", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let waited = Slot()
    let b = q.add(name: "B") { () -> Int in
      waited.set(ReviewSession24Tests.outcome(of: a))
      return 2
    }
    // B's wait for A (unstarted on a suspended queue, so not refused) is recorded and checked before A runs.
    let recorded = await eventually { BodyWaits.shared.snapshot().contains { $0.waiter === b } }
    #expect(recorded)
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'B'"), "\(outcome)")
    #expect(waited.await() == "value 1")
    #expect(try await b.value == 2)
  }

  // MARK: - Slots (session 27): unstarted work of a queue whose every slot is held behind the body

  /// On serial P, A holds the only slot; X, unstarted on P, needs it; D on Q depends on X. The await would never end.
  @Test func unstartedWorkNeedingTheBodysSerialSlotIsSeen() async throws {
    let p = WorkQueue(name: "af.serial-slot.p", maxConcurrent: 1)
    let q = WorkQueue(name: "af.serial-slot.q", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let x = p.add(name: "X") { 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'") && outcome.contains("slot"), "\(outcome)")
    // Refused, A ends: X gets the slot, D runs, Q drains.
    #expect(try await d.value == 2)
    try await q.allFinished()
  }

  /// P is 2 wide: A holds one slot, B the other, and B waits for E (on R), a dependent of A. Neither slot can free
  /// while A waits, so X, unstarted on P, never starts, and D on Q, which depends on X, never completes.
  @Test func slotsHeldByTheBodyAndABodyWaitingBehindItAreSeen() async throws {
    let p = WorkQueue(name: "af.held-slots.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.held-slots.q", maxConcurrent: 2)
    let r = WorkQueue(name: "af.held-slots.r", maxConcurrent: 2)
    let result = Slot()
    let waited = Slot()
    let box = Box<Work<Int>>()
    p.suspend()
    let b = p.add(name: "B") { () -> Int in
      waited.set(ReviewSession24Tests.outcome(of: box.get))
      return 3
    }
    let a = p.add(name: "A") { () async -> Int in
      // Begins once B's wait for E is recorded (B then holds its slot behind A).
      _ = await eventually { BodyWaits.shared.snapshot().contains { $0.waiter === b } }
      result.set(await Self.outcome(ofAllFinished: q))
      return 1
    }
    box.set(r.add(name: "E", after: a) { $0 + 1 })
    let x = p.add(name: "X") { 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'"), "\(outcome)")
    #expect(waited.await() == "value 2")
    #expect(try await b.value == 3)
    #expect(try await d.value == 2)
  }

  /// P is 2 wide and its other slot is held by a body that does not wait behind A: X starts once that body ends,
  /// so D completes and the await returns. (Counting the slot as held would refuse a wait that ends.)
  @Test func aSlotHeldByABodyThatEndsIsNotCounted() async throws {
    let p = WorkQueue(name: "af.free-slot.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.free-slot.q", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let g = p.add(name: "G") { gate.wait() }
    let started = await eventually { g.state == .running }
    #expect(started)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let x = p.add(name: "X") { 1 }
    q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { gate.open() }
    #expect(Self.settle(result, cancelling: a) == "returned")
  }

  // MARK: - Keys (session 27): work in line for a key the body holds

  /// A holds key K; Y on R is in K's line; D on Q depends on Y. Y gets K only once A completed: the await would hang.
  /// Y is added only once A holds K (each asks for the key when a worker takes it up: Y could otherwise get it first).
  @Test func workInLineForAKeyTheBodyHoldsIsSeen() async throws {
    let p = WorkQueue(name: "af.key.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.key.q", maxConcurrent: 2)
    let r = WorkQueue(name: "af.key.r", maxConcurrent: 2)
    let result = Slot()
    let go = Atomic<Bool>(false)
    let a = p.add(name: "A", exclusive: "af.key") { () async -> Int in
      _ = await eventually { go.load(ordering: .relaxed) }
      result.set(await Self.outcome(ofAllFinished: q))
      return 1
    }
    let holds = await eventually { ExclusivityRegistry.shared.isHeld("af.key", by: a) }
    #expect(holds)
    let y = r.add(name: "Y", exclusive: "af.key") { 1 }
    let d = q.add(name: "D", after: y) { $0 + 1 }
    // Y is ready at once and parks in K's line, behind A.
    let parked = await eventually {
      ExclusivityRegistry.shared.line(of: "af.key", heldBy: a).contains { $0 === y }
    }
    #expect(parked)
    go.store(true, ordering: .relaxed)
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'"), "\(outcome)")
    #expect(try await d.value == 2)
  }

  /// A holds key K, and Y waits for another key: nothing of Q is behind A, so the await returns.
  @Test func workInLineForAnotherKeyIsNotCounted() async throws {
    let p = WorkQueue(name: "af.other-key.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.other-key.q", maxConcurrent: 2)
    let r = WorkQueue(name: "af.other-key.r", maxConcurrent: 2)
    let result = Slot()
    let hold = SpindleTestSupport.Gate()
    let holder = r.add(name: "H", exclusive: "af.other-key.2") { hold.wait() }
    let a = p.add(name: "A", exclusive: "af.other-key.1") { () async -> Int in
      result.set(await Self.outcome(ofAllFinished: q))
      return 1
    }
    let y = r.add(name: "Y", exclusive: "af.other-key.2") { 1 }
    q.add(name: "D", after: y) { $0 + 1 }
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { hold.open() }
    #expect(Self.settle(result, cancelling: a) == "returned")
    _ = try await holder.value
  }

  /// The blocking form from a synchronous body stops the program, naming both works and both queues.
  @Test func waitUntilAllFinishedFromABodyWhileTheQueueHoldsADependentStops() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let p = WorkQueue(name: "af.sync.p")
      let q = WorkQueue(name: "af.sync.q")
      p.suspend()
      let a = p.add(name: "waiter") { q.waitUntilAllFinished() }
      q.add(name: "dependent", dependencies: [a]) {}
      p.resume()
      // The child stops inside the body; this only keeps the main thread alive until then.
      sleep(30)
    }
    let output = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(
      output.contains(
        "WorkQueue 'af.sync.q': waitUntilAllFinished() called from inside work 'waiter' of WorkQueue 'af.sync.p', "
          + "while work 'dependent' of this queue can only complete after that work"),
      "\(output)")
  }

  // MARK: - Not refused: waits that end

  /// Q holds unfinished work that does not wait for A (gated, opened a moment later): the await returns.
  @Test func unrelatedUnfinishedWorkIsWaitedFor() async throws {
    let p = WorkQueue(name: "af.unrelated.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.unrelated.q", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let other = p.add(name: "other") { 7 }
    let (a, result) = Self.awaitingBody(on: p, for: q)
    // On Q: work gated, and a dependent of other work of P (not of A).
    q.add(name: "gated") { gate.wait() }
    q.add(name: "after other", after: other) { $0 + 1 }
    p.resume()
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { gate.open() }
    #expect(Self.settle(result, cancelling: a) == "returned")
  }

  /// A dependent of A that was cancelled has completed: it no longer holds Q, and the await returns.
  @Test func aCancelledDependentDoesNotCount() async throws {
    let p = WorkQueue(name: "af.cancelled.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.cancelled.q", maxConcurrent: 2)
    let (a, result) = Self.awaitingBody(on: p, for: q)
    let d = q.add(name: "D", after: a) { $0 + 1 }
    d.cancel()
    p.resume()
    #expect(Self.settle(result, cancelling: a) == "returned")
  }

  /// A task that A's body started may outlive the body: its await of Q, which holds a dependent of A, begins while A
  /// runs and returns once A ended and the dependent ran. Only the body's own task is checked.
  @Test func aTaskTheBodyStartedIsNotRefused() async throws {
    let p = WorkQueue(name: "af.task.p", maxConcurrent: 2)
    let q = WorkQueue(name: "af.task.q", maxConcurrent: 2)
    let task = Box<Task<String, Never>>()
    let awaiting = Slot()
    p.suspend()
    let a = p.add(name: "A") { () async -> Int in
      task.set(
        Task {
          awaiting.set("yes")
          return await Self.outcome(ofAllFinished: q)
        })
      // A is still running when the task's await begins (and is checked, if it were).
      let deadline = ContinuousClock.now + .seconds(10)
      while awaiting.get == nil && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
      try? await Task.sleep(for: .milliseconds(20))
      return 1
    }
    let d = q.add(name: "D", after: a) { $0 + 1 }
    p.resume()
    #expect(try await d.value == 2)
    #expect(await task.get.value == "returned")
  }

  /// From a synchronous body of P, the blocking form waits for unrelated work of Q and returns.
  @Test func waitUntilAllFinishedFromABodyReturnsWhenNothingWaitsForIt() async throws {
    let p = WorkQueue(name: "af.sync-ok.p")
    let q = WorkQueue(name: "af.sync-ok.q")
    let gate = SpindleTestSupport.Gate()
    let unrelated = q.add(name: "unrelated") { () -> Int in
      gate.wait()
      return 3
    }
    let a = p.add(name: "A") { () -> Bool in
      q.waitUntilAllFinished()
      return unrelated.state == .finished
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { gate.open() }
    #expect(try await a.value)
  }
}
