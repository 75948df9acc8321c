import Foundation

/// Options shared by every benchmark suite.
package struct BenchmarkOptions: Sendable {
  /// Run a reduced problem size and fewer repetitions (for `spindle bench --quick` and CI smoke runs).
  package var quick: Bool
  /// How many timed runs each measurement takes; the median is reported.
  package var runs: Int

  package init(quick: Bool = false, runs: Int? = nil) {
    self.quick = quick
    self.runs = runs ?? (quick ? 3 : 7)
  }
}

/// Timing statistics of one measured case, in seconds.
package struct Sample: Sendable, Codable {
  package var median: Double
  package var min: Double
  package var max: Double
  package var runs: Int

  package init(_ seconds: [Double]) {
    precondition(!seconds.isEmpty, "a sample needs at least one run")
    let sorted = seconds.sorted()
    let mid = sorted.count / 2
    median = sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    min = sorted.first!
    max = sorted.last!
    runs = sorted.count
  }
}

/// Measures `body` `runs` times after `warmup` untimed runs and returns the statistics.
///
/// `body` receives nothing and must do the whole unit of work (set-up that should not be
/// timed belongs in `prepare`, which runs before each timed run).
package func measure(
  runs: Int,
  warmup: Int = 1,
  prepare: () throws -> Void = {},
  _ body: () throws -> Void
) rethrows -> Sample {
  let clock = ContinuousClock()
  for _ in 0..<warmup {
    try prepare()
    try body()
  }
  var seconds: [Double] = []
  seconds.reserveCapacity(runs)
  for _ in 0..<runs {
    try prepare()
    let start = clock.now
    try body()
    seconds.append((clock.now - start).secondsValue)
  }
  return Sample(seconds)
}

/// Async variant of ``measure(runs:warmup:prepare:_:)``.
package func measureAsync(
  runs: Int,
  warmup: Int = 1,
  _ body: () async throws -> Void
) async rethrows -> Sample {
  let clock = ContinuousClock()
  for _ in 0..<warmup { try await body() }
  var seconds: [Double] = []
  for _ in 0..<runs {
    let start = clock.now
    try await body()
    seconds.append((clock.now - start).secondsValue)
  }
  return Sample(seconds)
}

/// One row of a comparison: a case, a contender, its sample and an optional per-item scale.
package struct BenchmarkResult: Sendable, Codable {
  /// The case measured, e.g. "chain 10,000".
  package var scenario: String
  /// Who ran it, e.g. "Spindle WorkQueue", "Foundation OperationQueue".
  package var contender: String
  package var sample: Sample
  /// Items processed per run, for per-item costs (1 when not meaningful).
  package var items: Int
  /// The contender this row's ratio is taken against within the same scenario (nil: this row is the baseline).
  package var isBaseline: Bool
  /// Free-form extra value, e.g. "MP/s 41.2" or "bytes/item 120".
  package var note: String?

  package init(
    scenario: String,
    contender: String,
    sample: Sample,
    items: Int = 1,
    isBaseline: Bool = false,
    note: String? = nil
  ) {
    self.scenario = scenario
    self.contender = contender
    self.sample = sample
    self.items = items
    self.isBaseline = isBaseline
    self.note = note
  }
}

/// The output of one suite: results plus free-form notes printed under the table.
package struct BenchmarkReport: Sendable, Codable {
  package var suite: String
  package var results: [BenchmarkResult]
  package var notes: [String]

  package init(suite: String, results: [BenchmarkResult] = [], notes: [String] = []) {
    self.suite = suite
    self.results = results
    self.notes = notes
  }

  /// Appends one contender's result for `scenario` (`items` per run; `baseline` marks the row ratios are to).
  package mutating func add(
    _ scenario: String,
    _ contender: String,
    _ items: Int,
    baseline: Bool = false,
    _ sample: Sample,
    note: String? = nil
  ) {
    results.append(
      BenchmarkResult(
        scenario: scenario, contender: contender, sample: sample, items: items, isBaseline: baseline, note: note
      )
    )
  }

  /// A plain-text table: per scenario, each contender's median, per-item cost and ratio to the baseline.
  ///
  /// The ratio is `contender median / baseline median`: below 1 means faster than the baseline.
  package func table() -> String {
    var lines: [String] = []
    lines.append("== \(suite) ==")
    let header = ["scenario", "contender", "median", "per item", "vs baseline", "note"]
    var rows: [[String]] = [header]
    var scenarios: [String] = []
    for r in results where !scenarios.contains(r.scenario) { scenarios.append(r.scenario) }
    for scenario in scenarios {
      let group = results.filter { $0.scenario == scenario }
      let baseline = group.first(where: \.isBaseline) ?? group.first!
      for r in group {
        let ratio = r.sample.median / baseline.sample.median
        rows.append([
          r.scenario,
          r.contender,
          formatSeconds(r.sample.median),
          r.items > 1 ? formatSeconds(r.sample.median / Double(r.items)) : "",
          r.isBaseline ? "baseline" : String(format: "%.2fx", ratio),
          r.note ?? "",
        ])
      }
    }
    var widths = Array(repeating: 0, count: header.count)
    for row in rows { for (i, cell) in row.enumerated() { widths[i] = Swift.max(widths[i], cell.count) } }
    for (index, row) in rows.enumerated() {
      let padded = row.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
      lines.append(padded.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
      if index == 0 { lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
    for note in notes { lines.append("note: \(note)") }
    return lines.joined(separator: "\n")
  }
}

/// Formats seconds with a unit that keeps three significant digits (ns, µs, ms, s).
package func formatSeconds(_ s: Double) -> String {
  switch s {
  case ..<1e-6: String(format: "%.1f ns", s * 1e9)
  case ..<1e-3: String(format: "%.2f µs", s * 1e6)
  case ..<1: String(format: "%.2f ms", s * 1e3)
  default: String(format: "%.2f s", s)
  }
}

/// A named group of measurements that `spindle bench` can run.
package struct BenchmarkSuite: Sendable {
  package var name: String
  package var summary: String
  package var run: @Sendable (BenchmarkOptions) async throws -> BenchmarkReport

  package init(
    name: String,
    summary: String,
    run: @escaping @Sendable (BenchmarkOptions) async throws -> BenchmarkReport
  ) {
    self.name = name
    self.summary = summary
    self.run = run
  }
}
