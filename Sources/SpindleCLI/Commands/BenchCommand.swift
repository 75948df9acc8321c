import Foundation
import SpindleBenchmarks

/// `spindle bench`: runs the benchmark suites and prints comparison tables.
///
/// The only file of the CLI that imports SpindleBenchmarks.
struct BenchCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "bench",
    abstract: "Measure Spindle against Foundation, Dispatch and TaskGroup (and, for images, libvips and ImageMagick).",
    discussion: """
      Build in release for meaningful numbers: swift run -c release spindle bench --quick
      Each case is run several times and the median is reported with its ratio to the baseline
      measured in the same run. Suites: \(suiteNames.joined(separator: ", ")).
      """,
    positionals: [
      Positional(
        name: "suite", help: "Suites to run (default: all).", repeating: true, optional: true,
        completion: .choices(suiteNames))
    ]
  )

  static var suiteNames: [String] { allBenchmarkSuites.map(\.name) }

  struct Options: OptionGroup {
    let quick = Option<Bool>.flag("quick", help: "Smaller problem sizes and fewer runs.")
    let runs = Option<Int?>.integer(
      "runs", help: "Timed runs per case (median reported).", defaultDescription: "per suite", range: 1...1000)
    let json = Option<String?>.text(
      "json", valueName: "file", help: "Also write the results as JSON to <file>.", completion: .file)
    let list = Option<Bool>.flag("list", help: "List the suites and exit.")
  }

  var quick: Bool
  var runs: Int?
  var json: String?
  var list: Bool
  var suites: [String]

  init(_ arguments: ParsedArguments<Options>) {
    quick = arguments[\.quick]
    runs = arguments[\.runs]
    json = arguments[\.json]
    list = arguments[\.list]
    suites = arguments.positionals
  }

  func validate() throws {
    for name in suites where !Self.suiteNames.contains(name) {
      var message = "no benchmark suite '\(name)' (suites: \(Self.suiteNames.joined(separator: ", ")))"
      if let near = Suggestion.nearest(to: name, among: Self.suiteNames) { message += "; did you mean '\(near)'?" }
      throw ValidationError(message)
    }
  }

  func run() async throws -> Int32 {
    if list {
      for suite in allBenchmarkSuites { Terminal.out("\(suite.name): \(suite.summary)") }
      return 0
    }
    let options = BenchmarkOptions(quick: quick, runs: runs)
    // In the order given; validate() made sure every name is a suite.
    let suites =
      self.suites.isEmpty
      ? allBenchmarkSuites : self.suites.compactMap { name in allBenchmarkSuites.first { $0.name == name } }
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
    if let path = json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      try encoder.encode(reports).write(to: URL(fileURLWithPath: path), options: .atomic)
      Terminal.error("wrote \(path)")
    }
    return 0
  }
}
