import Foundation
import SpindleBenchmarks

/// `spindle bench`: runs the benchmark suites and prints comparison tables.
enum BenchCommand {
  static let spec = CommandSpec(
    name: "spindle bench",
    abstract: "Measure Spindle against Foundation, Dispatch and TaskGroup (and, for images, libvips and ImageMagick).",
    discussion: """
      Build in release for meaningful numbers: swift run -c release spindle bench --quick
      Each case is run several times and the median is reported with its ratio to the baseline
      measured in the same run. Suites: \(allBenchmarkSuites.map(\.name).joined(separator: ", ")).
      """,
    positionals: [("suite", "Suites to run (default: all).", true, true)],
    options: [
      OptionSpec(name: "quick", help: "Smaller problem sizes and fewer runs."),
      OptionSpec(name: "runs", valueName: "n", help: "Timed runs per case (median reported)."),
      OptionSpec(name: "json", valueName: "file", help: "Also write the results as JSON to <file>."),
      OptionSpec(name: "list", help: "List the suites and exit."),
    ]
  )

  static func run(_ arguments: [String]) async throws -> Int32 {
    let parsed = try spec.parse(arguments)
    if parsed.flag("help") {
      Terminal.out(spec.help)
      return 0
    }
    if parsed.flag("list") {
      for suite in allBenchmarkSuites { Terminal.out("\(suite.name): \(suite.summary)") }
      return 0
    }
    let runs = parsed.string("runs") == nil ? nil : try parsed.int("runs", default: 5, range: 1...1000)
    let options = BenchmarkOptions(quick: parsed.flag("quick"), runs: runs)
    var suites = allBenchmarkSuites
    if !parsed.positionals.isEmpty {
      suites = []
      for name in parsed.positionals {
        guard let suite = allBenchmarkSuites.first(where: { $0.name == name }) else {
          throw UsageError(
            message: "no benchmark suite '\(name)' (suites: \(allBenchmarkSuites.map(\.name).joined(separator: ", ")))",
            usage: spec.usage
          )
        }
        suites.append(suite)
      }
    }
    #if DEBUG
      Terminal.error("warning: this is a debug build; run `swift run -c release spindle bench` for real numbers")
    #endif
    var reports: [BenchmarkReport] = []
    for suite in suites {
      Terminal.error("running \(suite.name)…")
      let report = try await suite.run(options)
      reports.append(report)
      Terminal.out(report.table() + "\n")
    }
    if let path = parsed.string("json") {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      try encoder.encode(reports).write(to: URL(fileURLWithPath: path), options: .atomic)
      Terminal.error("wrote \(path)")
    }
    return 0
  }
}
