import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// A review of the barrier frames of `IdentifiableDispatchQueue`: the frames of barrier blocks (`sync(flags:
/// .barrier)`, `async(flags: .barrier)`, `asyncAfter(flags: .barrier)`) report only cycles libdispatch would hang or
/// trap on, never a legal pattern, leave nothing behind on the threads that ran them, and `isCurrent` answers as the
/// chain of holds says.
@Suite(.serialized) struct ReviewSession22QueueTests {
  /// A queue of the random model, with what the model knows of it.
  struct Node: Sendable {
    let queue: IDQ
    let concurrent: Bool
    /// The queue it was created to target, as an index into the round's nodes.
    let parent: Int?
  }

  /// What the calling thread holds, as the model sees it.
  struct Model: Sendable {
    /// Each queue whose block this thread is inside (a `sync` caller blocked up the chain, or the running block), and
    /// whether it holds it alone (a serial queue, or a barrier block).
    var held: [(node: Int, alone: Bool)] = []
    /// The identifiable queue libdispatch says the code runs on (nil after a plain `DispatchQueue.sync`).
    var current: Int?
    /// Whether a plain `DispatchQueue.sync` was crossed since the thread's block began: a block entered with plain
    /// `async` is then in no frame (documented: `isCurrent` does not see it), so `isCurrent` is not checked.
    var crossedPlainSync = false
  }

  enum Step: Sendable, CustomStringConvertible {
    case sync(Int, barrier: Bool)
    case async(Int, barrier: Bool, after: Bool)
    case plainSync

    var description: String {
      switch self {
      case .sync(let node, let barrier): "sync\(barrier ? "(barrier)" : "") q\(node)"
      case .async(let node, let barrier, let after):
        "\(after ? "asyncAfter" : "async")\(barrier ? "(barrier)" : "") q\(node)"
      case .plainSync: "plain sync"
      }
    }
  }

  /// What a `sync` onto a queue does, as libdispatch would have it.
  enum Outcome: Equatable { case inline, dispatch, barrierFromInside, deadlock }

  /// The queue and the queues it targets, innermost first.
  static func chain(_ node: Int, _ nodes: [Node]) -> [Int] {
    var result = [node]
    while let parent = nodes[result.last!].parent { result.append(parent) }
    return result
  }

  static func outcome(of step: (node: Int, barrier: Bool), in model: Model, _ nodes: [Node]) -> Outcome {
    let (target, barrier) = step
    let exclusive = barrier && nodes[target].concurrent
    if let current = model.current, chain(current, nodes).contains(target) {
      return exclusive ? .barrierFromInside : .inline
    }
    for (index, x) in chain(target, nodes).enumerated() {
      let runningOnX = model.held.contains { chain($0.node, nodes).contains(x) }
      if !nodes[x].concurrent || (index == 0 && exclusive) {
        // Needs `x` alone: anything of the chain running on it blocks.
        if runningOnX { return .deadlock }
      } else if model.held.contains(where: { $0.node == x && $0.alone }) {
        // Shares `x`: only a barrier block of `x` itself up the chain blocks.
        return .deadlock
      }
    }
    return .dispatch
  }

