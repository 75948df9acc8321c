import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// Two bodies on different queues that begin waiting for each other at the same instant. Each wait's check looks at
/// the waits already recorded, so two checks that ran side by side could each miss the other:
/// - waits for unstarted work of the other's serial queue: each check saw the other body's wait as not yet checked
///   (it did not count against the slots), both waits passed, and both bodies hung;
/// - waits for each other's work: each check saw the other's recorded wait, and both were refused, where refusing one
///   lets the other return.
///
/// The engines' wait-check hook holds each body at the start of its check until the other arrives, so that the two
/// checks run side by side in every round. Exactly one wait must be refused, and the other must return once the
/// refused body ends.
@Suite("Work: simultaneous waits across queues", .serialized, .offThePool)
struct SimultaneousWaitTests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot

  typealias Rendezvous = SimultaneousWaitModelTests.Rendezvous

  /// Makes what A and B wait for, from A, B and their queues P and Q, once both run: (A's target, B's target).
  typealias Targets =
    @Sendable (_ a: Work<Int>, _ b: Work<Int>, _ p: WorkQueue, _ q: WorkQueue) -> (Work<Int>, Work<Int>)

  /// One round: A runs on queue P and B on queue Q, and each waits, at the same instant, for its target. Returns what
  /// each wait did ("hung" if it did not end within the bound, after which the targets are cancelled so that the
  /// bodies end).
  static func round(_ name: String, width: Int, targets: Targets) -> (a: String, b: String) {
    let p = WorkQueue(name: "\(name).p", maxConcurrent: width)
    let q = WorkQueue(name: "\(name).q", maxConcurrent: width)
    let rendezvous = Rendezvous(parties: 2)
    for queue in [p, q] { queue.engine.waitCheckHook.withLock { $0 = { rendezvous.meet(seconds: 10) } } }
    defer { for queue in [p, q] { queue.engine.waitCheckHook.withLock { $0 = nil } } }
    let started = SpindleTestSupport.Gate()
    let ready = SpindleTestSupport.Gate()
    let forA = Box<Work<Int>>()
    let forB = Box<Work<Int>>()
    let outcomeA = Slot()
    let outcomeB = Slot()
    let a = p.add(name: "A") { () -> Int in
      started.open()
      ready.wait()
      outcomeA.set(ReviewSession24Tests.outcome(of: forA.get))
      return 1
    }
    let b = q.add(name: "B") { () -> Int in
      started.open()
      ready.wait()
      outcomeB.set(ReviewSession24Tests.outcome(of: forB.get))
      return 2
    }
    started.wait()
    started.wait()
    let (targetOfA, targetOfB) = targets(a, b, p, q)
    forA.set(targetOfA)
    forB.set(targetOfB)
    ready.open(2)
    let seenA = outcomeA.await(within: 10)
    let seenB = outcomeB.await(within: 10)
    if seenA == nil || seenB == nil {
      // Both waits passed their checks: unstarted targets end when cancelled, and so do the waits.
      targetOfA.cancel()
      targetOfB.cancel()
    }
    _ = try? a.wait()
    _ = try? b.wait()
    return (seenA ?? "hung", seenB ?? "hung")
  }

  /// Exactly one of the two outcomes is a refusal, and the other is `value`.
  static func expectOneRefused(_ outcomes: (a: String, b: String), value: (a: String, b: String), round: Int) {
    let refusedA = outcomes.a.hasPrefix("refused:")
    let refusedB = outcomes.b.hasPrefix("refused:")
    #expect(
      refusedA != refusedB, "round \(round): exactly one wait must be refused; A: \(outcomes.a); B: \(outcomes.b)")
    if refusedA && !refusedB { #expect(outcomes.b == value.b, "round \(round): B: \(outcomes.b)") }
    if refusedB && !refusedA { #expect(outcomes.a == value.a, "round \(round): A: \(outcomes.a)") }
  }

  /// P and Q are serial. A waits for X, unstarted on Q (whose slot B holds); B waits for Y, unstarted on P (whose slot A
  /// holds). Refusing one frees its slot: its target runs and the other wait returns. Before the checks were made one
  /// at a time, both waits passed (neither check counted the other's unchecked wait) and both bodies hung.
  @Test func twoBodiesWaitingForUnstartedWorkOfEachOthersSerialQueueAtOnceRefuseOne() {
    for index in 0..<12 {
      let outcomes = Self.round("simultaneous.slots.\(index)", width: 1) { _, _, p, q in
        (q.add(name: "X") { 10 }, p.add(name: "Y") { 20 })
      }
      Self.expectOneRefused(outcomes, value: (a: "value 10", b: "value 20"), round: index)
    }
  }

  /// A waits for B's work and B for A's (queues of width 2, so slots play no part). Refusing one ends its body, and the
  /// other's wait returns that body's value. Before the checks were made one at a time, both were refused.
  @Test func twoBodiesWaitingForEachOthersWorkAtOnceRefuseOne() {
    for index in 0..<12 {
      let outcomes = Self.round("simultaneous.cycle.\(index)", width: 2) { a, b, _, _ in (b, a) }
      Self.expectOneRefused(outcomes, value: (a: "value 2", b: "value 1"), round: index)
    }
  }
}
