import Dispatch
import Foundation
import Spindle
import Synchronization

/// The speed goals of the WorkQueue engine (issue 11): four graph workloads at width 2, async and callback
/// bodies against their peers, and the peak thread count of callback and blocking bodies.
///
/// Graph construction and the run are timed together, as C++ schedulers are measured: the WorkQueue adds
/// each item to a running queue, so the graph runs while it is built. A second row per workload builds the graph on
/// a suspended queue and then resumes it, as the oneTBB peer builds its graph before the first message. `Scripts/bench-engine-peers.sh` runs
/// this suite beside a oneTBB flow-graph program on the same four workloads (the same random DAG) and
/// prints the ratios.
package let engineBenchmarkSuite = BenchmarkSuite(
  name: "engine",
  summary: "WorkQueue engine at width 2: independent, chain, fan-in, random DAG; async, callback bodies; peak threads"
) { options in
  var benchmarks = EngineBenchmarks(options: options)
  return try await benchmarks.run()
}

/// The width every WorkQueue of the graph workloads runs at (the goals are stated at width 2).
private let engineWidth = 2

private struct EngineBenchmarks {
  var options: BenchmarkOptions
  var report = BenchmarkReport(suite: "engine")

  init(options: BenchmarkOptions) {
    self.options = options
  }

  private func size(_ full: Int) -> Int { options.quick ? Swift.max(100, full / 10) : full }

