import Dispatch
import Foundation
import Spindle
import Synchronization

/// WorkQueue against Foundation's OperationQueue, Dispatch (async + DispatchGroup) and Swift concurrency
/// (task groups, or tasks awaiting tasks), on independent work, chains, fan-in, a random DAG and memory.
///
/// Every body is empty (or adds 1), so the numbers are the cost of scheduling. Spindle is the baseline of
/// each scenario: a ratio of 4.00x means that contender took four times as long.
package let workQueueBenchmarkSuite = BenchmarkSuite(
  name: "workqueue",
  summary: "WorkQueue vs OperationQueue, Dispatch and task groups: independent items, chains, fan-in, DAG, memory"
) { options in
  var benchmarks = WorkQueueBenchmarks(options: options)
  return try await benchmarks.run()
}

private struct WorkQueueBenchmarks {
  var options: BenchmarkOptions
  var report = BenchmarkReport(suite: "workqueue")

  init(options: BenchmarkOptions) {
    self.options = options
  }

  private func size(_ full: Int) -> Int { options.quick ? Swift.max(100, full / 10) : full }

  mutating func run() async throws -> BenchmarkReport {
    let runs = options.runs
    report.notes.append(
      "Spindle WorkQueue is the baseline of each scenario; a ratio above 1 means the contender is slower. "
        + "Width: \(WorkQueue.activeProcessorCount) (active processors) for every contender."
    )

    // Memory per pending item, measured first: freed memory of earlier scenarios would hide the growth.
    let pending = size(100_000)
    var spindleBytes = 0.0
    let spindleAdd = try measure(runs: 1, warmup: 0) { spindleBytes = spindlePendingBytes(pending) }
    var operationBytes = 0.0
    let operationAdd = try measure(runs: 1, warmup: 0) { operationBytes = operationPendingBytes(pending) }

    // Independent items.
    let independent = size(100_000)
    let scenario = "independent \(independent.formatted())"
    report.add(
      scenario, "Spindle WorkQueue", independent, baseline: true,
      try measure(runs: runs) { spindleIndependent(independent) })
    report.add(
      scenario, "Foundation OperationQueue", independent, try measure(runs: runs) { operationIndependent(independent) })
    report.add(
      scenario, "DispatchQueue.async + group", independent, try measure(runs: runs) { dispatchIndependent(independent) }
    )
    report.add(
      scenario, "withTaskGroup", independent, await measureAsync(runs: runs) { await taskGroupIndependent(independent) }
    )

    // Chains.
    for full in [1_000, 8_000, 10_000, 100_000] {
      let length = size(full)
      let name = "chain \(length.formatted())"
      report.add(name, "Spindle WorkQueue", length, baseline: true, try measure(runs: runs) { spindleChain(length) })
      if full <= 8_000 {
        report.add(name, "Foundation OperationQueue", length, try measure(runs: runs) { operationChain(length) })
      }
      report.add(
        name, "Dispatch (each block dispatches the next)", length, try measure(runs: runs) { dispatchChain(length) })
      report.add(name, "Tasks awaiting tasks", length, await measureAsync(runs: runs) { await taskChain(length) })
    }

    // Fan-in.
    let fanIn = size(100_000)
    let fanInName = "fan-in \(fanIn.formatted()) → 1"
    report.add(fanInName, "Spindle WorkQueue", fanIn, baseline: true, try measure(runs: runs) { spindleFanIn(fanIn) })
    report.add(fanInName, "Foundation OperationQueue", fanIn, try measure(runs: runs) { operationFanIn(fanIn) })
    report.add(fanInName, "DispatchGroup.notify", fanIn, try measure(runs: runs) { dispatchFanIn(fanIn) })
    report.add(
      fanInName, "withTaskGroup, then one task", fanIn, await measureAsync(runs: runs) { await taskGroupFanIn(fanIn) })

    // Random DAG.
    let nodes = size(100_000)
    let graph = RandomGraph(nodes: nodes, edgesPerNode: 4, seed: 2026)
    let dagName = "random DAG \(nodes.formatted()) × ~4 edges"
    report.add(dagName, "Spindle WorkQueue", nodes, baseline: true, try measure(runs: runs) { spindleGraph(graph) })
    let foundationNodes = Swift.min(nodes, size(10_000))
    let smallGraph = RandomGraph(nodes: foundationNodes, edgesPerNode: 4, seed: 2026)
    let smallDagName = "random DAG \(foundationNodes.formatted()) × ~4 edges"
    if foundationNodes != nodes {
      report.add(
        smallDagName, "Spindle WorkQueue", foundationNodes, baseline: true,
        try measure(runs: runs) { spindleGraph(smallGraph) })
    }
    report.add(
      smallDagName, "Foundation OperationQueue", foundationNodes, try measure(runs: runs) { operationGraph(smallGraph) }
    )
    report.add(dagName, "Tasks awaiting tasks", nodes, await measureAsync(runs: runs) { await taskGraph(graph) })

    let memoryName = "memory, \(pending.formatted()) pending items"
    let spindleNote = String(format: "%.0f bytes/item", spindleBytes)
    report.add(memoryName, "Spindle WorkQueue", pending, baseline: true, spindleAdd, note: spindleNote)
    let operationNote = String(format: "%.0f bytes/item", operationBytes)
    report.add(memoryName, "Foundation OperationQueue", pending, operationAdd, note: operationNote)
    report.notes.append(
      "memory: resident set growth (/proc/self/statm, after malloc_trim) while adding items to a suspended "
        + "queue, divided by the item count (Spindle: a Work<Int> with its body; Foundation: a BlockOperation); the time column is the time "
        + "to add them."
    )
    report.notes.append(
      "chains: Spindle and Foundation build the whole chain on a suspended queue, then start it; Dispatch and "
        + "tasks start each step as soon as it exists."
    )
    report.notes.append(
      "Foundation runs chains only up to 8,000 and the DAG at 10,000 nodes: its scheduler is quadratic on Linux."
    )
    return report
  }

}

