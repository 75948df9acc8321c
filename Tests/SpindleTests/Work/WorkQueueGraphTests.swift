import Dispatch
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite("WorkQueue random graphs")
struct WorkQueueGraphTests {
  /// One node of a random graph, and what a reference evaluation says about it.
  struct Node {
    var dependencies: [Int]
    var takesResults: Bool
    var fails: Bool
    var cancelled: Bool
    var kind: Int  // 0 sync, 1 async, 2 callback
    var queue: Int
  }

  enum Expected: Equatable {
    case value(Int)
    /// Ended without a value; the error codes it may carry (-1: cancelled).
    case ended(Set<Int>)
  }

  static func reference(_ nodes: [Node]) -> [Expected] {
    var expected: [Expected] = []
    for (index, node) in nodes.enumerated() {
      if node.cancelled {
        expected.append(.ended([-1]))
        continue
      }
      let inputs = node.dependencies.map { expected[$0] }
      if !node.takesResults {
        let ended = inputs.compactMap { if case .ended(let codes) = $0 { codes } else { nil } }
        if !ended.isEmpty {
          expected.append(.ended(ended.reduce(into: Set<Int>()) { $0.formUnion($1) }))
          continue
        }
      }
      if node.fails {
        expected.append(.ended([index]))
        continue
      }
      let sum = inputs.reduce(0) { total, input in
        if case .value(let value) = input { return total &+ value }
        return total
      }
      expected.append(.value((sum &* 31 &+ index) % 1_000_003))
    }
    return expected
  }

  static func compute(_ index: Int, _ node: Node, _ inputs: [Result<Int, any Error>]) throws -> Int {
    if node.fails { throw TestError(code: index) }
    let sum = inputs.reduce(0) { total, input in total &+ ((try? input.get()) ?? 0) }
    return (sum &* 31 &+ index) % 1_000_003
  }

  static func makeGraph(seed: UInt64, count: Int) -> [Node] {
    var random = SeededGenerator(seed: seed)
    return (0..<count).map { index in
      let dependencyCount = index == 0 ? 0 : Int.random(in: 0...Swift.min(4, index), using: &random)
      var dependencies: [Int] = []
      for _ in 0..<dependencyCount {
        // Mostly recent nodes (long paths), sometimes any earlier node.
        let low = Bool.random(using: &random) ? Swift.max(0, index - 8) : 0
        dependencies.append(Int.random(in: low..<index, using: &random))
      }
      return Node(
        dependencies: dependencies,
        takesResults: dependencyCount > 0 && Int.random(in: 0..<10, using: &random) == 0,
        fails: Int.random(in: 0..<40, using: &random) == 0,
        cancelled: Int.random(in: 0..<60, using: &random) == 0,
        kind: Int.random(in: 0..<3, using: &random),
        queue: Int.random(in: 0..<2, using: &random)
      )
    }
  }

  static func add(
    _ index: Int,
    _ node: Node,
    on queue: WorkQueue,
    after works: [Work<Int>]
  ) -> Work<Int> {
    let name = "n\(index)"
    if node.takesResults {
      return queue.add(name: name, afterResults: works[0], dependencies: Array(works.dropFirst())) { first in
        // Only the first dependency's outcome is typed here; the others are read the same way.
        var inputs = [first]
        for other in works.dropFirst() { inputs.append(other.result!) }
        return try compute(index, node, inputs)
      }
    }
    switch (works.count, node.kind) {
    case (0, 1):
      return queue.add(name: name) { () async throws -> Int in try compute(index, node, []) }
    case (0, 2):
      return queue.addCallback(name: name) { finish in
        DispatchQueue.global().async { finish(Result { try compute(index, node, []) }) }
      }
    case (0, _):
      return queue.add(name: name) { try compute(index, node, []) }
    case (1, 2):
      return queue.addCallback(name: name, after: works[0]) { a, finish in
        finish(Result { try compute(index, node, [.success(a)]) })
      }
    case (1, 1):
      return queue.add(name: name, after: works[0]) { a async throws in try compute(index, node, [.success(a)]) }
    case (1, _):
      return queue.add(name: name, after: works[0]) { a in try compute(index, node, [.success(a)]) }
    case (2, 1):
      return queue.add(name: name, after: works[0], works[1]) { a, b async throws in
        try compute(index, node, [.success(a), .success(b)])
      }
    case (2, _):
      return queue.add(name: name, after: works[0], works[1]) { a, b in
        try compute(index, node, [.success(a), .success(b)])
      }
    case (3, _):
      return queue.add(name: name, after: works[0], works[1], works[2]) { a, b, c in
        try compute(index, node, [.success(a), .success(b), .success(c)])
      }
    default:
      return queue.add(name: name, after: works[0], works[1], works[2], works[3]) { a, b, c, d in
        try compute(index, node, [.success(a), .success(b), .success(c), .success(d)])
      }
    }
  }

