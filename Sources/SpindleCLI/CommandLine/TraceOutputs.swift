import Foundation
import Spindle
import TiltShift

/// The `--trace`, `--timeline` and `--graph` options of commands that run work, and writing what they ask for.
struct TraceOutputs {
  /// `--trace FILE.json`: a Chrome trace of the run.
  static var traceOption: Option<String?> {
    fileOption(
      "trace", valueName: "file.json", help: "Write a Chrome trace of the run (Perfetto, chrome://tracing).",
    )
  }

  /// `--timeline FILE.svg`: an SVG timeline of the run.
  static var timelineOption: Option<String?> {
    fileOption(
      "timeline", valueName: "file.svg", help: "Write an SVG timeline of the run (one lane per thread).",
    )
  }

  /// `--graph FILE.dot`: the dependency graph (Mermaid for `.mmd`).
  static var graphOption: Option<String?> {
    fileOption(
      "graph", valueName: "file.dot", help: "Write the dependency graph: Graphviz DOT, or Mermaid for .mmd.",
    )
  }

  /// A file name option; given empty, or with a byte that is not UTF-8, it is a usage error.
  ///
  /// The core's trace writers take a `String` path as UTF-8, so a name holding a byte that is not (a ``SystemPath``
  /// escape) would be written under other bytes than the ones given: refused before the run instead.
  private static func fileOption(_ name: String, valueName: String, help: String) -> Option<String?> {
    Option(
      name: name, short: nil, valueName: valueName, help: help, defaultDescription: nil, isRequired: false,
      completion: .file, expectation: "a file name in UTF-8",
      convert: { raw -> String?? in raw.isEmpty || SystemPath.hasEscapedBytes(raw) ? .none : .some(raw) },
      default: { nil })
  }

  var trace: String?
  var timeline: String?
  var graph: String?

  /// Whether any file was asked for (and so whether the run must be recorded).
  var isRequested: Bool { trace != nil || timeline != nil || graph != nil }

  /// Writes the requested files from `recording`; reports each on stderr. Returns false if one could not be written.
  func write(_ recording: WorkTrace, title: String, quiet: Bool = false) -> Bool {
    var succeeded = true
    func attempt(_ path: String?, _ what: String, _ body: (String) throws(WorkTraceError) -> Void) {
      guard let path else { return }
      do {
        try body(path)
        if !quiet { Terminal.error("wrote \(what): \(path)") }
      } catch {
        Terminal.error(Terminal.styled("error:", .red, forError: true) + " \(error)")
        succeeded = false
      }
    }
    attempt(trace, "trace") { path throws(WorkTraceError) in try recording.write(toFile: path) }
    attempt(timeline, "timeline") { path throws(WorkTraceError) in
      try recording.writeTimeline(toFile: path, title: title)
    }
    attempt(graph, "graph") { path throws(WorkTraceError) in try recording.writeGraph(toFile: path) }
    return succeeded
  }
}
