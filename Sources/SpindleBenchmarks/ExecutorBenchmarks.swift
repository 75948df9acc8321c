import Dispatch
import Foundation
import Spindle
import Synchronization

/// ConcurrentActionExecutor's cost per call against a raw `Task` and Dispatch, and the starvation it avoids.
package let executorBenchmarkSuite = BenchmarkSuite(
  name: "executors",
  summary: "ConcurrentActionExecutor overhead per call vs Task { } and DispatchQueue.global(); blocking-work starvation"
) { options in
  var report = BenchmarkReport(suite: "executors")
  let calls = options.quick ? 2_000 : 20_000
  let runs = options.runs

  // Sequential round trips: start one tiny action, wait for its output, repeat.
  let sequential = "\(calls) calls, one at a time (async)"
  let onBlocking = ConcurrentActionExecutor<Int, Int> { $0 &+ 1 }
  let onPool = ConcurrentActionExecutor<Int, Int>(executor: globalConcurrentExecutor) { $0 &+ 1 }
  report.results += await interleavedRows(
    scenario: sequential,
    runs: runs,
    items: calls,
    [
      (
        "await Task { }.value",
        {
          var sum = 0
          for index in 0..<calls { sum &+= await Task { index &+ 1 }.value }
          blackHole(sum)
        }
      ),
      (
        "DispatchQueue.global().async + continuation",
        {
          var sum = 0
          for index in 0..<calls {
            sum &+= await withCheckedContinuation { continuation in
              DispatchQueue.global().async { continuation.resume(returning: index &+ 1) }
            }
          }
          blackHole(sum)
        }
      ),
      (
        "executor.execute(_:) async, BlockingExecutor",
        {
          var sum = 0
          for index in 0..<calls { sum &+= await onBlocking.execute(index) }
          blackHole(sum)
        }
      ),
      (
        "executor.execute(_:) async, cooperative pool",
        {
          var sum = 0
          for index in 0..<calls { sum &+= await onPool.execute(index) }
          blackHole(sum)
        }
      ),
    ]
  )

  // Many callers at once, each making async calls one after another.
  let callers = 8
  let concurrent = "\(calls) calls from \(callers) concurrent tasks (async)"
  func fromCallers(_ call: @escaping @Sendable (Int) async -> Int) async {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<callers {
        group.addTask {
          var sum = 0
          for index in 0..<(calls / callers) { sum &+= await call(index) }
          blackHole(sum)
        }
      }
    }
  }
  report.results += await interleavedRows(
    scenario: concurrent,
    runs: runs,
    items: calls,
    [
      ("await Task { }.value", { await fromCallers { index in await Task { index &+ 1 }.value } }),
      ("executor.execute(_:) async, BlockingExecutor", { await fromCallers { await onBlocking.execute($0) } }),
      ("executor.execute(_:) async, cooperative pool", { await fromCallers { await onPool.execute($0) } }),
    ]
  )

  // Fire-and-forget: start every call, then wait for all completions.
  let fanOut = "\(calls) calls started at once (completion)"
  report.results.append(
    BenchmarkResult(
      scenario: fanOut,
      contender: "Task { } + DispatchGroup",
      sample: try measure(runs: runs) {
        let group = DispatchGroup()
        let sum = Counter()
        for index in 0..<calls {
          group.enter()
          Task {
            sum.add(index &+ 1)
            group.leave()
          }
        }
        group.wait()
        blackHole(sum.value)
      },
      items: calls,
      isBaseline: true
    ))
  report.results.append(
    BenchmarkResult(
      scenario: fanOut,
      contender: "DispatchQueue.global().async + DispatchGroup",
      sample: try measure(runs: runs) {
        let group = DispatchGroup()
        let sum = Counter()
        for index in 0..<calls {
          DispatchQueue.global().async(group: group) { sum.add(index &+ 1) }
        }
        group.wait()
        blackHole(sum.value)
      },
      items: calls
    ))
  for (name, executor) in [("BlockingExecutor", onBlocking), ("cooperative pool", onPool)] {
    report.results.append(
      BenchmarkResult(
        scenario: fanOut,
        contender: "executor.execute(_:completion:), \(name)",
        sample: try measure(runs: runs) {
          let group = DispatchGroup()
          let sum = Counter()
          for index in 0..<calls {
            group.enter()
            executor.execute(index) { output in
              sum.add(output)
              group.leave()
            }
          }
          group.wait()
          blackHole(sum.value)
        },
        items: calls
      ))
  }

  // Starvation: four 0.5 s blocking actions, and meanwhile one unrelated async task.
  let starvation = "4 blocking actions of 0.5 s + 1 unrelated task"
  let blockingRuns = options.quick ? 1 : 3
  for (name, executor) in [("cooperative pool (seed)", globalConcurrentExecutor), ("BlockingExecutor", nil)] {
    let sut = ConcurrentActionExecutor<Void, Void>(executor: executor ?? BlockingExecutor.shared) {
      usleep(500_000)
    }
    var latencies: [Double] = []
    let sample = await measureAsync(runs: blockingRuns, warmup: 0) {
      let executions = (0..<4).map { _ in sut.execute {} }
      try? await Task.sleep(for: .milliseconds(20))  // let the actions occupy their threads
      let clock = ContinuousClock()
      let start = clock.now
      await Task.detached(priority: .high) { blackHole(1) }.value  // the actions' priority
      latencies.append((clock.now - start).secondsValue)
      for execution in executions { await execution.wait() }
    }
    let latency = Sample(latencies).median
    report.results.append(
      BenchmarkResult(
        scenario: starvation,
        contender: "actions on \(name)",
        sample: sample,
        isBaseline: executor != nil,
        note: "unrelated task latency \(formatSeconds(latency))"
      ))
  }
  report.notes.append(
    "\(ProcessInfo.processInfo.activeProcessorCount) cores; BlockingExecutor.shared has "
      + "\(BlockingExecutor.defaultSharedThreadCount) threads. Starvation rows: wall time for the four actions, "
      + "and how long an unrelated Task.detached at the actions' priority (.high) took to run meanwhile."
  )
  return report
}

@inline(never)
private func blackHole<T>(_ value: T) {
  withExtendedLifetime(value) {}
}

/// A shared sum that escaping closures can capture.
private final class Counter: Sendable {
  private let total = Atomic<Int>(0)
  func add(_ amount: Int) { total.add(amount, ordering: .relaxed) }
  var value: Int { total.load(ordering: .relaxed) }
}

/// Measures the contenders one run of each per round, so that load from other processes hits all alike; the first is
/// the baseline, and each other row's note gives the median of its per-round ratios to it.
private func interleavedRows(
  scenario: String,
  runs: Int,
  items: Int,
  _ contenders: [(name: String, body: () async -> Void)]
) async -> [BenchmarkResult] {
  let clock = ContinuousClock()
  for contender in contenders { await contender.body() }  // warm-up
  var seconds = Array(repeating: [Double](), count: contenders.count)
  for _ in 0..<runs {
    for (index, contender) in contenders.enumerated() {
      let start = clock.now
      await contender.body()
      seconds[index].append((clock.now - start).secondsValue)
    }
  }
  return contenders.indices.map { index in
    let ratio = Sample(zip(seconds[index], seconds[0]).map { $0 / $1 }).median
    return BenchmarkResult(
      scenario: scenario,
      contender: contenders[index].name,
      sample: Sample(seconds[index]),
      items: items,
      isBaseline: index == 0,
      note: index == 0 ? "runs interleaved" : "per-round ratio " + String(format: "%.2fx", ratio)
    )
  }
}
