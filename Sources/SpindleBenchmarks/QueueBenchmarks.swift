import Dispatch
import Spindle

/// Costs of IdentifiableDispatchQueue: `currentQueueIs`, re-entrant and nested `sync`, and deadlock detection,
/// each against the plain Dispatch call it replaces, measured in the same run.
public let queueBenchmarkSuite = BenchmarkSuite(
  name: "queues",
  summary: "IdentifiableDispatchQueue: currentQueueIs, sync vs DispatchQueue.sync, nested sync, cycle detection"
) { options in
  QueueBenchmarks(options: options).run()
}

/// The measurements of ``queueBenchmarkSuite``.
struct QueueBenchmarks {
  let runs: Int
  let count: Int

  init(options: BenchmarkOptions) {
    runs = options.runs
    count = options.quick ? 100_000 : 1_000_000
  }

  func run() -> BenchmarkReport {
    var report = BenchmarkReport(suite: "queues")
    report.results += currentQueueIs()
    report.results += plainSync()
    report.results += reentrantSync()
    report.results += nestedSync()
    report.results += cycleDetection()
    report.notes.append("\(count) calls per run, median of \(runs) runs; ratios against the baseline row of each case")
    report.notes.append("target: IDQ.sync (not nested) within 1.5x of DispatchQueue.sync")
    return report
  }

  private func row(_ scenario: String, _ contender: String, baseline: Bool = false, _ body: () -> Void)
    -> BenchmarkResult
  {
    BenchmarkResult(
      scenario: scenario,
      contender: contender,
      sample: measure(runs: runs, prepare: {}, body),
      items: count,
      isBaseline: baseline
    )
  }

  /// The pod's answer (one `getSpecific`) against Spindle's, off the queue, on it, and inside a sync chain.
  private func currentQueueIs() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.current")
    let other = IDQ(label: "bench.current.other")
    let key = DispatchSpecificKey<Bool>()
    queue.queue.setSpecific(key: key, value: true)
    let n = count
    var hits = 0
    var rows: [BenchmarkResult] = []
    rows.append(
      row("currentQueueIs, off the queue", "DispatchQueue.getSpecific (pod)", baseline: true) {
        for _ in 0..<n where DispatchQueue.getSpecific(key: key) != nil { hits &+= 1 }
      }
    )
    rows.append(
      row("currentQueueIs, off the queue", "IDQ.currentQueueIs") {
        for _ in 0..<n where IDQ.currentQueueIs(queue) { hits &+= 1 }
      }
    )
    rows.append(
      row("currentQueueIs, on the queue", "DispatchQueue.getSpecific (pod)", baseline: true) {
        queue.queue.sync { for _ in 0..<n where DispatchQueue.getSpecific(key: key) != nil { hits &+= 1 } }
      }
    )
    rows.append(
      row("currentQueueIs, on the queue", "IDQ.currentQueueIs") {
        queue.queue.sync { for _ in 0..<n where IDQ.currentQueueIs(queue) { hits &+= 1 } }
      }
    )
    rows.append(
      row("currentQueueIs, sync caller (a.sync { b.sync { is a? } })", "IDQ.currentQueueIs") {
        queue.sync { other.sync { for _ in 0..<n where IDQ.currentQueueIs(queue) { hits &+= 1 } } }
      }
    )
    precondition(hits == n * (runs + 1) * 3, "currentQueueIs answered wrongly during the benchmark")
    return rows
  }

  /// Not nested: the caller is on no queue.
  private func plainSync() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.sync")
    let n = count
    var sink = 0
    var rows: [BenchmarkResult] = []
    rows.append(
      row("sync, not nested", "DispatchQueue.sync", baseline: true) {
        for _ in 0..<n { queue.queue.sync { sink &+= 1 } }
      }
    )
    rows.append(row("sync, not nested", "IDQ.sync") { for _ in 0..<n { queue.sync { sink &+= 1 } } })
    rows.append(
      row("sync, not nested", "IDQ.syncChecked") {
        for _ in 0..<n { try? queue.syncChecked { sink &+= 1 } }
      }
    )
    precondition(sink == n * (runs + 1) * 3, "a sync block did not run")
    return rows
  }

  /// Already on the queue: the pod's if/else pattern against the inline `sync`.
  private func reentrantSync() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.reentrant")
    let key = DispatchSpecificKey<Bool>()
    queue.queue.setSpecific(key: key, value: true)
    let n = count
    var sink = 0
    var rows: [BenchmarkResult] = []
    rows.append(
      row("sync, re-entrant (already on the queue)", "pod pattern: getSpecific ? inline : sync", baseline: true) {
        queue.queue.sync {
          for _ in 0..<n {
            if DispatchQueue.getSpecific(key: key) != nil { sink &+= 1 } else { queue.queue.sync { sink &+= 1 } }
          }
        }
      }
    )
    rows.append(
      row("sync, re-entrant (already on the queue)", "IDQ.sync (inline)") {
        queue.queue.sync { for _ in 0..<n { queue.sync { sink &+= 1 } } }
      }
    )
    return rows
  }

  /// From a block of another queue, and three deep.
  private func nestedSync() -> [BenchmarkResult] {
    let a = IDQ(label: "bench.nested.a")
    let b = IDQ(label: "bench.nested.b")
    let c = IDQ(label: "bench.nested.c")
    let d = IDQ(label: "bench.nested.d")
    let n = count
    var sink = 0
    var rows: [BenchmarkResult] = []
    rows.append(
      row("sync, nested (from a block of a)", "DispatchQueue.sync", baseline: true) {
        a.queue.sync { for _ in 0..<n { b.queue.sync { sink &+= 1 } } }
      }
    )
    rows.append(
      row("sync, nested (from a block of a)", "IDQ.sync") {
        a.sync { for _ in 0..<n { b.sync { sink &+= 1 } } }
      }
    )
    rows.append(
      row("sync, nested 3 deep (a → b → c → d)", "DispatchQueue.sync", baseline: true) {
        a.queue.sync { b.queue.sync { c.queue.sync { for _ in 0..<n { d.queue.sync { sink &+= 1 } } } } }
      }
    )
    rows.append(
      row("sync, nested 3 deep (a → b → c → d)", "IDQ.sync") {
        a.sync { b.sync { c.sync { for _ in 0..<n { d.sync { sink &+= 1 } } } } }
      }
    )
    return rows
  }

  /// The price of finding a cycle: a → b → a reported as a thrown DeadlockError.
  private func cycleDetection() -> [BenchmarkResult] {
    let a = IDQ(label: "bench.cycle.a")
    let b = IDQ(label: "bench.cycle.b")
    let n = count
    var sink = 0
    var detected = 0
    var rows: [BenchmarkResult] = []
    rows.append(
      row("cycle a → b → a detected", "IDQ.sync to a fresh queue (reference)", baseline: true) {
        let fresh = IDQ(label: "bench.cycle.fresh")
        a.sync { b.sync { for _ in 0..<n { fresh.sync { sink &+= 1 } } } }
      }
    )
    rows.append(
      row("cycle a → b → a detected", "IDQ.syncChecked throws DeadlockError") {
        a.sync {
          b.sync {
            for _ in 0..<n {
              do { try a.syncChecked { sink &+= 1 } } catch { detected &+= 1 }
            }
          }
        }
      }
    )
    precondition(detected == n * (runs + 1), "a cycle went undetected during the benchmark")
    return rows
  }
}