  mutating func run() async throws -> BenchmarkReport {
    let runs = options.runs
    let nodes = size(100_000)
    let count = nodes.formatted()

    // Thread peaks first, in a process that has started few threads yet. Idle Dispatch threads linger for
    // seconds after a burst, so the second workload waits (up to 8 s) for the count to fall back first.
    let initialThreads = processThreadCount()
    let callbacks = size(20_000)
    let (callbackSample, callbackPeak) = try measurePeakThreads { engineCallbackPeak(callbacks) }
    report.add(
      "peak threads: width 2, \(callbacks.formatted()) callback bodies", "WorkQueue callback bodies", callbacks,
      baseline: true, callbackSample, note: callbackPeak.note)
    waitForThreads(atMost: initialThreads + 2, limit: .seconds(8))
    let blockingPerQueue = size(320)
    let (blockingSample, blockingPeak) = try measurePeakThreads { engineBlockingPeak(perQueue: blockingPerQueue) }
    report.add(
      "peak threads: 4 queues × width 64, \((4 * blockingPerQueue).formatted()) blocking bodies",
      "WorkQueue sync bodies (sleep 2 ms)", 4 * blockingPerQueue, baseline: true, blockingSample,
      note: blockingPeak.note)

    // The four graph workloads.
    let independent = "independent \(count)"
    report.add(independent, "WorkQueue", nodes, baseline: true, try measure(runs: runs) { engineIndependent(nodes) })
    report.add(
      independent, "DispatchQueue.async + group", nodes,
      try measure(runs: runs) { engineDispatchIndependent(nodes) })
    report.add(
      independent, "withTaskGroup", nodes, await measureAsync(runs: runs) { await engineTaskGroupIndependent(nodes) })

    addRecordingRows(nodes, runs: runs)

    report.add(
      independent, "WorkQueue, built suspended then resumed", nodes,
      try measure(runs: runs) { _ = engineIndependentTimed(nodes, trace: nil, builtSuspended: true) })
    report.add("chain \(count)", "WorkQueue", nodes, baseline: true, try measure(runs: runs) { engineChain(nodes) })
    report.add(
      "chain \(count)", "WorkQueue, built suspended then resumed", nodes,
      try measure(runs: runs) { engineChain(nodes, builtSuspended: true) })
    report.add(
      "fan-in \(count) → 1", "WorkQueue", nodes, baseline: true, try measure(runs: runs) { engineFanIn(nodes) })
    report.add(
      "fan-in \(count) → 1", "WorkQueue, built suspended then resumed", nodes,
      try measure(runs: runs) { engineFanIn(nodes, builtSuspended: true) })
    // One item with every other one as its dependent, built suspended: the completion hands all of them on at once
    // (quadratic until session 15, which this row would have shown: 10.7 µs per item at 100,000, 0.6 µs after).
    report.add(
      "fan-out 1 → \(count)", "WorkQueue, built suspended then resumed", nodes, baseline: true,
      try measure(runs: runs) { engineFanOut(nodes) })
    let graph = RandomGraph(nodes: nodes, edgesPerNode: 4, seed: 2026)
    report.add(
      "random DAG \(count) × ~4 edges", "WorkQueue", nodes, baseline: true,
      try measure(runs: runs) { engineGraph(graph) }, note: "\(graph.edgeCount) edges")
    report.add(
      "random DAG \(count) × ~4 edges", "WorkQueue, built suspended then resumed", nodes,
      try measure(runs: runs) { engineGraph(graph, builtSuspended: true) })

    // Async bodies against a child task per item: the peer is the baseline, so the ratio is WorkQueue ÷ peer.
    // 20,000 items (not 100,000) keep the slow case within a developer's patience; the cost per item is flat.
    let items = size(20_000)
    let asyncName = "async bodies \(items.formatted())"
    report.add(
      asyncName, "withTaskGroup child task per item", items, baseline: true,
      await measureAsync(runs: runs) { await engineTaskGroupIndependent(items) })
    report.add(asyncName, "WorkQueue async bodies", items, await measureAsync(runs: runs) { await engineAsync(items) })

    // Callback bodies that call `finish` at once against sync bodies: again WorkQueue ÷ the sync baseline.
    let callbackName = "callback bodies \(items.formatted())"
    report.add(
      callbackName, "WorkQueue sync bodies", items, baseline: true, try measure(runs: runs) { engineIndependent(items) }
    )
    report.add(callbackName, "WorkQueue callback bodies", items, try measure(runs: runs) { engineCallbacks(items) })

    report.notes.append(
      "graph workloads: WorkQueue(maxConcurrent: \(engineWidth)) is the baseline; graph built and run together "
        + "(items added to the running queue), empty bodies; the 'built suspended then resumed' rows build the graph "
        + "on a suspended queue first, as oneTBB's peer does. Dispatch (the global queue) and the task group use "
        + "every active processor (\(WorkQueue.activeProcessorCount) here)."
    )
    report.notes.append(
      "async and callback rows: the peer is the baseline, so the ratio is WorkQueue ÷ peer (goal ≤ 1.5). "
        + "Callback bodies call finish synchronously."
    )
    report.notes.append(
      "peak threads: the most `Threads:` of /proc/self/status seen while the workload ran (sampled every "
        + "0.2 ms, one run, the sampler included), and the count just before it started."
    )
    return report
  }

  /// The independent row with recording off (the baseline), off again (an A/A pair: the noise floor of the
  /// comparison) and on (`WorkQueue(trace:)`), interleaved so that a noisy neighbour slows all three alike.
  private mutating func addRecordingRows(_ nodes: Int, runs: Int) {
    let scenario = "independent \(nodes.formatted()), recording"
    var seconds: [[Double]] = [[], [], []]
    let contenders: [() -> Double] = [
      { engineIndependentTimed(nodes, trace: nil) },
      { engineIndependentTimed(nodes, trace: nil) },
      { engineIndependentTimed(nodes, trace: WorkTrace()) },
    ]
    for contender in contenders { _ = contender() }  // warm-up
    // Every order in turn, so that each contender follows each other one equally often (the run after a recording
    // one finds the heap the trace left behind).
    let orders = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [2, 1, 0], [1, 0, 2]]
    let rounds = Swift.max(runs, orders.count)
    for round in 0..<rounds {
      for which in orders[round % orders.count] { seconds[which].append(contenders[which]()) }
    }
    let (off, offAgain, on) = (Sample(seconds[0]), Sample(seconds[1]), Sample(seconds[2]))
    report.add(scenario, "WorkQueue, recording off", nodes, baseline: true, off)
    report.add(scenario, "WorkQueue, recording off (again: A/A)", nodes, offAgain, note: "the noise floor")
    report.add(
      scenario, "WorkQueue(trace:), recording on", nodes, on,
      note: String(format: "+%.0f ns/item", (on.median - off.median) / Double(nodes) * 1e9))
    report.notes.append(
      String(
        format: "recording: on / off %.3fx, off / off (A/A) %.3fx (medians of %d interleaved rounds). Off, a "
          + "queue pays a nil check per hook (three per synchronous item); Scripts/bench-trace-hooks.sh "
          + "measures that against a build with the hooks compiled out.",
        on.median / off.median, offAgain.median / off.median, rounds)
    )
  }

}