  /// Runs `steps` from the calling thread (inside whatever blocks it is in, as `model` says); each async step runs the
  /// rest on the queue's thread, tracked by `group`. A step the model calls a deadlock ends the path unrun.
  static func perform(
    _ steps: ArraySlice<Step>,
    model: Model,
    nodes: [Node],
    group: DispatchGroup,
    log: Locked<[String]>,
    stats: Locked<[Outcome: Int]>,
    path: String
  ) {
    // `isCurrent` while libdispatch knows the current identifiable queue: every queue this thread is inside, and the
    // queues they target.
    if model.current != nil && !model.crossedPlainSync {
      for (index, node) in nodes.enumerated() {
        let expected = model.held.contains { chain($0.node, nodes).contains(index) }
        if node.queue.isCurrent != expected {
          log.withLock { $0.append("\(path): q\(index).isCurrent is \(!expected)") }
        }
      }
    }
    guard let step = steps.first else { return }
    let rest = steps.dropFirst()
    let here = path + " → \(step)"
    @Sendable func go(_ next: Model) {
      perform(rest, model: next, nodes: nodes, group: group, log: log, stats: stats, path: here)
    }
    switch step {
    case .plainSync:
      var next = model
      next.current = nil
      next.crossedPlainSync = true
      DispatchQueue(label: "review22.plain").sync { go(next) }
    case .async(let target, let barrier, let after):
      let node = nodes[target]
      let next = Model(held: [(target, !node.concurrent || barrier)], current: target)
      group.enter()
      let work: @Sendable () -> Void = {
        go(next)
        group.leave()
      }
      let flags: DispatchWorkItemFlags = barrier ? .barrier : []
      if after {
        node.queue.asyncAfter(deadline: .now(), flags: flags, execute: work)
      } else {
        node.queue.async(flags: flags, execute: work)
      }
    case .sync(let target, let barrier):
      let expected = outcome(of: (target, barrier), in: model, nodes)
      stats.withLock { $0[expected, default: 0] += 1 }
      let flags: DispatchWorkItemFlags = barrier ? .barrier : []
      switch expected {
      case .deadlock:
        return  // libdispatch would hang or trap; not run (a miss of the check is not what this test looks for)
      case .barrierFromInside:
        do {
          try nodes[target].queue.syncChecked(flags: flags) {}
          log.withLock { $0.append("\(here): ran, expected barrierFromInside") }
        } catch {
          if (error as? DeadlockError)?.reason != .barrierFromInside {
            log.withLock { $0.append("\(here): \(error)") }
          }
        }
      case .inline, .dispatch:
        var next = model
        if expected == .dispatch {
          next.held.append((target, !nodes[target].concurrent || barrier))
          next.current = target
        }
        do {
          try nodes[target].queue.syncChecked(flags: flags) { go(next) }
        } catch {
          log.withLock { $0.append("\(here): false deadlock: \(error)") }
        }
      }
    }
  }

