import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// An adversarial model test of checks of waits that begin at the same instant (``WorkEngine/waitChecks``): random
/// rounds of 2–3 queues of width 1–2, every slot held by a gated synchronous body, some unstarted work added behind
/// them, and 2–3 of the bodies waiting (`Work.wait()`) for other bodies' work or for the unstarted work. The engines'
/// wait-check hook holds each waiting body at the start of its check until all of them arrive (an N-party rendezvous),
/// so that the checks start side by side.
///
/// What it tries to break: checks that overlap see each other's waits half made (recorded, not yet checked), and a set
/// of checks that ran side by side then either lets waits through that together can never end (bodies waiting for
/// unstarted work in each other's last slot: all hang) or refuses waits that no order of the checks would refuse
/// (bodies waiting for each other's work: all refused, where refusing one lets the others return).
///
/// The judge is linearizability, against the engine itself: the same configuration also runs once per order of the
/// waits, each wait beginning only once the one before it was refused or had passed its check (no rendezvous). The
/// waits refused side by side must be exactly those refused in one of the orders (no false refusal, no miss); and no
/// wait may hang (once every other body ends, each wait that was not refused must return its target's value), unless
/// the same order hung too (a miss of the rule itself, outside this test: counted and printed).
@Suite("Work: simultaneous waits model", .serialized, .offThePool)
struct SimultaneousWaitModelTests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot

  /// The rounds' seed: `SPINDLE_REVIEW_SEED` replays one; fixed by default, so that a plain run is repeatable.
  static var seed: UInt64 {
    ProcessInfo.processInfo.environment["SPINDLE_REVIEW_SEED"].flatMap(UInt64.init) ?? 0x5EED_0037
  }

  /// Threads that arrive here leave together, once `parties` arrived (each waits at most `seconds`; returns whether
  /// all arrived in time).
  final class Rendezvous: Sendable {
    private let parties: Int
    private let arrived = Atomic<Int>(0)
    private let late = Atomic<Int>(0)

    /// How many meetings ended at the bound, before every party arrived.
    var missed: Int { late.load(ordering: .relaxed) }

    init(parties: Int) { self.parties = parties }

    @discardableResult
    func meet(seconds: Double = 2) -> Bool {
      arrived.wrappingAdd(1, ordering: .sequentiallyConsistent)
      let deadline = ContinuousClock.now + .seconds(seconds * hangBoundScale)
      var spins = 0
      while arrived.load(ordering: .sequentiallyConsistent) < parties {
        if ContinuousClock.now >= deadline {
          late.wrappingAdd(1, ordering: .relaxed)
          return false
        }
        spins += 1
        // Two cores and up to three spinning bodies: let the late one run.
        if spins > 200 { sched_yield() }
      }
      return true
    }
  }

  /// What a waiting body waits for.
  enum Target: CustomStringConvertible {
    /// The work of another running body (its index).
    case body(Int)
    /// Unstarted work added behind the bodies (its index).
    case unstarted(Int)

    var description: String {
      switch self {
      case .body(let index): "b\(index)"
      case .unstarted(let index): "u\(index)"
      }
    }
  }

  /// One round's shape: queues, the running bodies (every slot of every queue holds one), the unstarted work, and the
  /// waits (which body waits for what).
  struct Config: CustomStringConvertible {
    let widths: [Int]
    let bodyQueue: [Int]
    let unstartedQueue: [Int]
    let waits: [(waiter: Int, target: Target)]

    var description: String {
      "widths \(widths), queue of each body \(bodyQueue), queue of each unstarted \(unstartedQueue), waits "
        + waits.map { "b\($0.waiter)→\($0.target)" }.joined(separator: " ")
    }

    /// A random round, biased to what overlapping checks got wrong: waits for another waiter's work (cycles), and for
    /// unstarted work of another waiter's queue (its slots held by the waiters).
    static func random(using random: inout SeededGenerator) -> Config {
      let widths = (0..<Int.random(in: 2...3, using: &random)).map { _ in Int.random(in: 1...2, using: &random) }
      let bodyQueue = widths.indices.flatMap { queue in Array(repeating: queue, count: widths[queue]) }
      let count = min(bodyQueue.count, Int.random(in: 2...3, using: &random))
      let waiters = Array(bodyQueue.indices.shuffled(using: &random).prefix(count))
      var unstartedQueue: [Int] = []
      for queue in widths.indices {
        let extra = waiters.contains { bodyQueue[$0] == queue } && Bool.random(using: &random) ? 1 : 0
        for _ in 0..<(Int.random(in: 0...1, using: &random) + extra) { unstartedQueue.append(queue) }
      }
      unstartedQueue.shuffle(using: &random)
      let waits = waiters.map { waiter -> (waiter: Int, target: Target) in
        let others = waiters.filter { $0 != waiter }
        let behindOthers = unstartedQueue.indices.filter { item in
          others.contains { bodyQueue[$0] == unstartedQueue[item] }
        }
        let roll = Int.random(in: 0..<20, using: &random)
        if roll < 8 { return (waiter, .body(others.randomElement(using: &random)!)) }
        if roll < 15, let item = behindOthers.randomElement(using: &random) { return (waiter, .unstarted(item)) }
        let candidates =
          bodyQueue.indices.filter { $0 != waiter }.map(Target.body) + unstartedQueue.indices.map(Target.unstarted)
        return (waiter, candidates.randomElement(using: &random)!)
      }
      return Config(widths: widths, bodyQueue: bodyQueue, unstartedQueue: unstartedQueue, waits: waits)
    }
  }

  /// What the waits of one run did: per wait (index in `Config.waits`), its outcome ("hung" if it did not end within
  /// the bound once every other body had ended).
  struct RunResult {
    var outcomes: [String] = []
    var problems: [String] = []
    /// Whether every waiting body met the others at the rendezvous in time (simultaneous runs).
    var met = true

    var refused: Set<Int> { Set(outcomes.indices.filter { outcomes[$0].hasPrefix("refused:") }) }
    var hung: Set<Int> { Set(outcomes.indices.filter { outcomes[$0] == "hung" }) }

    /// Refused waits as letters of the waits' order (for the report).
    var summary: String {
      outcomes.indices.map { index in
        let outcome = outcomes[index]
        return "w\(index): " + (outcome.hasPrefix("refused:") ? "refused" : String(outcome.prefix(40)))
      }.joined(separator: ", ")
    }
  }

  /// Runs `config` once: side by side through the rendezvous (`order` nil), or one wait after the other in `order`.
  static func run(_ config: Config, name: String, order: [Int]?) -> RunResult {
    var result = RunResult()
    let queues = config.widths.indices.map { WorkQueue(name: "\(name).q\($0)", maxConcurrent: config.widths[$0]) }
    let started = SpindleTestSupport.Gate()
    let gates = config.bodyQueue.map { _ in SpindleTestSupport.Gate() }
    let targetOf = Box<[Int: Work<Int>]>()
    let outcomes = config.bodyQueue.map { _ in Slot() }
    var bodies: [Work<Int>] = []
    for index in config.bodyQueue.indices {
      let gate = gates[index]
      let outcome = outcomes[index]
      bodies.append(
        queues[config.bodyQueue[index]].add(name: "b\(index)") { () -> Int in
          started.open()
          gate.wait(seconds: 30)
          if let target = targetOf.get[index] { outcome.set(ReviewSession24Tests.outcome(of: target)) }
          return index
        })
    }
    for _ in bodies where !started.wait(seconds: 10) {
      result.problems.append("\(name): a body did not start")
    }
    var unstarted: [Work<Int>] = []
    for index in config.unstartedQueue.indices {
      unstarted.append(queues[config.unstartedQueue[index]].add(name: "u\(index)") { 100 + index })
    }
    let targets: [Work<Int>] = config.waits.map { wait in
      switch wait.target {
      case .body(let index): bodies[index]
      case .unstarted(let index): unstarted[index]
      }
    }
    targetOf.set(Dictionary(uniqueKeysWithValues: zip(config.waits.map(\.waiter), targets)))
    // A wait is settled once it was refused (or returned), or passed its check.
    func settled(_ wait: Int) -> Bool {
      let waiter = bodies[config.waits[wait].waiter]
      return outcomes[config.waits[wait].waiter].get != nil
        || AwaitCheckTests.isRecorded(waiter, waitingFor: targets[wait])
    }
    if let order {
      for wait in order {
        gates[config.waits[wait].waiter].open()
        if !eventually(within: 60, { settled(wait) }) {
          result.problems.append("\(name): wait \(wait) was neither refused nor recorded as checked")
        }
      }
    } else {
      let rendezvous = Rendezvous(parties: config.waits.count)
      for queue in queues {
        queue.engine.waitCheckHook.withLock {
          $0 = { _ = rendezvous.meet() }
        }
      }
      for wait in config.waits { gates[wait.waiter].open() }
      if !eventually(within: 60, { config.waits.indices.allSatisfy(settled) }) {
        result.problems.append("\(name): the waits begun together did not settle")
      }
      for queue in queues { queue.engine.waitCheckHook.withLock { $0 = nil } }
      result.met = rendezvous.missed == 0
    }
    // Every other body ends: a wait that can end now does.
    let waiters = Set(config.waits.map(\.waiter))
    for index in bodies.indices where !waiters.contains(index) { gates[index].open() }
    let deadline = ContinuousClock.now + .seconds(2 * hangBoundScale)
    for wait in config.waits.indices {
      let remaining = max(0.05, Double((deadline - ContinuousClock.now) / .seconds(1)) / hangBoundScale)
      result.outcomes.append(outcomes[config.waits[wait].waiter].await(within: remaining) ?? "hung")
    }
    // A hang ends once its unstarted work is cancelled; a body waiting for a body that waits for it never ends.
    for queue in queues { queue.cancelAll() }
    for gate in gates { gate.open() }
    if !eventually(within: 60, { (bodies + unstarted).allSatisfy { $0.state.isFinal } }) {
      result.problems.append("\(name): items still blocked after the round was cancelled (leaked)")
    }
    return result
  }

  /// Every order of `0..<count`.
  static func orders(of count: Int) -> [[Int]] {
    guard count > 1 else { return [Array(0..<count)] }
    return orders(of: count - 1).flatMap { order in
      (0...order.count).map { position in
        var next = order
        next.insert(count - 1, at: position)
        return next
      }
    }
  }

  /// What the rounds found, over all of them.
  struct Tally {
    var rounds = 0
    var waits = 0
    var refused = 0
    var returned = 0
    var unmet = 0
    var hungInSomeOrder = 0
    var failures: [String] = []
    var problems: [String] = []
  }

  /// One round: `config` in every order, then side by side `attempts` times, each judged against the orders.
  static func playRound(
    _ round: Int, seed: UInt64, attempts: Int, using random: inout SeededGenerator, into tally: inout Tally
  ) {
    let config = Config.random(using: &random)
    let context = "round \(round) (seed \(seed); \(config))"
    let sequential = orders(of: config.waits.count).map { order in
      (order, run(config, name: "swm.\(round).s\(order.map(String.init).joined())", order: order))
    }
    tally.rounds += 1
    for (_, result) in sequential { tally.problems += result.problems.map { "\(context): \($0)" } }
    if sequential.contains(where: { !$0.1.hung.isEmpty }) { tally.hungInSomeOrder += 1 }
    let orders = sequential.map { "order \($0.0): \($0.1.summary)" }.joined(separator: "; ")
    let everRefused = sequential.reduce(into: Set<Int>()) { $0.formUnion($1.1.refused) }
    for attempt in 0..<attempts {
      let together = run(config, name: "swm.\(round).t\(attempt)", order: nil)
      tally.problems += together.problems.map { "\(context): \($0)" }
      if !together.met { tally.unmet += 1 }
      tally.waits += together.outcomes.count
      tally.refused += together.refused.count
      tally.returned += together.outcomes.count { $0.hasPrefix("value") }
      let line = "\(context), attempt \(attempt): together: \(together.summary); \(orders)"
      // Linearizable: the refusals of some order, and no hang that order did not have.
      let matching = sequential.filter { $0.1.refused == together.refused }
      if !together.hung.isEmpty && !matching.contains(where: { together.hung.isSubset(of: $0.1.hung) }) {
        tally.failures.append("hung: \(line)")
      } else if matching.isEmpty {
        let kind =
          together.refused.isSubset(of: everRefused) ? "refusals of no order" : "false refusal (refused in no order)"
        tally.failures.append("\(kind): \(line)")
      }
      for index in together.outcomes.indices where !together.hung.contains(index) {
        let outcome = together.outcomes[index]
        if !outcome.hasPrefix("refused:") && !outcome.hasPrefix("value") {
          tally.failures.append("wait \(index) neither refused nor returning a value: \(outcome): \(line)")
        }
      }
    }
  }

  /// Random rounds (`SPINDLE_REVIEW_SEED` replays one, `SPINDLE_ADVERSARIAL_ROUNDS` sets how many): the waits begun
  /// side by side are refused as in one order of their checks, and none hangs.
  @Test func waitsBegunTogetherAreRefusedAsInSomeOrder() {
    let rounds = ReviewSession23Tests.rounds ?? (hangBoundScale > 1 ? 30 : 120)
    let seed = Self.seed
    let attempts = 3
    print(
      "SimultaneousWaitModelTests: \(rounds) rounds of \(attempts) attempts, seed \(seed)"
        + " (SPINDLE_REVIEW_SEED replays it)")
    var random = SeededGenerator(seed: seed)
    var tally = Tally()
    for round in 0..<rounds {
      Self.playRound(round, seed: seed, attempts: attempts, using: &random, into: &tally)
    }
    print(
      "SimultaneousWaitModelTests: seed \(seed): \(tally.rounds) rounds, \(tally.waits) waits begun together,"
        + " \(tally.refused) refused, \(tally.returned) returned; \(tally.failures.count) failures,"
        + " \(tally.problems.count) problems; rounds where the rendezvous missed a body: \(tally.unmet);"
        + " rounds where some order hung (a miss of the rule): \(tally.hungInSomeOrder)")
    for line in tally.failures { Issue.record(Comment(rawValue: line)) }
    for line in tally.problems { Issue.record(Comment(rawValue: line)) }
  }
}