// MARK: - Independent items

private func spindleIndependent(_ count: Int) {
  let queue = WorkQueue(name: "bench")
  for _ in 0..<count { queue.add {} }
  queue.waitUntilAllFinished()
}

private func operationIndependent(_ count: Int) {
  let queue = OperationQueue()
  queue.maxConcurrentOperationCount = WorkQueue.activeProcessorCount
  for _ in 0..<count { queue.addOperation {} }
  queue.waitUntilAllOperationsAreFinished()
}

private func dispatchIndependent(_ count: Int) {
  let group = DispatchGroup()
  let queue = DispatchQueue.global()
  for _ in 0..<count { queue.async(group: group) {} }
  group.wait()
}

private func taskGroupIndependent(_ count: Int) async {
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<count { group.addTask {} }
  }
}

// MARK: - Chains

private func spindleChain(_ length: Int) {
  // Built on a suspended queue, then started: every item is pending at once, as in a prepared pipeline.
  let queue = WorkQueue(name: "bench")
  queue.suspend()
  var last = queue.add { 0 }
  for _ in 0..<length - 1 { last = queue.add(after: last) { $0 + 1 } }
  queue.resume()
  let value = try! last.wait()
  precondition(value == length - 1, "chain computed \(value)")
}

private func operationChain(_ length: Int) {
  // Added one by one to a suspended queue, then started, like the Spindle case.
  let queue = OperationQueue()
  queue.maxConcurrentOperationCount = WorkQueue.activeProcessorCount
  queue.isSuspended = true
  var previous: Operation?
  for _ in 0..<length {
    let operation = BlockOperation {}
    if let previous { operation.addDependency(previous) }
    queue.addOperation(operation)
    previous = operation
  }
  queue.isSuspended = false
  queue.waitUntilAllOperationsAreFinished()
}

private func dispatchChain(_ length: Int) {
  let done = DispatchSemaphore(value: 0)
  let queue = DispatchQueue.global()
  @Sendable func step(_ remaining: Int) {
    if remaining == 0 {
      done.signal()
    } else {
      queue.async { step(remaining - 1) }
    }
  }
  queue.async { step(length - 1) }
  done.wait()
}

private func taskChain(_ length: Int) async {
  var last = Task { 0 }
  for _ in 0..<length - 1 {
    let previous = last
    last = Task { await previous.value + 1 }
  }
  let value = await last.value
  precondition(value == length - 1, "chain computed \(value)")
}

// MARK: - Fan-in

private func spindleFanIn(_ count: Int) {
  let queue = WorkQueue(name: "bench")
  var items: [AnyWork] = []
  items.reserveCapacity(count)
  for _ in 0..<count { items.append(queue.add {}) }
  let last = queue.add(dependencies: items) { 1 }
  _ = try! last.wait()
}

