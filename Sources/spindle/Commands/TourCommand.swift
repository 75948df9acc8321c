import Dispatch
import Foundation
import Spindle
import SpindleBenchmarks
import Synchronization

/// `spindle tour [PAGE]`: the playground's pages as short narrated scenarios that run on Linux.
enum TourCommand {
  static let spec = CommandSpec(
    name: "spindle tour",
    abstract: "Walk through the concurrency playground's pages as runnable scenarios.",
    discussion: "Without PAGE every page runs in order. Pages: \(pages.map(\.name).joined(separator: ", ")).",
    positionals: [("page", "One page to run (see --list).", false, true)],
    options: [
      OptionSpec(name: "list", help: "List the pages and exit."),
      OptionSpec(
        name: "timeline", valueName: "dir",
        help: "Write SVG timelines of the pages that compare serial and concurrent work (queue, pipeline) into dir."),
    ]
  )

  /// Where pages write their timelines (`--timeline`), if anywhere.
  static let timelineFolder = TSanVisibleMutex<String?>(nil)

  struct Page: Sendable {
    var name: String
    var title: String
    var run: @Sendable () throws -> Void
  }

  static let pages: [Page] = [
    Page(name: "work", title: "A unit of work", run: unitOfWork),
    Page(name: "queue", title: "A queue with width 1 vs 2", run: queueWidth),
    Page(name: "async", title: "An asynchronous unit", run: asynchronousUnit),
    Page(name: "dependencies", title: "Dependencies that pass values", run: dependencies),
    Page(name: "pipeline", title: "A pipeline per image, with cancellation", run: pipeline),
    Page(name: "gcd", title: "GCD queues: serial vs concurrent, and labels", run: gcdQueues),
    Page(name: "groups", title: "Dispatch groups with notify", run: groups),
    Page(name: "barrier", title: "Barriers: torn state vs Isolated", run: barrier),
  ]

  static func run(_ arguments: [String]) throws -> Int32 {
    let parsed = try spec.parse(arguments)
    if parsed.flag("help") {
      Terminal.out(spec.help)
      return 0
    }
    if parsed.flag("list") {
      for (index, page) in pages.enumerated() {
        Terminal.out("\(index + 1). \(page.name.padding(toLength: 13, withPad: " ", startingAt: 0)) \(page.title)")
      }
      return 0
    }
    if let folder = parsed.string("timeline") {
      do {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      } catch {
        Terminal.error("error: cannot create \(folder): \(error.localizedDescription)")
        return 1
      }
      timelineFolder.withLock { $0 = folder }
    }
    var selected = pages
    if let name = parsed.positionals.first {
      guard
        let page = pages.first(where: { $0.name == name })
          ?? Int(name).flatMap({ pages.indices.contains($0 - 1) ? pages[$0 - 1] : nil })
      else {
        throw UsageError(
          message: "no tour page '\(name)' (pages: \(pages.map(\.name).joined(separator: ", ")))", usage: spec.usage)
      }
      selected = [page]
    }
    for page in selected {
      Terminal.out("\n" + Terminal.styled("── \(page.title) (\(page.name)) ──", .bold))
      try page.run()
    }
    return 0
  }

  // MARK: - Helpers

  static func say(_ text: String) { Terminal.out(Terminal.styled(text, .dim)) }
  static func show(_ text: String) { Terminal.out("  " + text) }

  /// The playground's artificially slow filter: `sleep(1)` there, a tenth of a second here.
  static func slowFilter(_ pixels: [UInt8]) -> [UInt8] {
    usleep(100_000)
    return pixels.map { 255 - $0 }
  }

  /// A trace for a page's queue when `--timeline` was given.
  static func pageTrace() -> WorkTrace? {
    timelineFolder.withLock { $0 } == nil ? nil : WorkTrace()
  }

  /// Writes `trace`'s timeline as `name` into the `--timeline` folder and says where.
  static func drawTimeline(_ trace: WorkTrace?, name: String, title: String) throws {
    guard let trace, let folder = timelineFolder.withLock({ $0 }) else { return }
    let path = (folder as NSString).appendingPathComponent(name)
    try trace.writeTimeline(toFile: path, title: title)
    show("timeline: \(path)")
  }

  static func time(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).seconds
  }
}