  @Test("seeded random DAGs match a reference evaluation", arguments: [1, 2, 3, 42, 2026] as [UInt64])
  func randomGraphs(seed: UInt64) async throws {
    let count = Stress.enabled ? 20_000 : 1_500
    let nodes = Self.makeGraph(seed: seed, count: count)
    let expected = Self.reference(nodes)
    var random = SeededGenerator(seed: seed ^ 0xABCD)
    let queues = [
      WorkQueue(name: "graph-a", maxConcurrent: Int.random(in: 1...4, using: &random)),
      WorkQueue(name: "graph-b", maxConcurrent: Int.random(in: 1...4, using: &random)),
    ]
    for queue in queues { queue.suspend() }
    var works: [Work<Int>] = []
    works.reserveCapacity(count)
    for (index, node) in nodes.enumerated() {
      let work = Self.add(index, node, on: queues[node.queue], after: node.dependencies.map { works[$0] })
      if node.cancelled { work.cancel() }
      works.append(work)
    }
    for queue in queues { queue.resume() }
    for queue in queues { try await queue.allFinished() }

    var mismatches: [String] = []
    for (index, work) in works.enumerated() {
      let result = try #require(work.result, "n\(index) did not complete")
      switch (expected[index], result) {
      case (.value(let value), .success(let actual)) where value == actual:
        if work.state != .finished { mismatches.append("n\(index): state \(work.state)") }
      case (.ended(let codes), .failure(let error as TestError)) where codes.contains(error.code):
        if work.state != .failed { mismatches.append("n\(index): state \(work.state) for failure") }
      case (.ended(let codes), .failure(is CancellationError)) where codes.contains(-1):
        if work.state != .cancelled { mismatches.append("n\(index): state \(work.state) for cancel") }
      default:
        mismatches.append("n\(index): expected \(expected[index]), got \(result)")
      }
    }
    #expect(mismatches.isEmpty, "seed \(seed): \(mismatches.prefix(10))")
    for queue in queues {
      #expect(queue.unfinishedCount == 0)
      #expect(queue.runningCount == 0)
    }
  }

  @Test("a chain of 100,000 runs in order and a failure at its root ends it all (no deep recursion)")
  func longChains() async throws {
    let queue = WorkQueue(name: "chain", maxConcurrent: 2)
    // The long synchronous parts (adding 100,000 items, the cancel that ends them all) run on a thread of their
    // own: under ThreadSanitizer each takes tens of seconds, and on the cooperative pool (two threads here) they
    // starved other suites' async bodies.
    let first = await offPool {
      var last = queue.add { 0 }
      for _ in 0..<100_000 { last = queue.add(after: last) { $0 + 1 } }
      return last
    }
    #expect(try await first.value == 100_000)

    queue.suspend()
    let last = await offPool {
      let root: Work<Int> = queue.add { throw TestError(code: 1) }
      var last = root
      for _ in 0..<100_000 { last = queue.add(after: last) { $0 + 1 } }
      root.cancel()
      return last
    }
    #expect(last.state == .cancelled)
    queue.resume()
    try await queue.allFinished()
  }
}