  /// Random paths of `sync`, barrier `sync`, `async`, barrier `async`/`asyncAfter` and plain `DispatchQueue.sync` over
  /// serial and concurrent queues, some targeting others: every `sync` libdispatch would run is run (no
  /// `DeadlockError` for a legal one), a barrier `sync` from inside its queue is refused as such, `isCurrent` answers
  /// for every queue as the chain says, and no frame is left on a thread (the same threads run later paths).
  @Test func randomPathsNeverReportALegalSyncAndAnswerIsCurrent() {
    let rounds = ProcessInfo.processInfo.environment["SPINDLE_ADVERSARIAL_ROUNDS"].flatMap(Int.init) ?? 400
    let seed =
      ProcessInfo.processInfo.environment["SPINDLE_REVIEW_SEED"].flatMap(UInt64.init) ?? .random(in: 0...UInt64.max)
    var random = SeededGenerator(seed: seed)
    let log = Locked<[String]>([])
    let stats = Locked<[Outcome: Int]>([:])
    for round in 0..<rounds {
      // 0, 1 serial; 2, 3 concurrent; 4 serial → 2; 5 concurrent → 2; 6 serial → 0; 7 concurrent → 5.
      var nodes: [Node] = []
      func make(_ concurrent: Bool, _ parent: Int?) {
        let label = "review22.r\(round).q\(nodes.count)"
        let target = parent.map { nodes[$0].queue.queue }
        let queue = IDQ(label: label, attributes: concurrent ? .concurrent : [], target: target)
        nodes.append(Node(queue: queue, concurrent: concurrent, parent: parent))
      }
      make(false, nil)
      make(false, nil)
      make(true, nil)
      make(true, nil)
      make(false, 2)
      make(true, 2)
      make(false, 0)
      make(true, 5)
      let count = nodes.count
      var steps: [Step] = []
      for _ in 0..<Int.random(in: 1...6, using: &random) {
        let node = Int.random(in: 0..<count, using: &random)
        let barrier = Int.random(in: 0..<3, using: &random) == 0
        switch Int.random(in: 0..<10, using: &random) {
        case 0: steps.append(.plainSync)
        case 1: steps.append(.async(node, barrier: barrier, after: false))
        case 2: steps.append(.async(node, barrier: barrier, after: true))
        default: steps.append(.sync(node, barrier: barrier))
        }
      }
      let group = DispatchGroup()
      group.enter()
      // From a thread that runs no block: an empty chain.
      DispatchQueue.global().async { [steps, nodes] in
        Self.perform(steps[...], model: Model(), nodes: nodes, group: group, log: log, stats: stats, path: "r\(round)")
        group.leave()
      }
      guard group.wait(timeout: .now() + 10 * hangBoundScale) == .success else {
        Issue.record("round \(round) (seed \(seed)): \(steps) hung")
        return
      }
    }
    let problems = log.withLock { $0 }
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(8).joined(separator: "; "))")
    let counted = stats.withLock { $0 }
    #expect((counted[.dispatch] ?? 0) > 0 && (counted[.inline] ?? 0) > 0)
  }

  /// Inside a barrier block submitted with `async(flags: .barrier)`, code in a plain `DispatchQueue.sync` still runs
  /// on the barrier's queue (its thread holds it): `isCurrent` says so, and a `sync` back into the queue is reported
  /// instead of hanging.
  @Test func aPlainSyncInsideABarrierAsyncBlockStillHoldsTheQueue() {
    let c = IDQ(label: "review22.plain.c", attributes: .concurrent)
    let answers = Locked<[String]>([])
    let done = DispatchSemaphore(value: 0)
    c.async(flags: .barrier) {
      DispatchQueue(label: "review22.plain.p").sync {
        let current = c.isCurrent
        let error = DeadlockError.catching { try c.syncChecked {} }
        answers.withLock { $0 = ["\(current)", "\(error?.reason == .cycle)"] }
      }
      done.signal()
    }
    #expect(done.wait(timeout: .now() + 10) == .success)
    #expect(answers.withLock { $0 } == ["true", "true"])
  }

  /// Many barrier blocks (async, asyncAfter on the threads of the global pool, sync); then non-barrier blocks on
  /// those threads sync back into the queue through another one, legally, and are never refused. (Not at the same
  /// time: a barrier submitted while such a block runs makes its `sync` back into the queue wait behind the barrier,
  /// which waits for the block, in libdispatch; a hang no chain shows.)
  @Test func barrierFramesLeaveNothingBehindOnTheirThreads() {
    let c = IDQ(label: "review22.leftover.c", attributes: .concurrent)
    let s = IDQ(label: "review22.leftover.s")
    let refused = Locked(0)
    let barriers = DispatchGroup()
    for _ in 0..<100 {
      barriers.enter()
      c.async(flags: .barrier) { barriers.leave() }
      barriers.enter()
      c.asyncAfter(deadline: .now(), flags: .barrier) { barriers.leave() }
      // From this thread, one at a time: hundreds of threads blocked in a barrier `sync` leave libdispatch none for
      // the blocks they wait for.
      c.sync(flags: .barrier) {}
    }
    #expect(barriers.wait(timeout: .now() + 20 * hangBoundScale) == .success)
    // In small batches: hundreds of blocks of `c` queued at once, each waiting for `s`, use up libdispatch's threads
    // while the one holding `s` waits in `c.sync` behind the blocks still queued (a hang of the thread pool).
    for _ in 0..<75 {
      let blocks = DispatchGroup()
      for _ in 0..<4 {
        blocks.enter()
        c.async {
          if s.sync(execute: { DeadlockError.catching { try c.syncChecked {} } }) != nil {
            refused.withLock { $0 += 1 }
          }
          blocks.leave()
        }
      }
      guard blocks.wait(timeout: .now() + 20 * hangBoundScale) == .success else {
        Issue.record("a legal sync back into the queue hung")
        return
      }
    }
    #expect(refused.withLock { $0 } == 0)
  }
}
