import Foundation
import Spindle

/// What `spindle demo` leaves to look at: a timeline of each run and an `index.html` that shows the photos and
/// both timelines side by side. Every link is relative, so the folder opens from disk and can be moved.
struct DemoPage {
  var root: String
  var names: [String]
  var cores: Int
  var jobs: Int
  var serial: (trace: WorkTrace, seconds: Double)
  var concurrent: (trace: WorkTrace, seconds: Double)
  /// How many rounds ran, and the lowest and highest of their speed-ups (the runs shown are the median round's).
  var rounds: (count: Int, low: Double, high: Double)
  var identical: Bool

  static let serialTimeline = "timeline-serial.svg"
  static let concurrentTimeline = "timeline-concurrent.svg"

  /// Writes both timelines and the page; reports where they are, or the error. Returns whether all were written.
  func write() -> Bool {
    let files: [(String, () throws -> Void)] = [
      (
        Self.serialTimeline,
        {
          try serial.trace.writeTimeline(
            toFile: path(Self.serialTimeline), title: "Serial: 1 file at a time, 1 thread per filter")
        }
      ),
      (
        Self.concurrentTimeline,
        {
          try concurrent.trace.writeTimeline(
            toFile: path(Self.concurrentTimeline),
            title: "Concurrent: \(jobs) files at a time, \(cores) bands per filter")
        }
      ),
      ("index.html", { try html().write(toFile: path("index.html"), atomically: true, encoding: .utf8) }),
    ]
    for (name, write) in files {
      do {
        try write()
      } catch {
        Terminal.error("error: cannot write \(path(name)): \(error)")
        return false
      }
    }
    Terminal.out("  timelines: \(path(Self.serialTimeline)), \(path(Self.concurrentTimeline))")
    Terminal.out("  open in a browser: \(path("index.html"))")
    return true
  }

  func path(_ name: String) -> String { (root as NSString).appendingPathComponent(name) }

  func html() -> String {
    let speedUp = serial.seconds / max(concurrent.seconds, 1e-9)
    let roundsNote =
      rounds.count > 1
      ? String(
        format: " (the median of %d rounds, which ranged from %.2f× to %.2f×; the timelines are this round's)",
        rounds.count, rounds.low, rounds.high) : ""
    var photos = ""
    for name in names {
      let output = name.replacingOccurrences(of: ".jpg", with: "-tiltshift.jpg")
      photos += """
          <figure><a href="inputs/\(escape(name))"><img src="inputs/\(escape(name))" alt="input \(escape(name))"></a>
            <figcaption>input \(escape(name))</figcaption></figure>
          <figure><a href="concurrent/\(escape(output))"><img src="concurrent/\(escape(output))" alt="output"></a>
            <figcaption>tilt-shift (<a href="serial/\(escape(output))">serial</a> ·
            <a href="concurrent/\(escape(output))">concurrent</a>)</figcaption></figure>

        """
    }
    return """
      <!DOCTYPE html>
      <html lang="en">
      <head>
      <meta charset="utf-8">
      <title>Spindle demo</title>
      <style>
        body { font-family: system-ui, "DejaVu Sans", sans-serif; margin: 2em; color: #222; }
        .runs { display: flex; flex-wrap: wrap; gap: 1.5em; }
        .runs section { flex: 1 1 560px; min-width: 0; }
        .runs img { width: 100%; border: 1px solid #ddd; }
        .photos { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 1em; }
        .photos img { width: 100%; }
        figure { margin: 0; } figcaption { font-size: 0.85em; color: #555; }
      </style>
      </head>
      <body>
      <h1>Spindle demo: tilt-shift on \(names.count) photos</h1>
      <p>Serial \(String(format: "%.2f", serial.seconds)) s, concurrent \(String(format: "%.2f", concurrent.seconds)) s:
      <strong>\(String(format: "%.2f", speedUp))× faster</strong> on \(cores) cores\(roundsNote); the outputs are
      \(identical ? "byte-identical" : "<strong>different</strong>").
      Each photo is three work items — decode, filter, encode — with dependencies; each timeline has a lane per
      thread and shows, above the lanes, how many items were waiting.</p>
      <div class="runs">
        <section><h2>Serial</h2><a href="\(Self.serialTimeline)"><img src="\(Self.serialTimeline)" alt="serial timeline"></a></section>
        <section><h2>Concurrent</h2><a href="\(Self.concurrentTimeline)"><img src="\(Self.concurrentTimeline)" alt="concurrent timeline"></a></section>
      </div>
      <h2>Photos</h2>
      <div class="photos">
      \(photos)</div>
      </body>
      </html>

      """
  }

  private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: "\"", with: "&quot;")
  }
}