// MARK: - Graph workloads

private func engineIndependent(_ count: Int) {
  _ = engineIndependentTimed(count, trace: nil)
}

/// ``engineIndependent(_:)`` with an optional trace; returns the seconds it took.
private func engineIndependentTimed(_ count: Int, trace: WorkTrace?, builtSuspended: Bool = false) -> Double {
  let start = ContinuousClock.now
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth, trace: trace)
  if builtSuspended { queue.suspend() }
  for _ in 0..<count { queue.add {} }
  if builtSuspended { queue.resume() }
  queue.waitUntilAllFinished()
  return (ContinuousClock.now - start).secondsValue
}

private func engineDispatchIndependent(_ count: Int) {
  let group = DispatchGroup()
  let queue = DispatchQueue.global()
  for _ in 0..<count { queue.async(group: group) {} }
  group.wait()
}

private func engineTaskGroupIndependent(_ count: Int) async {
  await withTaskGroup(of: Void.self) { group in
    for _ in 0..<count { group.addTask {} }
  }
}

private func engineChain(_ length: Int, builtSuspended: Bool = false) {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  if builtSuspended { queue.suspend() }
  var last = queue.add { 0 }
  for _ in 0..<length - 1 { last = queue.add(after: last) { $0 + 1 } }
  if builtSuspended { queue.resume() }
  let value = try! last.wait()
  precondition(value == length - 1, "chain computed \(value)")
}

private func engineFanIn(_ count: Int, builtSuspended: Bool = false) {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  if builtSuspended { queue.suspend() }
  var items: [AnyWork] = []
  items.reserveCapacity(count)
  for _ in 0..<count { items.append(queue.add {}) }
  let last = queue.add(dependencies: items) { 1 }
  if builtSuspended { queue.resume() }
  // Waited for outside the check: under `-Ounchecked` a precondition's condition is not evaluated, so a wait inside
  // it would not happen (a scratch harness built that way timed only the adding for several sessions).
  let value = try! last.wait()
  precondition(value == 1, "fan-in did not run its last item")
}

private func engineFanOut(_ count: Int) {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  queue.suspend()
  let source = queue.add { 1 }
  var last = source
  for _ in 0..<count - 1 { last = queue.add(after: source) { $0 + 1 } }
  queue.resume()
  queue.waitUntilAllFinished()
  precondition(last.result.flatMap { try? $0.get() } == 2, "fan-out: a dependent did not get its value")
}

private func engineGraph(_ graph: RandomGraph, builtSuspended: Bool = false) {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  if builtSuspended { queue.suspend() }
  var works: [AnyWork] = []
  works.reserveCapacity(graph.dependencies.count)
  for dependencies in graph.dependencies {
    works.append(queue.add(dependencies: dependencies.map { works[$0] }) {})
  }
  if builtSuspended { queue.resume() }
  queue.waitUntilAllFinished()
  precondition(works.allSatisfy { $0.state == .finished }, "random DAG: a node did not finish")
}

// MARK: - Body kinds

private func engineAsync(_ count: Int) async {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  for _ in 0..<count { queue.add { () async -> Void in } }
  // Awaited, not blocked on: the bodies run on the cooperative pool, which this task also runs on.
  try? await queue.allFinished()
}