private func operationFanIn(_ count: Int) {
  let queue = OperationQueue()
  queue.maxConcurrentOperationCount = WorkQueue.activeProcessorCount
  let last = BlockOperation {}
  var operations: [Operation] = []
  operations.reserveCapacity(count + 1)
  for _ in 0..<count {
    let operation = BlockOperation {}
    last.addDependency(operation)
    operations.append(operation)
  }
  operations.append(last)
  queue.addOperations(operations, waitUntilFinished: true)
}

private func dispatchFanIn(_ count: Int) {
  let group = DispatchGroup()
  let queue = DispatchQueue.global()
  for _ in 0..<count { queue.async(group: group) {} }
  let done = DispatchSemaphore(value: 0)
  group.notify(queue: queue) { done.signal() }
  done.wait()
}

private func taskGroupFanIn(_ count: Int) async {
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<count { group.addTask {} }
  }
  _ = await Task { 1 }.value
}

// MARK: - Random DAG

/// A random DAG (shared with the engine suite and Scripts/peers/tbb_flow_graph.cpp, which must build the same
/// graph): node i depends on up to `edgesPerNode` distinct earlier nodes (~4 on average).
struct RandomGraph: Sendable {
  var dependencies: [[Int]]

  init(nodes: Int, edgesPerNode: Int, seed: UInt64) {
    var state = seed
    func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    dependencies = (0..<nodes).map { index in
      guard index > 0 else { return [] }
      var picked = Set<Int>()
      for _ in 0..<Swift.min(edgesPerNode, index) {
        // Half the edges to recent nodes (long paths), half anywhere earlier.
        let window = next() % 2 == 0 ? Swift.min(index, 64) : index
        picked.insert(index - 1 - Int(next() % UInt64(window)))
      }
      return picked.sorted()
    }
  }

  var edgeCount: Int { dependencies.reduce(0) { $0 + $1.count } }
}

private func spindleGraph(_ graph: RandomGraph) {
  let queue = WorkQueue(name: "bench")
  var works: [AnyWork] = []
  works.reserveCapacity(graph.dependencies.count)
  for dependencies in graph.dependencies {
    works.append(queue.add(dependencies: dependencies.map { works[$0] }) {})
  }
  queue.waitUntilAllFinished()
}

private func operationGraph(_ graph: RandomGraph) {
  let queue = OperationQueue()
  queue.maxConcurrentOperationCount = WorkQueue.activeProcessorCount
  var operations: [Operation] = []
  operations.reserveCapacity(graph.dependencies.count)
  for dependencies in graph.dependencies {
    let operation = BlockOperation {}
    for dependency in dependencies { operation.addDependency(operations[dependency]) }
    operations.append(operation)
  }
  queue.addOperations(operations, waitUntilFinished: true)
}

private func taskGraph(_ graph: RandomGraph) async {
  var tasks: [Task<Void, Never>] = []
  tasks.reserveCapacity(graph.dependencies.count)
  for dependencies in graph.dependencies {
    let inputs = dependencies.map { tasks[$0] }
    tasks.append(
      Task {
        for input in inputs { await input.value }
      }
    )
  }
  for task in tasks { await task.value }
}

// MARK: - Memory

/// Resident memory of the process in bytes, from /proc/self/statm (0 where unavailable), after asking
/// glibc's malloc to give freed memory back to the system so earlier runs do not hide new allocations.
private func residentBytes() -> Int {
  #if canImport(Glibc)
    typealias Trim = @convention(c) (Int) -> Int32
    if let trim = Platform.lookUpFunction("malloc_trim", as: Trim.self) { _ = trim(0) }
  #endif
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
  let fields = text.split(separator: " ")
  guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
  return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

private func spindlePendingBytes(_ count: Int) -> Double {
  let queue = WorkQueue(name: "bench")
  queue.suspend()
  let before = residentBytes()
  var last: Work<Int>?
  for index in 0..<count { last = queue.add { index } }
  let after = residentBytes()
  queue.cancelAll()
  queue.resume()
  queue.waitUntilAllFinished()
  _ = last
  return Double(after - before) / Double(count)
}

private func operationPendingBytes(_ count: Int) -> Double {
  let queue = OperationQueue()
  queue.isSuspended = true
  let before = residentBytes()
  for index in 0..<count { queue.addOperation { _ = index } }
  let after = residentBytes()
  queue.cancelAllOperations()
  queue.isSuspended = false
  queue.waitUntilAllOperationsAreFinished()
  return Double(after - before) / Double(count)
}
