import Foundation
import SpindleFoundation

/// Foundation's `OperationQueue` with SpindleFoundation's operations against plain `BlockOperation`s.
///
/// Scenarios: many independent operations (the per-operation cost of `AsyncOperation`'s lock and
/// notifications), and dependency chains of growing length (how `OperationQueue` scales with depth; a
/// per-item cost that grows with the length means super-linear scheduling).
package let foundationBenchmarkSuite = BenchmarkSuite(
  name: "foundation",
  summary: "OperationQueue: BlockOperation vs AsyncOperation-based operations; chains of growing length"
) { options in
  var report = BenchmarkReport(suite: "foundation")
  let independent = options.quick ? 2_000 : 10_000

  let scenario = "independent \(independent)"
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "BlockOperation",
      sample: try measure(runs: options.runs) { runIndependent(count: independent) { BlockOperation {} } },
      items: independent, isBaseline: true))
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "ResultBlockOperation",
      sample: try measure(runs: options.runs) { runIndependent(count: independent) { ResultBlockOperation { 1 } } },
      items: independent))
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "AsyncBlockOperation (finish inline)",
      sample: try measure(runs: options.runs) {
        runIndependent(count: independent) { AsyncBlockOperation<Int> { finish in finish(1) } }
      },
      items: independent))
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "AsyncBlockOperation (finish on another thread)",
      sample: try measure(runs: options.runs) {
        runIndependent(count: independent) {
          AsyncBlockOperation<Int> { finish in DispatchQueue.global().async { finish(1) } }
        }
      },
      items: independent))

  let lengths = options.quick ? [250, 500, 1_000] : [500, 1_000, 2_000]
  for length in lengths {
    let scenario = "chain \(length)"
    report.results.append(
      BenchmarkResult(
        scenario: scenario, contender: "BlockOperation chain",
        sample: try measure(runs: options.runs) { runBlockChain(length: length) },
        items: length, isBaseline: true))
    report.results.append(
      BenchmarkResult(
        scenario: scenario, contender: "typed chain (|>)",
        sample: try measure(runs: options.runs) { runTypedChain(length: length) },
        items: length))
  }
  report.notes.append(
    "per item of a chain growing with the chain length means OperationQueue's scheduling is super-linear")
  report.notes.append("ratios are against the baseline measured in the same run; the machine is shared and noisy")
  return report
}

private func runIndependent(count: Int, make: () -> Operation) {
  let queue = OperationQueue()
  var operations: [Operation] = []
  operations.reserveCapacity(count)
  for _ in 0..<count { operations.append(make()) }
  queue.addOperations(operations, waitUntilFinished: true)
}

private func runBlockChain(length: Int) {
  let queue = OperationQueue()
  var operations: [Operation] = [BlockOperation {}]
  for _ in 1..<length { operations.append(operations[operations.count - 1] |> BlockOperation {}) }
  queue.addOperations(operations, waitUntilFinished: true)
}

private func runTypedChain(length: Int) {
  let queue = OperationQueue()
  let first = ResultBlockOperation { 0 }
  var operations: [Operation] = [first]
  var last: ResultOperation<Int> = first
  for _ in 1..<length {
    let next = TransformOperation { (value: Int) in value + 1 }
    last |> next
    operations.append(next)
    last = next
  }
  queue.addOperations(operations, waitUntilFinished: true)
  precondition(last.output == length - 1, "the typed chain lost a value")
}
