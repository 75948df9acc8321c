import Dispatch
import Spindle

/// Costs of IdentifiableDispatchQueue: `currentQueueIs`, re-entrant and nested `sync`, and deadlock detection,
/// each against the plain Dispatch call it replaces, measured round-robin in the same run.
package let queueBenchmarkSuite = BenchmarkSuite(
  name: "queues",
  summary: "IdentifiableDispatchQueue: currentQueueIs, sync vs DispatchQueue.sync, nested sync, cycle detection"
) { options in
  QueueBenchmarks(options: options).run()
}

/// The measurements of ``queueBenchmarkSuite``.
struct QueueBenchmarks {
  /// One contender: a name and a body that makes `count` calls and returns how many blocks ran (a checksum).
  typealias Contender = (name: String, body: () -> Int)

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
    report.notes.append(
      "\(count) calls per run, median of \(runs) runs; contenders alternate run by run; "
        + "ratio = median / baseline median"
    )
    report.notes.append("target: IDQ.sync (not nested) within 1.5x of DispatchQueue.sync")
    report.notes += fastestRunRatios(report.results)
    return report
  }

  /// Ratios of the fastest runs, less sensitive than medians to other processes on a busy machine.
  private func fastestRunRatios(_ results: [BenchmarkResult]) -> [String] {
    var notes: [String] = []
    var baseline: BenchmarkResult?
    for result in results {
      if result.isBaseline {
        baseline = result
        continue
      }
      guard let baseline, baseline.scenario == result.scenario else { continue }
      let ratio = (result.sample.min / baseline.sample.min * 100).rounded() / 100
      notes.append("fastest run: \(result.scenario) — \(result.contender) \(ratio)x of \(baseline.contender)")
    }
    return notes
  }

  /// Measures the contenders of one scenario round-robin (one timed run of each per round, after a warm-up round),
  /// so machine noise hits every contender alike; the first contender is the baseline.
  ///
  /// Every body must return `expected` (how many of its calls ran a block or answered true), or the suite stops:
  /// a benchmark of wrong code is worthless.
  private func scenario(_ name: String, expected: Int, _ contenders: [Contender]) -> [BenchmarkResult] {
    let clock = ContinuousClock()
    var seconds = Array(repeating: [Double](), count: contenders.count)
    for round in 0...runs {
      for (index, contender) in contenders.enumerated() {
        let start = clock.now
        let checksum = contender.body()
        let elapsed = (clock.now - start).secondsValue
        precondition(checksum == expected, "\(name) / \(contender.name): \(checksum) instead of \(expected)")
        if round > 0 { seconds[index].append(elapsed) }
      }
    }
    return contenders.enumerated().map { index, contender in
      BenchmarkResult(
        scenario: name,
        contender: contender.name,
        sample: Sample(seconds[index]),
        items: count,
        isBaseline: index == 0
      )
    }
  }

  /// The pod's answer (one `getSpecific`) against Spindle's, off the queue, on it, and inside a sync chain.
  private func currentQueueIs() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.current")
    let other = IDQ(label: "bench.current.other")
    let key = DispatchSpecificKey<Bool>()
    queue.queue.setSpecific(key: key, value: true)
    let n = count
    func podAnswer() -> Int {
      var hits = 0
      for _ in 0..<n where DispatchQueue.getSpecific(key: key) != nil { hits &+= 1 }
      return hits
    }
    func spindleAnswer() -> Int {
      var hits = 0
      for _ in 0..<n where IDQ.currentQueueIs(queue) { hits &+= 1 }
      return hits
    }
    var rows = scenario(
      "currentQueueIs, off the queue",
      expected: 0,
      [("DispatchQueue.getSpecific (pod)", podAnswer), ("IDQ.currentQueueIs", spindleAnswer)]
    )
    rows += scenario(
      "currentQueueIs, on the queue",
      expected: n,
      [
        ("DispatchQueue.getSpecific (pod)", { queue.queue.sync { podAnswer() } }),
        ("IDQ.currentQueueIs", { queue.queue.sync { spindleAnswer() } }),
      ]
    )
    rows += scenario(
      "currentQueueIs, sync caller: a.sync { b.sync { is a? } }",
      expected: n,
      [
        ("pod (answers false)", { queue.sync { other.sync { n - podAnswer() } } }),
        ("IDQ.currentQueueIs", { queue.sync { other.sync { spindleAnswer() } } }),
      ]
    )
    return rows
  }

  /// Not nested: the caller runs on no queue.
  private func plainSync() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.sync")
    let n = count
    return scenario(
      "sync, not nested",
      expected: n,
      [
        (
          "DispatchQueue.sync",
          {
            var ran = 0
            for _ in 0..<n { queue.queue.sync { ran &+= 1 } }
            return ran
          }
        ),
        (
          "IDQ.sync",
          {
            var ran = 0
            for _ in 0..<n { queue.sync { ran &+= 1 } }
            return ran
          }
        ),
        (
          "IDQ.syncChecked",
          {
            var ran = 0
            for _ in 0..<n { try? queue.syncChecked { ran &+= 1 } }
            return ran
          }
        ),
      ]
    )
  }

  /// Already on the queue: the pod's if/else pattern against the inline `sync`.
  private func reentrantSync() -> [BenchmarkResult] {
    let queue = IDQ(label: "bench.reentrant")
    let key = DispatchSpecificKey<Bool>()
    queue.queue.setSpecific(key: key, value: true)
    let n = count
    return scenario(
      "sync, re-entrant (already on the queue)",
      expected: n,
      [
        (
          "pod pattern: getSpecific ? inline : sync",
          {
            queue.queue.sync {
              var ran = 0
              for _ in 0..<n {
                if DispatchQueue.getSpecific(key: key) != nil { ran &+= 1 } else { queue.queue.sync { ran &+= 1 } }
              }
              return ran
            }
          }
        ),
        (
          "IDQ.sync (inline)",
          {
            queue.queue.sync {
              var ran = 0
              for _ in 0..<n { queue.sync { ran &+= 1 } }
              return ran
            }
          }
        ),
      ]
    )
  }

  /// From a block of another queue, and three deep.
  private func nestedSync() -> [BenchmarkResult] {
    let a = IDQ(label: "bench.nested.a")
    let b = IDQ(label: "bench.nested.b")
    let c = IDQ(label: "bench.nested.c")
    let d = IDQ(label: "bench.nested.d")
    let n = count
    func plainLoop(_ queue: IDQ) -> Int {
      var ran = 0
      for _ in 0..<n { queue.queue.sync { ran &+= 1 } }
      return ran
    }
    func spindleLoop(_ queue: IDQ) -> Int {
      var ran = 0
      for _ in 0..<n { queue.sync { ran &+= 1 } }
      return ran
    }
    var rows = scenario(
      "sync, nested (from a block of a)",
      expected: n,
      [
        ("DispatchQueue.sync", { a.queue.sync { plainLoop(b) } }),
        ("IDQ.sync", { a.sync { spindleLoop(b) } }),
      ]
    )
    rows += scenario(
      "sync, nested 3 deep (a → b → c → d)",
      expected: n,
      [
        ("DispatchQueue.sync", { a.queue.sync { b.queue.sync { c.queue.sync { plainLoop(d) } } } }),
        ("IDQ.sync", { a.sync { b.sync { c.sync { spindleLoop(d) } } } }),
      ]
    )
    return rows
  }

  /// The price of finding a cycle: a → b → a reported as a thrown DeadlockError.
  private func cycleDetection() -> [BenchmarkResult] {
    let a = IDQ(label: "bench.cycle.a")
    let b = IDQ(label: "bench.cycle.b")
    let fresh = IDQ(label: "bench.cycle.fresh")
    let n = count
    return scenario(
      "cycle a → b → a detected (inside a → b)",
      expected: n,
      [
        (
          "IDQ.sync to a third queue (no cycle)",
          {
            a.sync {
              b.sync {
                var ran = 0
                for _ in 0..<n { fresh.sync { ran &+= 1 } }
                return ran
              }
            }
          }
        ),
        (
          "IDQ.syncChecked throws DeadlockError",
          {
            a.sync {
              b.sync {
                var detected = 0
                for _ in 0..<n {
                  do { try a.syncChecked {} } catch { detected &+= 1 }
                }
                return detected
              }
            }
          }
        ),
      ]
    )
  }
}
