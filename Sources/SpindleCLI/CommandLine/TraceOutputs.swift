import Foundation
import Spindle

/// The `--trace`, `--timeline` and `--graph` options of commands that run work, and writing what they ask for.
struct TraceOutputs {
  /// `--trace FILE.json`: a Chrome trace of the run.
  static var traceOption: Option<String?> {
    Option<String?>.text(
      "trace", valueName: "file.json", help: "Write a Chrome trace of the run (Perfetto, chrome://tracing).",
      completion: .file)
  }

  /// `--timeline FILE.svg`: an SVG timeline of the run.
  static var timelineOption: Option<String?> {
    Option<String?>.text(
      "timeline", valueName: "file.svg", help: "Write an SVG timeline of the run (one lane per thread).",
      completion: .file)
  }

  /// `--graph FILE.dot`: the dependency graph (Mermaid for `.mmd`).
  static var graphOption: Option<String?> {
    Option<String?>.text(
      "graph", valueName: "file.dot", help: "Write the dependency graph: Graphviz DOT, or Mermaid for .mmd.",
      completion: .file)
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
