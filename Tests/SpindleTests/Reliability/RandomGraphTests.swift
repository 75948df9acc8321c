import Dispatch
import Spindle
import Synchronization
import Testing

/// Issue 15, item 4: random dependency graphs over two queues, checked node by node against a reference
/// evaluation done in plain code.
@Suite("Reliability: random graphs")
struct RandomGraphTests {
  struct NodeFailure: Error {
    var index: Int
  }

  enum Outcome: Equatable {
    case value(UInt64)
    case failed
    case cancelled
  }

  struct Node {
    var dependencies: [Int]
    var throwsError: Bool
    var cancelled: Bool
    var onSecondQueue: Bool
  }

  static func mix(_ index: Int, _ inputs: UInt64) -> UInt64 {
    var z = UInt64(index) &* 0x9E37_79B9_7F4A_7C15 &+ inputs
    z = (z ^ (z >> 31)) &* 0xBF58_476D_1CE4_E5B9
    return z ^ (z >> 29)
  }

  static func makeGraph(nodes: Int, seed: UInt64) -> [Node] {
    var random = Reliability.Random(seed: seed)
    var graph: [Node] = []
    graph.reserveCapacity(nodes)
    for index in 0..<nodes {
      let roll = random.next() % 100
      let count = index == 0 ? 0 : (roll < 20 ? 0 : roll < 60 ? 1 : roll < 85 ? 2 : Int(3 + random.next() % 6))
      var dependencies: Set<Int> = []
      for _ in 0..<count {
        // Mostly recent nodes (deep chains), sometimes any earlier node (wide fan-in).
        let span = random.next() % 4 == 0 ? index : min(index, 32)
        dependencies.insert(index - 1 - Int(random.next() % UInt64(span)))
      }
      graph.append(
        Node(
          dependencies: dependencies.sorted(),
          throwsError: random.next() % 50 == 0,
          cancelled: random.next() % 100 == 0,
          onSecondQueue: random.next() % 3 == 0
        ))
    }
    return graph
  }

  /// What every node must end as: cancellation (done before the queues start) reaches every descendant first,
  /// then failures, then values.
  static func reference(_ graph: [Node]) -> [Outcome] {
    var outcomes: [Outcome] = []
    outcomes.reserveCapacity(graph.count)
    for (index, node) in graph.enumerated() {
      let inputs = node.dependencies.map { outcomes[$0] }
      if node.cancelled || inputs.contains(.cancelled) {
        outcomes.append(.cancelled)
      } else if node.throwsError || inputs.contains(.failed) {
        outcomes.append(.failed)
      } else {
        let sum = inputs.reduce(UInt64(0)) { total, input in
          guard case .value(let value) = input else { return total }
          return total &+ value
        }
        outcomes.append(.value(mix(index, sum)))
      }
    }
    return outcomes
  }

  /// Builds the graph on two suspended queues, cancels the chosen nodes, runs it and returns the problems found.
  static func run(nodes: Int, seed: UInt64) async -> [String] {
    let graph = makeGraph(nodes: nodes, seed: seed)
    let expected = reference(graph)
    let first = WorkQueue(name: "graph.a", maxConcurrent: 3)
    let second = WorkQueue(name: "graph.b", maxConcurrent: 1)
    first.suspend()
    second.suspend()
    let ran = Counters(nodes)
    var items: [Work<UInt64>] = []
    items.reserveCapacity(nodes)
    for (index, node) in graph.enumerated() {
      let queue = node.onSecondQueue ? second : first
      let fails = node.throwsError
      let dependencies = node.dependencies.map { items[$0] }
      let work: Work<UInt64>
      switch dependencies.count {
      case 1:
        work = queue.add(after: dependencies[0]) { a in
          ran.increment(index)
          if fails { throw NodeFailure(index: index) }
          return mix(index, a)
        }
      case 2:
        work = queue.add(after: dependencies[0], dependencies[1]) { a, b in
          ran.increment(index)
          if fails { throw NodeFailure(index: index) }
          return mix(index, a &+ b)
        }
      default:
        // Any fan-in: ordering-only dependencies, whose values the body reads once they finished.
        work = queue.add(dependencies: dependencies) {
          ran.increment(index)
          if fails { throw NodeFailure(index: index) }
          var sum: UInt64 = 0
          for dependency in dependencies {
            guard case .success(let value)? = dependency.result else { throw NodeFailure(index: -1) }
            sum &+= value
          }
          return mix(index, sum)
        }
      }
      items.append(work)
    }
    for (index, node) in graph.enumerated() where node.cancelled { items[index].cancel() }
    first.resume()
    second.resume()
    let finished = await drained(first)
    let finishedToo = await drained(second)
    guard finished && finishedToo else {
      let stuck = items.indices.filter { !items[$0].state.isFinal }.prefix(10)
      return ["seed \(seed): the graph did not drain; unfinished nodes \(Array(stuck))"]
    }
    var problems: [String] = []
    for index in 0..<nodes where problems.count < 10 {
      let actual: Outcome
      switch items[index].result {
      case .success(let value)?: actual = .value(value)
      case .failure(is CancellationError)?: actual = .cancelled
      case .failure(let error as NodeFailure)? where error.index >= 0 && error.index <= index: actual = .failed
      case let other:
        problems.append("seed \(seed) node \(index): result \(String(describing: other))")
        continue
      }
      // A body runs unless the node was cancelled or an input failed.
      let hasFailedInput = graph[index].dependencies.contains { expected[$0] == .failed }
      let expectedRuns = expected[index] == .cancelled || hasFailedInput ? 0 : 1
      if actual != expected[index] || ran[index] != expectedRuns {
        problems.append(
          "seed \(seed) node \(index) after \(graph[index].dependencies): \(actual), expected \(expected[index]); "
            + "ran \(ran[index])×, expected \(expectedRuns)×")
      }
    }
    return problems
  }

  @Test("random graphs against a reference evaluation (10,000 nodes × 100 seeds with SPINDLE_STRESS=full)")
  func randomGraphsMatchTheReference() async {
    let nodes = Reliability.size(2_000, full: 10_000)
    let seeds = Reliability.size(4, full: 100)
    let base = Reliability.seed()
    var failures = 0
    for offset in 0..<seeds {
      let seed = base &+ UInt64(offset)
      let problems = await Self.run(nodes: nodes, seed: seed)
      #expect(problems.isEmpty, "replay with SPINDLE_SEED=\(seed): \(problems)")
      if !problems.isEmpty {
        failures += 1
        break
      }
    }
    print("reliability graphs: \(seeds) seeds × \(nodes) nodes from seed \(base), \(failures) seeds differing")
  }

  @Test("the reference itself: a chain after a cancelled root is cancelled, after a failure failed")
  func referenceSanity() {
    let graph = [
      Node(dependencies: [], throwsError: false, cancelled: true, onSecondQueue: false),
      Node(dependencies: [0], throwsError: false, cancelled: false, onSecondQueue: false),
      Node(dependencies: [], throwsError: true, cancelled: false, onSecondQueue: false),
      Node(dependencies: [2], throwsError: false, cancelled: false, onSecondQueue: true),
      Node(dependencies: [1, 3], throwsError: false, cancelled: false, onSecondQueue: false),
      Node(dependencies: [], throwsError: false, cancelled: false, onSecondQueue: false),
    ]
    #expect(Self.reference(graph) == [.cancelled, .cancelled, .failed, .failed, .cancelled, .value(Self.mix(5, 0))])
  }
}