private func engineCallbacks(_ count: Int) {
  let queue = WorkQueue(name: "bench", maxConcurrent: engineWidth)
  for _ in 0..<count { queue.addCallback { (finish: WorkFinish<Void>) in finish(()) } }
  queue.waitUntilAllFinished()
}

// MARK: - Peak threads

private func engineCallbackPeak(_ count: Int) {
  let queue = WorkQueue(name: "bench callbacks", maxConcurrent: engineWidth)
  let ran = RunCounter()
  for _ in 0..<count {
    queue.addCallback { (finish: WorkFinish<Void>) in
      ran.count.add(1, ordering: .relaxed)
      finish(())
    }
  }
  queue.waitUntilAllFinished()
  let total = ran.count.load(ordering: .relaxed)
  precondition(total == count, "callback bodies: \(total) of \(count) ran")
}

/// How many bodies ran; an `Atomic` only, so it is `Sendable` as it stands.
private final class RunCounter: Sendable {
  let count = Atomic<Int>(0)
}

/// Four queues of width 64 whose bodies block their thread (a 2 ms sleep, as a blocking read would).
private func engineBlockingPeak(perQueue: Int) {
  let queues = (0..<4).map { WorkQueue(name: "bench blocking \($0)", maxConcurrent: 64) }
  for queue in queues {
    for _ in 0..<perQueue { queue.add { usleep(2_000) } }
  }
  for queue in queues { queue.waitUntilAllFinished() }
}

/// The process's thread count before a workload and the most seen while it ran.
private struct ThreadPeak {
  var before: Int
  var peak: Int

  var note: String { "peak \(peak) threads (\(before) before)" }
}

/// Runs `body` once while a sampler thread reads `Threads:` from /proc/self/status every 0.2 ms.
private func measurePeakThreads(_ body: () throws -> Void) throws -> (Sample, ThreadPeak) {
  let sampler = ThreadSampler()
  let before = processThreadCount()
  let thread = Thread { sampler.sample() }
  thread.start()
  sampler.waitUntilStarted()
  let sample = try measure(runs: 1, warmup: 0, body)
  sampler.stop()
  return (sample, ThreadPeak(before: before, peak: Swift.max(sampler.peak, processThreadCount())))
}

/// The state of a sampler thread; `Atomic` fields only, so it is `Sendable` as it stands.
private final class ThreadSampler: Sendable {
  private let running = Atomic<Bool>(true)
  private let started = Atomic<Bool>(false)
  private let done = DispatchSemaphore(value: 0)
  private let highest = Atomic<Int>(0)

  var peak: Int { highest.load(ordering: .acquiring) }

  func sample() {
    while running.load(ordering: .acquiring) {
      let count = processThreadCount()
      _ = highest.max(count, ordering: .relaxed)
      started.store(true, ordering: .releasing)
      usleep(200)
    }
    done.signal()
  }

  func waitUntilStarted() {
    while !started.load(ordering: .acquiring) { usleep(100) }
  }

  func stop() {
    running.store(false, ordering: .releasing)
    done.wait()
  }
}

/// Sleeps until the process has at most `count` threads, or `limit` has passed.
private func waitForThreads(atMost count: Int, limit: Duration) {
  let clock = ContinuousClock()
  let deadline = clock.now + limit
  while processThreadCount() > count && clock.now < deadline { usleep(20_000) }
}

/// The `Threads:` line of /proc/self/status (0 where there is none), read with plain system calls.
private func processThreadCount() -> Int {
  let descriptor = open("/proc/self/status", O_RDONLY)
  guard descriptor >= 0 else { return 0 }
  defer { close(descriptor) }
  var buffer = [UInt8](repeating: 0, count: 4096)
  let length = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
  guard length > 0 else { return 0 }
  let text = String(decoding: buffer[0..<length], as: UTF8.self)
  guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) else { return 0 }
  return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) ?? 0
}
