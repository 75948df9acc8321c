import Dispatch
import Foundation
import Spindle
import Synchronization

/// `spindle tour [PAGE]`: the playground's pages as short narrated scenarios that run on Linux.
struct TourCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "tour",
    abstract: "Walk through the concurrency playground's pages as runnable scenarios.",
    discussion: "Without PAGE every page runs in order. Pages: \(pages.map(\.name).joined(separator: ", ")).",
    positionals: [
      Positional(
        name: "page", help: "One page to run, by name or number (see --list).", optional: true,
        completion: .choices(pages.map(\.name)))
    ]
  )

  struct Options: OptionGroup {
    let list = Option<Bool>.flag("list", help: "List the pages and exit.")
    let timeline = Option<String?>.text(
      "timeline", valueName: "dir",
      help: "Write SVG timelines of the pages comparing serial and concurrent work (queue, pipeline, gcd, barrier).",
      completion: .directory)
  }

  var list: Bool
  var page: String?
  var timeline: String?

  /// Where pages write their timelines (`--timeline`), if anywhere.
  static let timelineFolder = TSanVisibleMutex<String?>(nil)

  init(_ arguments: ParsedArguments<Options>) {
    list = arguments[\.list]
    page = arguments.positionals.first
    timeline = arguments[\.timeline]
  }

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

  /// The pages to run: the one named (by name or 1-based number), or all of them.
  var selected: [Page]? {
    guard let page else { return Self.pages }
    if let found = Self.pages.first(where: { $0.name == page }) { return [found] }
    if let number = Int(page), Self.pages.indices.contains(number - 1) { return [Self.pages[number - 1]] }
    return nil
  }

  func validate() throws {
    guard let page, selected == nil else { return }
    let names = Self.pages.map(\.name)
    var message = "no tour page '\(page)' (pages: \(names.joined(separator: ", ")))"
    if let near = Suggestion.nearest(to: page, among: names) { message += "; did you mean '\(near)'?" }
    throw ValidationError(message)
  }

  func run() async throws -> Int32 {
    // The tour's pages block while they wait, as the playground did: give them a thread of their own,
    // not one of Swift's few cooperative threads.
    try await withCheckedThrowingContinuation { continuation in
      Thread.detachNewThread { continuation.resume(with: Result { try self.runBlocking() }) }
    }
  }

  private func runBlocking() throws -> Int32 {
    if list {
      for (index, page) in Self.pages.enumerated() {
        Terminal.out("\(index + 1). \(page.name.padding(toLength: 13, withPad: " ", startingAt: 0)) \(page.title)")
      }
      return 0
    }
    if let folder = timeline {
      do {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      } catch {
        Terminal.error("error: cannot create \(folder): \(error.localizedDescription)")
        return 1
      }
      Self.timelineFolder.withLock { $0 = folder }
    }
    for page in selected ?? [] {
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

  /// Runs `body`, recorded into `trace` (when `--timeline` gave one) as an item `name` on `queue`: for work that runs
  /// on Dispatch rather than on a WorkQueue.
  static func recorded<Result>(
    _ trace: WorkTrace?,
    _ name: String,
    queue: String,
    enqueued: ContinuousClock.Instant? = nil,
    _ body: () -> Result
  ) -> Result {
    guard let trace else { return body() }
    return trace.record(name: name, queue: queue, enqueued: enqueued, body)
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
    return (ContinuousClock.now - start).secondsValue
  }
}
