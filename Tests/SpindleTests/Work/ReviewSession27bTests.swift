import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// A review of the slot and key rules of `allFinished()` from a body of another queue (`AnyWork.firstBehind(on:)`,
/// session 27): a running body met on the walk counts as holding its queue's slot, and work in line for a key held on
/// the walk counts as behind. These tests look for waits that end but are refused: bodies or work that a timer, not
/// the awaiting body, ends.
@Suite("Work: review 27b", .serialized, .offThePool)
struct ReviewSession27bTests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot
  typealias Across = AllFinishedAcrossQueuesTests

  struct Failure: Error {}

  /// A's outcome within `seconds`, or "hung" after cancelling A. Two minutes, though a quiet run takes 0.3 s: these
  /// outcomes need a 300 ms timer and then the tasks of `async` bodies to resume, and in a full plain run, while
  /// other suites flood the cooperative pool (one awaits 100,000 items), the first test of this suite took 20-39 s
  /// (with 8 s it failed 2 runs in 6). A bound only a hang should reach.
  static func settle(_ result: Slot, cancelling a: Work<Int>, within seconds: Double = 120) -> String {
    if let outcome = result.await(within: seconds) { return outcome }
    a.cancel()
    return "hung"
  }

  /// A on suspended `p`: an `async` body that awaits `q.allFinished()` once `waiter`'s wait is recorded (the waiter
  /// then holds its slot, behind A until its deadline) or `waiter` ended; A's outcome lands in the returned slot.
  static func awaiting(_ q: WorkQueue, on p: WorkQueue, onceWaiting waiter: AnyWork) -> (Work<Int>, Slot) {
    let result = Slot()
    let a = p.add(name: "A") { () async -> Int in
      _ = await eventually {
        BodyWaits.shared.snapshot().contains { $0.waiter === waiter } || waiter.state.isFinal
      }
      result.set(await Across.outcome(ofAllFinished: q))
      return 1
    }
    return (a, result)
  }

  // MARK: - Slots: a body whose wait a timer ends does not hold its slot for good

  /// On serial R, W (an `async` body with a 300 ms timeout) waits for T, a dependent of A; X, unstarted on R, needs
  /// R's slot; D on Q depends on X. At W's deadline its task is cancelled, its wait ends, it fails and gives R's slot to
  /// X: D runs, and A's await returns. W's slot is not held while A waits.
  @Test func anAsyncWaiterWithATimeoutDoesNotHoldItsSlot() async throws {
    let p = WorkQueue(name: "r27b.timeout-waiter.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.timeout-waiter.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.timeout-waiter.r", maxConcurrent: 1)
    let s = WorkQueue(name: "r27b.timeout-waiter.s", maxConcurrent: 2)
    let box = Box<Work<Int>>()
    p.suspend()
    r.suspend()
    let w = r.add(name: "W", timeout: .milliseconds(300)) { () async throws -> Int in
      try await box.get.value
    }
    let (a, result) = Self.awaiting(q, on: p, onceWaiting: w)
    box.set(s.add(name: "T", after: a) { $0 + 1 })
    let x = r.add(name: "X") { 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    r.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome == "returned", "\(outcome)")
    #expect(try await d.value == 2)
    await #expect(throws: WorkTimeoutError.self) { try await w.value }
  }

  /// The same without slots (the waiter rule of session 26): D on Q depends on W, an `async` body with a 300 ms timeout
  /// that waits for T, a dependent of A. At W's deadline W fails, D ends with it, and the await returns.
  @Test func aDependentOfAnAsyncWaiterWithATimeoutDoesNotCount() async throws {
    let p = WorkQueue(name: "r27b.timeout-dependent.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.timeout-dependent.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.timeout-dependent.r", maxConcurrent: 2)
    let s = WorkQueue(name: "r27b.timeout-dependent.s", maxConcurrent: 2)
    let box = Box<Work<Int>>()
    p.suspend()
    r.suspend()
    let w = r.add(name: "W", timeout: .milliseconds(300)) { () async throws -> Int in
      try await box.get.value
    }
    let (a, result) = Self.awaiting(q, on: p, onceWaiting: w)
    box.set(s.add(name: "T", after: a) { $0 + 1 })
    r.resume()
    let d = q.add(name: "D", after: w) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome == "returned", "\(outcome)")
    await #expect(throws: WorkTimeoutError.self) { try await d.value }
  }

  /// `Work.wait()`'s walk back does not follow such a body's wait either: A waits for D, a dependent of W (an `async`
  /// body with a 300 ms timeout waiting for T, a dependent of A). At W's deadline W fails and D with it, so the wait
  /// ends (with D's error). (Refused until the walk back skipped waits that their timeout ends.)
  @Test func workWaitDoesNotFollowAnAsyncWaiterWithATimeout() async throws {
    let p = WorkQueue(name: "r27b.wait-timeout.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.wait-timeout.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.wait-timeout.r", maxConcurrent: 2)
    let s = WorkQueue(name: "r27b.wait-timeout.s", maxConcurrent: 2)
    let result = Slot()
    let box = Box<Work<Int>>()
    let dependent = Box<Work<Int>>()
    p.suspend()
    r.suspend()
    let w = r.add(name: "W", timeout: .milliseconds(300)) { () async throws -> Int in
      try await box.get.value
    }
    let a = p.add(name: "A") { () -> Int in
      _ = eventually { BodyWaits.shared.snapshot().contains { $0.waiter === w } || w.state.isFinal }
      result.set(ReviewSession24Tests.outcome(of: dependent.get))
      return 1
    }
    box.set(s.add(name: "T", after: a) { $0 + 1 })
    r.resume()
    dependent.set(q.add(name: "D", after: w) { $0 + 1 })
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(!outcome.hasPrefix("refused:") && outcome != "hung", "\(outcome)")
    _ = try? await dependent.get.value
  }

  /// On serial P, A holds the slot; K, an `async` body with a 1 s timeout on R, holds key "k" and waits for T, a
  /// dependent of A; Y on R is in the key's line; D on Q depends on Y. At K's deadline K ends and gives the key to Y:
  /// D runs, and the await returns.
  @Test func anAsyncKeyHolderWithATimeoutDoesNotHoldItsKey() async throws {
    let p = WorkQueue(name: "r27b.timeout-key.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.timeout-key.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.timeout-key.r", maxConcurrent: 4)
    let s = WorkQueue(name: "r27b.timeout-key.s", maxConcurrent: 2)
    let box = Box<Work<Int>>()
    p.suspend()
    r.suspend()
    let k = r.add(name: "K", timeout: .seconds(1), exclusive: "r27b.timeout-key") {
      () async throws -> Int in
      try await box.get.value
    }
    let (a, result) = Self.awaiting(q, on: p, onceWaiting: k)
    box.set(s.add(name: "T", after: a) { $0 + 1 })
    r.resume()
    // K holds the key before Y asks for it.
    let holds = await eventually { k.state == .running }
    #expect(holds)
    let y = r.add(name: "Y", exclusive: "r27b.timeout-key") { 1 }
    let d = q.add(name: "D", after: y) { $0 + 1 }
    // Y parks in the key's line behind K (or, on a very slow host, K already timed out and Y has the key).
    let parked = await eventually {
      ExclusivityRegistry.shared.line(of: "r27b.timeout-key", heldBy: k).contains { $0 === y } || k.state.isFinal
    }
    #expect(parked)
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome == "returned", "\(outcome)")
    #expect(try await d.value == 2)
  }

  /// The blocking (synchronous) waiter with a timeout is not interrupted: its slot stays held, and the await is
  /// refused (a control for the test above).
  @Test func aSynchronousWaiterWithATimeoutStillHoldsItsSlot() async throws {
    let p = WorkQueue(name: "r27b.sync-timeout.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.sync-timeout.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.sync-timeout.r", maxConcurrent: 1)
    let s = WorkQueue(name: "r27b.sync-timeout.s", maxConcurrent: 2)
    let box = Box<Work<Int>>()
    p.suspend()
    r.suspend()
    let w = r.add(name: "W", timeout: .milliseconds(300)) { () throws -> Int in try box.get.wait() }
    let (a, result) = Self.awaiting(q, on: p, onceWaiting: w)
    box.set(s.add(name: "T", after: a) { $0 + 1 })
    let x = r.add(name: "X") { 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    r.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'"), "\(outcome)")
    #expect(try await d.value == 2)
  }

  // MARK: - Slots: unstarted work that completes without a slot

  /// On serial P, A holds the slot; a group on P with a 300 ms timeout has one member M, unstarted; D on Q depends on
  /// M. At the deadline M is cancelled without a slot, D ends with it, and the await returns.
  @Test func unstartedMembersOfAGroupWithATimeoutEndWithoutASlot() async throws {
    let p = WorkQueue(name: "r27b.group.p", maxConcurrent: 1)
    let q = WorkQueue(name: "r27b.group.q", maxConcurrent: 2)
    let (a, result) = Across.awaitingBody(on: p, for: q)
    let member = Box<Work<Int>>()
    let handle = p.group(name: "G", timeout: .milliseconds(300)) { group in
      let m = group.add(name: "M") { 1 }
      member.set(m)
      return m
    }
    let d = q.add(name: "D", after: member.get) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome == "returned", "\(outcome)")
    await #expect(throws: (any Error).self) { try await d.value }
    await #expect(throws: WorkTimeoutError.self) { try await handle.value }
  }

  /// On serial P, A holds the slot; X on P is pending on F (on R, not behind A), which fails after 100 ms; D on Q
  /// depends on X. X ends with F without a slot, D ends with X, and the await returns.
  @Test func unstartedWorkEndedByAFailingDependencyNeedsNoSlot() async throws {
    let p = WorkQueue(name: "r27b.failing.p", maxConcurrent: 1)
    let q = WorkQueue(name: "r27b.failing.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.failing.r", maxConcurrent: 2)
    let (a, result) = Across.awaitingBody(on: p, for: q)
    let f = r.add(name: "F") { () async throws -> Int in
      try await Task.sleep(for: .milliseconds(100))
      throw Failure()
    }
    let x = p.add(name: "X", after: f) { $0 + 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    withKnownIssue(
      """
      X, pending on F, is counted as unstarted work needing P's only slot (held by A), but it ends without a slot \
      when F fails; D then ends and Q drains. Like a dependent that a failing sibling dependency would end (counted, \
      as documented), the walk cannot know F's outcome; documented for the slot rule too (review 27b).
      """
    ) {
      #expect(outcome == "returned", "\(outcome)")
    }
    // Refused or not, D completes: with X's failure, or (refused, A ended) once F failed.
    _ = try? await d.value
    #expect(d.state.isFinal)
  }

  // MARK: - Slots: a width raised while the body waits

  /// On serial P, A holds the slot; X on P, D on Q after X. Another thread raises P's width once A's check is over
  /// (A's await refused, or recorded as a wait for Q): X starts, D runs, and the await would return. The check sees
  /// the width of the moment. (A raise on a 100 ms timer could come before the check on a slow host.)
  @Test func aWidthRaisedWhileTheBodyWaits() async throws {
    let p = WorkQueue(name: "r27b.raise.p", maxConcurrent: 1)
    let q = WorkQueue(name: "r27b.raise.q", maxConcurrent: 2)
    let (a, result) = Across.awaitingBody(on: p, for: q)
    let x = p.add(name: "X") { 1 }
    let d = q.add(name: "D", after: x) { $0 + 1 }
    DispatchQueue.global().async {
      _ = eventually { result.get != nil || BodyWaits.shared.waitsForQueue(a, q.engine) }
      p.maxConcurrent = 2
    }
    p.resume()
    let outcome = Self.settle(result, cancelling: a)
    #expect(outcome.hasPrefix("refused:") && outcome.contains("'D'"), "\(outcome)")
    #expect(try await d.value == 2)
  }

  // MARK: - Not refused (controls)

  /// A callback body C on serial P whose `finish` comes 100 ms later from another thread holds P's slot until then;
  /// C is not on A's walk (A runs on another queue), so X, unstarted on P, and D after it do not count: the await
  /// returns.
  @Test func aCallbackHoldingASlotButNotBehindTheBodyIsNotCounted() async throws {
    let p = WorkQueue(name: "r27b.callback.p", maxConcurrent: 1)
    let q = WorkQueue(name: "r27b.callback.q", maxConcurrent: 2)
    let o = WorkQueue(name: "r27b.callback.o", maxConcurrent: 2)
    let c = p.addCallback(name: "C") { (finish: WorkFinish<Int>) in
      DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { finish(1) }
    }
    let x = p.add(name: "X") { 1 }
    q.add(name: "D", after: x) { $0 + 1 }
    let (a, result) = Across.awaitingBody(on: o, for: q)
    o.resume()
    #expect(Self.settle(result, cancelling: a) == "returned")
    #expect(try await c.value == 1)
  }

  /// On 2-wide P, A holds one slot and the other is held by B, whose recorded wait is for G (gated, not behind A):
  /// X on P gets B's slot once G ends, and the await returns.
  @Test func aWaiterWhoseTargetIsNotBehindTheBodyIsNotCounted() async throws {
    let p = WorkQueue(name: "r27b.unrelated-waiter.p", maxConcurrent: 2)
    let q = WorkQueue(name: "r27b.unrelated-waiter.q", maxConcurrent: 2)
    let r = WorkQueue(name: "r27b.unrelated-waiter.r", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let result = Slot()
    let g = r.add(name: "G") { () -> Int in
      gate.wait()
      return 1
    }
    p.suspend()
    let b = p.add(name: "B") { () throws -> Int in try g.wait() }
    let a = p.add(name: "A") { () async -> Int in
      _ = await eventually { BodyWaits.shared.snapshot().contains { $0.waiter === b } }
      result.set(await Across.outcome(ofAllFinished: q))
      return 1
    }
    let x = p.add(name: "X") { 1 }
    q.add(name: "D", after: x) { $0 + 1 }
    p.resume()
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { gate.open() }
    #expect(Self.settle(result, cancelling: a) == "returned")
  }
}
