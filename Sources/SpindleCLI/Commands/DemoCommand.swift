import Dispatch
import Foundation
import Spindle
import Synchronization
import TiltShift

/// `spindle demo`: the main job. Makes sample photos, runs the tilt-shift pipeline serially and
/// concurrently on Spindle's WorkQueue, and reports what happened.
struct DemoCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "demo",
    abstract: "Make sample photos and run the tilt-shift pipeline on them, serially then concurrently.",
    discussion: """
      Needs no files: the photos are drawn procedurally. Each photo is decoded, filtered and encoded as three
      dependent Work items on Spindle's WorkQueue. The serial run uses one file and one thread at a time; the
      concurrent run uses every core, both across files and inside each filter. The two runs alternate --rounds
      times (3 by default), and the demo shows the round whose speed-up is the median, with the range of all of
      them, so one run disturbed by another process does not decide the number. Every round's outputs are compared.

      Both runs are recorded: the output folder gets timeline-serial.svg, timeline-concurrent.svg and an
      index.html that shows the photos and both timelines side by side. --trace, --timeline and --graph
      write the concurrent run's trace, timeline and dependency graph to files of your choice as well.
      Ctrl-\\ (SIGQUIT) during a run prints what each work queue is running and what waits, and the run goes on.
      """
  )

  /// A photo size, `WxH`.
  struct Size: Sendable, Equatable {
    var width: Int
    var height: Int

    init(width: Int, height: Int) {
      self.width = width
      self.height = height
    }

    /// Parses `WxH` with both sides from 16 to 20000.
    init?(_ text: String) {
      let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
      guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), (16...20000).contains(width),
        (16...20000).contains(height)
      else { return nil }
      self.width = width
      self.height = height
    }
  }

  struct Options: OptionGroup {
    let output = Option<String>.text(
      "output", short: "o", valueName: "dir", help: "Where to write.", default: "spindle-demo-output",
      completion: .directory)
    let count = Option<Int>.integer("count", help: "How many sample photos.", default: 6, range: 1...200)
    let size = Option<Size>.custom(
      "size", valueName: "WxH", help: "Photo size in pixels.", default: Size(width: 2400, height: 1600),
      defaultDescription: "2400x1600", expectation: "WxH with sides from 16 to 20000", parse: Size.init)
    let jobs = Option<Int>.integer(
      "jobs", short: "j", help: "Width of the concurrent run.", default: WorkQueue.activeProcessorCount,
      defaultDescription: "cores", range: 1...256)
    let rounds = Option<Int>.integer(
      "rounds", help: "How many times to run the serial and the concurrent batch, alternately.", default: 3,
      range: 1...50)
    let trace = TraceOutputs.traceOption
    let timeline = TraceOutputs.timelineOption
    let graph = TraceOutputs.graphOption
  }

  var output: String
  var count: Int
  var size: Size
  var jobs: Int
  var rounds: Int

  init(_ arguments: ParsedArguments<Options>) {
    output = arguments[\.output]
    count = arguments[\.count]
    size = arguments[\.size]
    jobs = arguments[\.jobs]
    rounds = arguments[\.rounds]
    traceOutputs = TraceOutputs(trace: arguments[\.trace], timeline: arguments[\.timeline], graph: arguments[\.graph])
  }

  var traceOutputs: TraceOutputs

  func run() async throws -> Int32 {
    let (count, jobs, width, height, root) = (count, jobs, size.width, size.height, output)
    let folders = ["inputs", "serial", "concurrent"].map { (root as NSString).appendingPathComponent($0) }
    for folder in folders {
      do {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      } catch {
        Terminal.error("error: cannot create \(folder): \(error.localizedDescription)")
        return 1
      }
    }
    // Ctrl-\ (SIGQUIT) from here to the end prints what runs now and the demo goes on: the sample queue's report
    // while photos are drawn, the running batch's report during a batch, a note between and after them. One monitor
    // for the whole run, so no signal lands in a gap (where the default disposition would end the process).
    let phase = TSanVisibleMutex<DemoPhase>(.starting)
    let stuckReports = StuckReportMonitor { phase.withLock { $0.report } }
    defer { stuckReports.stop() }
    let cores = WorkQueue.activeProcessorCount
    Terminal.out(
      Terminal.styled("Spindle demo", .bold)
        + " — tilt-shift on \(count) sample photos of \(width)×\(height) (\(cores) cores)")

    // 1. Sample photos, drawn concurrently as Work items.
    let clock = ContinuousClock()
    var start = clock.now
    let makeQueue = WorkQueue(name: "demo.samples", maxConcurrent: jobs)
    phase.withLock { $0 = .drawing(makeQueue) }
    let names = (1...count).map { String(format: "sample-%02d.jpg", $0) }
    let made = names.enumerated().map { index, name in
      makeQueue.add(name: "draw \(name)") { () throws -> Int in
        let photo = SamplePhoto(seed: UInt64(index)).render(width: width, height: height)
        let bytes = try ImageEncoder(format: .jpeg, jpegQuality: 92).encode(photo)
        try ImageFile.writeAtomically(bytes, to: (folders[0] as NSString).appendingPathComponent(name))
        return bytes.count
      }
    }
    var inputBytes = 0
    for work in made { inputBytes += try await work.value }
    Terminal.out(
      "  made \(count) photos (\(Format.bytes(inputBytes)) of JPEG) in \(Format.seconds((clock.now - start).secondsValue)) → \(folders[0])/"
    )

    // 2. The same batch, serially and concurrently, round after round.
    phase.withLock { $0 = .betweenBatches }
    func batch(
      into folder: String,
      configuration: BatchConfiguration
    ) async -> (BatchSummary, Double, WorkTrace) {
      let items = names.map { name in
        BatchItem(
          input: (folders[0] as NSString).appendingPathComponent(name),
          output: (folder as NSString).appendingPathComponent(
            name.replacingOccurrences(of: ".jpg", with: "-tiltshift.jpg"))
        )
      }
      var configuration = configuration
      configuration.replaceExisting = true
      let trace = WorkTrace()
      configuration.trace = trace
      let run = TiltShiftBatch(items: items, configuration: configuration)
      start = clock.now
      phase.withLock { $0 = .batch(run) }
      let summary = await run.run()
      phase.withLock { $0 = .betweenBatches }
      return (summary, (clock.now - start).secondsValue, trace)
    }
    // Alternating rounds: a neighbour's burst of work slows one run, not one mode. Each round's outputs are compared
    // before the next round overwrites them: concurrency changes the speed, never the result.
    var rounds: [DemoRound] = []
    var identical = true
    for _ in 0..<self.rounds {
      let serial = await batch(into: folders[1], configuration: .serial())
      let concurrent = await batch(
        into: folders[2], configuration: BatchConfiguration(jobs: jobs, bandsPerImage: cores))
      let round = DemoRound(
        serial: serial.0, serialSeconds: serial.1, serialTrace: serial.2,
        concurrent: concurrent.0, concurrentSeconds: concurrent.1, concurrentTrace: concurrent.2)
      rounds.append(round)
      guard round.failures.isEmpty else { break }
      phase.withLock { $0 = .comparing }
      identical = round.outputsAreIdentical() && identical
      phase.withLock { $0 = .betweenBatches }
    }
    // The round whose ratio is the median (the lower of the middle two for an even count): its two times, its
    // speed-up and its timelines are the ones shown, so the numbers agree with each other and with the pictures.
    let shown = Self.medianRound(rounds)
    let roundNote = rounds.count > 1 ? ", the median round of \(rounds.count)" : ""
    Self.report("serial", "1 file at a time, 1 thread per filter" + roundNote, shown.serial, shown.serialSeconds)
    Self.report(
      "concurrent", "\(jobs) files at a time, \(cores) bands per filter" + roundNote, shown.concurrent,
      shown.concurrentSeconds)

    let failures = rounds.last!.failures
    for failure in failures {
      Terminal.error("error: \(failure.item.input): \(failure.outcome)")
    }
    guard failures.isEmpty else { return 1 }

    phase.withLock { $0 = .finishing }
    let ratios = rounds.map(\.speedUp).sorted()
    let spread =
      ratios.count > 1
      ? String(format: " (median of %d rounds, %.2f–%.2f×)", ratios.count, ratios.first!, ratios.last!) : ""
    Terminal.out("")
    Terminal.out(
      "  speed-up: " + Terminal.styled(String(format: "%.2f×", shown.speedUp), .green)
        + " on \(cores) cores\(spread); outputs "
        + (identical ? "byte-identical" : Terminal.styled("DIFFER", .red))
        + (identical || rounds.count == 1 ? "" : " in at least one round")
    )
    Terminal.out("  look at: \(folders[1])/ and \(folders[2])/ (inputs in \(folders[0])/)")

    // 3. Pictures of the shown round's two runs, and a page that shows everything side by side.
    let page = DemoPage(
      root: root, names: names, cores: cores, jobs: jobs,
      serial: (shown.serialTrace, shown.serialSeconds), concurrent: (shown.concurrentTrace, shown.concurrentSeconds),
      rounds: (count: rounds.count, low: ratios.first!, high: ratios.last!), identical: identical)
    guard page.write() else { return 1 }
    if traceOutputs.isRequested {
      let title = "spindle demo, concurrent run: \(count) photos, \(jobs) at a time"
      guard traceOutputs.write(shown.concurrentTrace, title: title) else { return 1 }
    }
    return identical ? 0 : 1
  }

  /// What the demo does now, for a Ctrl-\ report.
  enum DemoPhase {
    case starting
    case drawing(WorkQueue)
    case batch(TiltShiftBatch)
    case betweenBatches
    case comparing
    case finishing

    var report: String {
      switch self {
      case .starting: "spindle: SIGQUIT, starting; going on\n"
      case .drawing(let queue):
        "spindle: SIGQUIT, drawing the sample photos; going on\n" + queue.debugDescription + "\n"
      case .batch(let batch): "spindle: SIGQUIT, the batch goes on\n" + String(reflecting: batch)
      case .betweenBatches: "spindle: SIGQUIT, between two batches; going on\n"
      case .comparing: "spindle: SIGQUIT, comparing a round's outputs; going on\n"
      case .finishing: "spindle: SIGQUIT, every round done; drawing timelines\n"
      }
    }
  }

  /// One serial and one concurrent batch of the demo, run one after the other.
  struct DemoRound {
    var serial: BatchSummary
    var serialSeconds: Double
    var serialTrace: WorkTrace
    var concurrent: BatchSummary
    var concurrentSeconds: Double
    var concurrentTrace: WorkTrace

    /// Serial time ÷ concurrent time.
    var speedUp: Double { serialSeconds / max(concurrentSeconds, 1e-9) }

    /// The files either batch failed.
    var failures: [FileReport] { (serial.reports + concurrent.reports).filter { !$0.succeeded } }

    /// Whether every concurrent output has the serial output's bytes (read now, before a later round rewrites them).
    func outputsAreIdentical() -> Bool {
      zip(serial.reports, concurrent.reports).allSatisfy { a, b in
        let left = FileManager.default.contents(atPath: a.item.output)
        return left != nil && left == FileManager.default.contents(atPath: b.item.output)
      }
    }
  }

  /// The round whose speed-up is the median: the middle one of an odd count, the lower of the middle two of an even
  /// count (a speed-up that one of the rounds really had, never an average of two).
  static func medianRound<Round>(_ rounds: [Round], speedUp: (Round) -> Double) -> Round {
    rounds.sorted { speedUp($0) < speedUp($1) }[(rounds.count - 1) / 2]
  }

  static func medianRound(_ rounds: [DemoRound]) -> DemoRound { medianRound(rounds, speedUp: \.speedUp) }

  static func report(_ title: String, _ detail: String, _ summary: BatchSummary, _ seconds: Double) {
    let stages = summary.stageTotals
    let megapixels = Double(summary.progress.pixels) / 1e6
    Terminal.out(
      "  \(Terminal.styled(title.padding(toLength: 10, withPad: " ", startingAt: 0), .cyan)) "
        + "\(Format.seconds(seconds)) wall, \(String(format: "%.1f", megapixels / seconds)) MP/s  (\(detail))"
    )
    Terminal.out(
      "             stage time: decode \(Format.seconds(stages.decode)), filter \(Format.seconds(stages.filter)), "
        + "encode+write \(Format.seconds(stages.encode))"
    )
  }
}
