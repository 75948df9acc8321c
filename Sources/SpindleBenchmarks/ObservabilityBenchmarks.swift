import Foundation
import Spindle

/// What recording a trace costs: the engine's independent-items row with a `WorkTrace` on and off, and the time
/// to draw the recorded run as a timeline, a Chrome trace and a graph.
package let observabilityBenchmarkSuite = BenchmarkSuite(
  name: "observability",
  summary: "WorkQueue with a WorkTrace recording vs without; exporting the recorded run (SVG, JSON, DOT)"
) { options in
  let count = options.quick ? 10_000 : 100_000
  let runs = options.runs
  var report = BenchmarkReport(suite: "observability")
  let scenario = "independent \(count.formatted())"

  // Alternate the two so that a noisy neighbour on a shared machine slows both alike.
  var off: [Double] = []
  var on: [Double] = []
  var offCPU: [Double] = []
  var onCPU: [Double] = []
  var lastTrace = WorkTrace()
  _ = independent(count, trace: nil)
  _ = independent(count, trace: WorkTrace())
  for _ in 0..<runs {
    var cpu = processCPUSeconds()
    off.append(independent(count, trace: nil))
    offCPU.append(processCPUSeconds() - cpu)
    let trace = WorkTrace()
    cpu = processCPUSeconds()
    on.append(independent(count, trace: trace))
    onCPU.append(processCPUSeconds() - cpu)
    lastTrace = trace
  }
  let offSample = Sample(off)
  let onSample = Sample(on)
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "WorkQueue, no trace", sample: offSample, items: count, isBaseline: true)
  )
  report.results.append(
    BenchmarkResult(
      scenario: scenario, contender: "WorkQueue recording a WorkTrace", sample: onSample, items: count,
      note: String(format: "+%.0f ns/item", (onSample.median - offSample.median) / Double(count) * 1e9))
  )

  let exportName = "export \(count.formatted()) recorded items"
  let trace = lastTrace
  let timeline = try measure(runs: runs) { _ = WorkTimeline(trace: trace).svg() }
  let svgBytes = WorkTimeline(trace: trace).svg().utf8.count
  report.results.append(
    BenchmarkResult(
      scenario: exportName, contender: "SVG timeline", sample: timeline, items: count, isBaseline: true,
      note: "\(svgBytes / 1024) KiB")
  )
  let json = try measure(runs: runs) { _ = trace.chromeTraceJSON() }
  report.results.append(
    BenchmarkResult(
      scenario: exportName, contender: "Chrome trace JSON", sample: json, items: count,
      note: "\(trace.chromeTraceJSON().utf8.count / 1024) KiB")
  )
  let dot = try measure(runs: runs) { _ = trace.graphDOT() }
  report.results.append(
    BenchmarkResult(scenario: exportName, contender: "Graphviz DOT", sample: dot, items: count)
  )
  report.notes.append(
    String(
      format: "recording on / off on the engine's independent-items row: %.3fx (medians of %d alternating runs). "
        + "A queue without a trace pays one nil check per hook.",
      onSample.median / offSample.median, runs)
  )
  let offCPUItem = Sample(offCPU).median / Double(count) * 1e9
  let onCPUItem = Sample(onCPU).median / Double(count) * 1e9
  report.notes.append(
    String(
      format: "CPU time of the whole process per item (medians): %.0f ns without a trace, %.0f ns recording "
        + "(%.2fx); wall time on a busy machine also counts the engine's workers idling and waking.",
      offCPUItem, onCPUItem, onCPUItem / offCPUItem)
  )
  return report
}

/// Adds `count` empty items to a queue of the default width and waits for them; returns the seconds it took.
private func independent(_ count: Int, trace: WorkTrace?) -> Double {
  let start = ContinuousClock.now
  let queue = WorkQueue(name: "bench", trace: trace)
  for _ in 0..<count { queue.add {} }
  queue.waitUntilAllFinished()
  return (ContinuousClock.now - start).secondsValue
}

/// CPU seconds used by every thread of the process so far.
private func processCPUSeconds() -> Double {
  var time = timespec()
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
  return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
