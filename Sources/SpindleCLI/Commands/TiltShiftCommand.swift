import Dispatch
import Foundation
import Spindle
import Synchronization
import TiltShift

/// `spindle tiltshift INPUT... -o DIR`: the real batch tool.
struct TiltShiftCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "tiltshift",
    abstract: "Apply a tilt-shift (miniature) effect to JPEG and PNG photos in batch.",
    discussion: """
      Inputs may be files or folders (a folder contributes its .jpg/.jpeg/.jpe/.jfif/.png files; with
      -r, its sub-folders' too, except DIR). Outputs are written atomically (temporary file, then
      rename) into DIR as <name><suffix>.<ext>, <ext> being jpg or png by the format written (a.jfif
      gives a<suffix>.jpg); inputs are never overwritten. File names that are not UTF-8 keep their
      bytes; messages show such a byte as \\xFF. Ctrl-C stops cleanly (exit 130) and leaves only
      complete outputs. Ctrl-\\ (SIGQUIT) prints what each work queue is running, what is ready and
      what waits for what, and the batch goes on.

      Exit status: 0 all files done, 1 some files failed, 2 bad usage, 130 interrupted (143 on SIGTERM).

      Spread a large batch over machines with --shard K/N, e.g. a Kubernetes indexed Job or a Slurm array:
        spindle tiltshift /data/photos -o /data/out --shard $((SLURM_ARRAY_TASK_ID+1))/$SLURM_ARRAY_TASK_COUNT
      Every shard sorts the same input list and takes its own contiguous slice: the slices are
      disjoint and together cover every input.
      """,
    positionals: [
      Positional(name: "inputs", help: "Photos or folders of photos (JPEG, PNG).", repeating: true, completion: .file)
    ]
  )

  /// `--shard K/N`: the K-th (1-based) of N slices.
  struct Shard: Sendable, Equatable {
    var index: Int
    var count: Int
  }

  /// Every option `spindle tiltshift` accepts, in the order `--help` lists them.
  ///
  /// A new option is one `let` here; `run()` reads it as `arguments[\.name]` (help, parsing, range checks,
  /// suggestions and completion come from the declaration).
  struct Options: OptionGroup {
    let output = Option<String?>.text(
      "output", short: "o", valueName: "dir", help: "Folder for the results (created if missing).", required: true,
      completion: .directory)
    let jobs = Option<Int>.integer(
      "jobs", short: "j", help: "Files processed at once.", default: WorkQueue.activeProcessorCount,
      defaultDescription: "cores", range: 1...256)
    let radius = Option<Double>.number(
      "radius", valueName: "px", help: "Blur radius, as a Gaussian sigma.", default: TiltShiftParameters.defaultRadius,
      range: 0...TiltShiftParameters.maximumRadius)
    let band = Option<ClosedRange<Double>>.custom(
      "band", valueName: "a-b", help: "Sharp band as fractions of height.", default: 0.35...0.65,
      defaultDescription: "0.35-0.65", expectation: "two fractions 'a-b' with 0 ≤ a ≤ b ≤ 1",
      parse: TiltShiftCommand.parseBand)
    let intensity = Option<Double>.number(
      "intensity", help: "Blur at the band edge, 0...1.", default: 0.5, range: 0...1)
    let quality = Option<Int>.integer("quality", valueName: "q", help: "JPEG quality.", default: 90, range: 1...100)
    let format = Option<String>.choice(
      "format", help: "Output format.", default: "same", defaultDescription: "same as input",
      choices: ["jpeg", "jpg", "png", "same"])
    let suffix = Option<String>.text("suffix", help: "Appended to output names.", default: "-tiltshift")
    let maxPixels = Option<Int>.integer(
      "max-pixels", help: "Refuse images with more pixels.", default: TiltShiftCommand.highestMaxPixels,
      defaultDescription: "whatever fits --memory", range: 1...TiltShiftCommand.highestMaxPixels)
    let memory = Option<Int>.custom(
      "memory", valueName: "size", help: "Memory budget for images in flight, e.g. 2G, 512M.",
      default: BatchConfiguration.defaultMemoryBudget, defaultDescription: "half of RAM, at most 4G",
      expectation: "a size of at least 16M like 512M or 4G",
      parse: { TiltShiftCommand.parseSize($0).flatMap { $0 >= 16 << 20 ? $0 : nil } })
    let strip = Option<Bool>.flag(
      "strip", help: "Write no metadata (profile, EXIF, XMP, IPTC, text); pixels are turned upright.")
    let lenient = Option<Bool>.flag(
      "lenient", help: "Accept truncated or damaged files with a warning naming the missing rows.")
    let background = Option<BackgroundColour>.custom(
      "background", valueName: "white|black|#rrggbb", help: "Colour transparent pixels are put on for JPEG output.",
      default: .white, defaultDescription: "white", expectation: "white, black or #rrggbb",
      parse: { BackgroundColour(parsing: $0) })
    let shard = Option<Shard>.custom(
      "shard", valueName: "K/N", help: "Process only the K-th of N slices of the sorted inputs.",
      default: Shard(index: 1, count: 1), defaultDescription: nil, expectation: "K/N with 1 ≤ K ≤ N",
      parse: { BatchPlan.parseShard($0).map { Shard(index: $0.index, count: $0.count) } })
    let recursive = Option<Bool>.flag("recursive", short: "r", help: "Descend into sub-folders (mirrored under -o).")
    let overwrite = Option<Bool>.flag("overwrite", help: "Replace existing outputs (never inputs).")
    let quiet = Option<Bool>.flag("quiet", short: "q", help: "Print only errors and the summary.")
    let json = Option<Bool>.flag("json", help: "Print a machine-readable JSON summary on stdout.")
    let trace = TraceOutputs.traceOption
    let timeline = TraceOutputs.timelineOption
    let graph = TraceOutputs.graphOption
  }

  /// Parses `a-b` for `--band`: two fractions with 0 ≤ a ≤ b ≤ 1.
  @Sendable static func parseBand(_ text: String) -> ClosedRange<Double>? {
    // Empty pieces kept: "-0.1-0.5" is a negative bound, not "0.1-0.5".
    let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map { Double($0) }
    guard parts.count == 2, let low = parts[0], let high = parts[1], 0 <= low, low <= high, high <= 1 else {
      return nil
    }
    return low...high
  }

  /// Everything that was parsed, for options read where they are used.
  let arguments: ParsedArguments<Options>
  var inputs: [String]
  var outputFolder: String
  var jobs: Int
  var format: String
  var quality: Int
  var maxPixels: Int
  var suffix: String
  var shard: Shard
  var recursive: Bool
  var overwrite: Bool
  var quiet: Bool
  var json: Bool
  var radius: Double
  var band: ClosedRange<Double>
  var intensity: Double

  init(_ arguments: ParsedArguments<Options>) {
    self.arguments = arguments
    inputs = arguments.positionals
    outputFolder = arguments[\.output] ?? ""
    jobs = arguments[\.jobs]
    radius = arguments[\.radius]
    band = arguments[\.band]
    intensity = arguments[\.intensity]
    quality = arguments[\.quality]
    format = arguments[\.format] == "jpg" ? "jpeg" : arguments[\.format]
    suffix = arguments[\.suffix]
    maxPixels = arguments[\.maxPixels]
    shard = arguments[\.shard]
    recursive = arguments[\.recursive]
    overwrite = arguments[\.overwrite]
    quiet = arguments[\.quiet]
    json = arguments[\.json]
  }

  /// The filter's parameters, checked together.
  var parameters: TiltShiftParameters {
    get throws(ImageError) { try TiltShiftParameters(radius: radius, clearBand: band, innerIntensity: intensity) }
  }

  func validate() throws {
    guard !suffix.contains("/") else { throw ValidationError("--suffix must not contain '/'") }
    do {
      _ = try parameters
    } catch {
      throw ValidationError(error.description)
    }
  }

  func run() async throws -> Int32 {
    let parameters = try self.parameters
    let lenient = arguments[\.lenient]
    // Ctrl-\ (SIGQUIT) from here until the command returns: a note while the inputs are planned, then the batch's
    // stuck-queue report, and the command goes on. It stays on after the batch, so a Ctrl-\ that lands while the
    // summary is printed reports the finished batch instead of ending the process with a crash report.
    let running = TSanVisibleMutex<(batch: TiltShiftBatch, bar: ProgressBar)?>(nil)
    let stuckReports = StuckReportMonitor {
      guard let (batch, bar) = running.withLock({ $0 }) else {
        return "spindle: SIGQUIT, planning the inputs; going on\n"
      }
      bar.clear()
      return "spindle: SIGQUIT, the batch goes on\n" + String(reflecting: batch)
    }
    defer { stuckReports.stop() }
    // Plan every input, then take this shard's slice, so all shards agree on collisions. Nothing is written
    // before the plan is whole.
    let (inputs, missing) = BatchPlan.collectInputs(inputs, recursive: recursive, outputFolder: outputFolder)
    let plan = BatchPlan.make(
      inputs: inputs,
      outputFolder: outputFolder,
      suffix: suffix,
      format: format,
      overwrite: overwrite
    )
    let mine = plan.decisions[BatchPlan.shardRange(total: plan.decisions.count, index: shard.index, count: shard.count)]
    var items: [BatchItem] = []
    var rejected: [(path: String, reason: String)] = []
    for decision in missing + mine {
      switch decision {
      case .process(let item): items.append(item)
      case .reject(let path, let reason, _): rejected.append((path, reason))
      }
    }
    for (path, reason) in rejected {
      Terminal.error(Terminal.styled("error:", .red, forError: true) + " \(path): \(reason)")
    }
    if items.isEmpty && rejected.isEmpty {
      if !quiet {
        Terminal.error(
          shard.count > 1
            ? "shard \(shard.index)/\(shard.count) has no files (\(inputs.count) inputs in all)"
            : "no JPEG or PNG files found in the inputs"
        )
      }
      if json { Terminal.out(Summary(processed: [], rejected: [], interrupted: false, seconds: 0, megapixels: 0).json) }
      return 0
    }
    // Output folders (mirrored sub-folders too) exist before any work starts. Told apart by their bytes: `café`
    // composed and decomposed are two folders on Linux, but equal `String`s (a set of them made only one).
    var madeFolders: Set<[UInt8]> = []
    for folder in [outputFolder] + items.map({ BatchPlan.parentPath(of: $0.output) })
    where madeFolders.insert(SystemPath.bytes(of: folder)).inserted {
      if let failure = BatchPlan.makeFolder(folder) {
        Terminal.error("error: cannot create output folder \(folder): \(failure)")
        return 1
      }
    }
    // Temporary files a killed earlier run left for these outputs go now (never those of other names: another
    // shard may be writing into the same folder). Of an output refused because it exists, only a temporary that is
    // that same file goes: a run killed between linking its finished output into place and removing the temporary
    // name leaves both; a temporary that is another file may be a live `--overwrite` run's.
    ImageFile.removeTemporaryFiles(forDestinations: items.map(\.output))
    ImageFile.removeTemporaryFiles(
      sameFileAs: mine.compactMap { decision -> String? in
        if case .reject(_, _, let output?) = decision { return output }
        return nil
      })

    let traceOutputs = TraceOutputs(
      trace: arguments[\.trace], timeline: arguments[\.timeline], graph: arguments[\.graph])
    let recording = traceOutputs.isRequested ? WorkTrace() : nil
    let configuration = BatchConfiguration(
      filter: TiltShiftFilter(parameters: parameters),
      decoder: ImageDecoder(maxPixels: maxPixels, isLenient: lenient),
      outputFormat: format == "same" ? nil : (format == "png" ? .png : .jpeg),
      jpegQuality: quality,
      jobs: jobs,
      bandsPerImage: WorkQueue.activeProcessorCount,
      replaceExisting: overwrite,
      stripsMetadata: arguments[\.strip],
      background: arguments[\.background],
      memoryBudget: arguments[\.memory],
      trace: recording
    )
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    let progressBar = ProgressBar(enabled: Terminal.stderrIsTerminal && !quiet && !json, files: items.count)
    let monitor = InterruptMonitor(
      onInterrupt: { _ in
        progressBar.clear()
        if !quiet {
          Terminal.error("interrupted: finishing nothing new, cancelling running files (Ctrl-C again to exit at once)")
        }
        batch.cancel()
      },
      onSecondInterrupt: {
        Terminal.error("\ninterrupted twice: exiting now; complete outputs were kept, partial ones removed")
        // Leave no partial output: every temporary file being written goes, and no new one can start.
        ImageFile.removeInFlightTemporaryFiles(refusingNewOnes: true)
      }
    )
    let clock = ContinuousClock()
    let start = clock.now
    // The bar follows the batch's work items through its queues' progress.
    let drawing =
      progressBar.enabled
      ? Task { for await work in batch.workProgressUpdates { progressBar.draw(work) } } : nil
    running.withLock { $0 = (batch, progressBar) }
    let summary = await batch.run { report, progress in
      progressBar.clear()
      if Self.prints(report, quiet: quiet || json) {
        Terminal.error(Self.line(for: report, lenient: lenient))
      }
      for warning in report.warnings {
        Terminal.error(Terminal.styled("warning:", .yellow, forError: true) + " \(warning)")
      }
      progressBar.draw(progress)
    }
    drawing?.cancel()
    progressBar.stop()
    // The monitor stays on until the process exits: a Ctrl-C that lands after the batch, while the summary is
    // printed, must still end with status 130, not kill the process with SIGINT.
    let seconds = (clock.now - start).secondsValue
    // Anything a cancelled write left behind (there should be none) goes too.
    _ = ImageFile.removeInFlightTemporaryFiles()

    let interrupted = monitor.interrupted || summary.wasCancelled
    let result = Summary(
      processed: summary.reports,
      rejected: rejected,
      interrupted: interrupted,
      seconds: seconds,
      megapixels: Double(summary.progress.pixels) / 1e6,
      lenient: lenient
    )
    if json {
      Terminal.out(result.json)
    } else {
      Terminal.error(result.text)
    }
    var tracesWritten = true
    if let recording {
      let title = "spindle tiltshift: \(items.count) file\(items.count == 1 ? "" : "s"), \(jobs) at a time"
      tracesWritten = traceOutputs.write(recording, title: title, quiet: quiet)
    }
    if interrupted { return monitor.exitStatus }
    return rejected.isEmpty && summary.progress.failed == 0 && tracesWritten ? 0 : 1
  }

  /// Whether a file's report gets a line of its own on standard error: always for an error; with `--quiet`
  /// (or `--json`) never for a success nor for a file cancelled by Ctrl-C, which the summary counts.
  static func prints(_ report: FileReport, quiet: Bool) -> Bool {
    guard quiet else { return true }
    if case .failed = report.outcome { return true }
    return false
  }

  static func line(for report: FileReport, lenient: Bool = false) -> String {
    switch report.outcome {
    case .succeeded(let width, let height, _, let written):
      return "ok    \(report.item.input) → \(report.item.output) (\(width)×\(height), \(Format.bytes(written)), "
        + "\(Format.seconds(report.timings.total)))"
    case .failed(let error):
      return Terminal.styled("error:", .red, forError: true) + " \(error)\(hint(for: error, lenient: lenient))"
    case .cancelled:
      return "cancelled \(report.item.input)"
    }
  }

  /// The highest `--max-pixels` (and its default): 8,589,934,588 pixels.
  static let highestMaxPixels = Int(Int32.max) * 4

  /// The flag that changes the outcome of `error`, for the error line; none when that flag (`--lenient`) was given,
  /// nor when no value of it would (an image over the highest `--max-pixels`: the hint says what that is).
  static func hint(for error: ImageError, lenient: Bool = false) -> String {
    switch error.kind {
    case .tooManyPixels(let width, let height, let limit):
      let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
      if overflow || pixels > highestMaxPixels {
        return limit >= highestMaxPixels
          ? " (the highest --max-pixels allows: this image is too large to process)"
          : " (more than the highest --max-pixels allows, \(highestMaxPixels): this image is too large to process)"
      }
      return " (raise the limit with --max-pixels)"
    case .exceedsMemoryBudget: return " (raise the budget with --memory)"
    case .tooLargeForFormat: return " (write PNG with --format png)"
    case .truncated, .corruptData, .damagedData: return lenient ? "" : " (--lenient decodes what is there)"
    case .metadataTooLarge: return " (write PNG with --format png, or drop metadata with --strip)"
    default: return ""
    }
  }

  /// Parses a byte size: a number with an optional K, M, G or T suffix (powers of 1024; `B`, `iB` allowed).
  static func parseSize(_ text: String) -> Int? {
    var digits = text.uppercased()
    for suffix in ["IB", "B"] where digits.hasSuffix(suffix) { digits.removeLast(suffix.count) }
    var shift = 0
    if let last = digits.last, let index = "KMGT".firstIndex(of: last) {
      shift = 10 * ("KMGT".distance(from: "KMGT".startIndex, to: index) + 1)
      digits.removeLast()
    }
    guard let value = Double(digits), value > 0, value * Double(1 << shift) < Double(Int.max / 2) else { return nil }
    return Int(value * Double(1 << shift))
  }

  /// The end-of-run summary, as text or JSON (a byte of a path that is not UTF-8 shows as `\xFF` in both).
  struct Summary {
    var processed: [FileReport]
    var rejected: [(path: String, reason: String)]
    var interrupted: Bool
    var seconds: Double
    var megapixels: Double
    /// Whether `--lenient` was given (the errors then suggest it no more).
    var lenient = false

    var succeeded: Int { processed.filter(\.succeeded).count }
    var failed: Int {
      processed.filter {
        if case .failed = $0.outcome { return true }
        return false
      }.count + rejected.count
    }
    var cancelled: Int {
      processed.filter {
        if case .cancelled = $0.outcome { return true }
        return false
      }.count
    }

    var text: String {
      var parts = ["\(succeeded) written"]
      if failed > 0 { parts.append("\(failed) failed") }
      if cancelled > 0 { parts.append("\(cancelled) cancelled") }
      let rate = seconds > 0 ? String(format: ", %.1f MP/s", megapixels / seconds) : ""
      return (interrupted ? "interrupted: " : "done: ") + parts.joined(separator: ", ")
        + " in \(Format.seconds(seconds))\(rate)"
    }

    var json: String {
      var files: [[String: Any]] = []
      for report in processed {
        var entry: [String: Any] = [
          "input": SystemPath.displayed(report.item.input), "output": SystemPath.displayed(report.item.output),
        ]
        switch report.outcome {
        case .succeeded(let width, let height, let read, let written):
          entry["status"] = "ok"
          entry["width"] = width
          entry["height"] = height
          entry["bytesRead"] = read
          entry["bytesWritten"] = written
          if !report.warnings.isEmpty { entry["warnings"] = report.warnings.map(SystemPath.displayed) }
          entry["seconds"] = [
            "decode": report.timings.decode, "filter": report.timings.filter, "encode": report.timings.encode,
          ]
        case .failed(let error):
          entry["status"] = "failed"
          entry["error"] = SystemPath.displayed(error.description + TiltShiftCommand.hint(for: error, lenient: lenient))
        case .cancelled:
          entry["status"] = "cancelled"
        }
        files.append(entry)
      }
      for (path, reason) in rejected {
        let error = SystemPath.displayed("\(path): \(reason)")
        files.append(["input": SystemPath.displayed(path), "status": "failed", "error": error])
      }
      let object: [String: Any] = [
        "succeeded": succeeded,
        "failed": failed,
        "cancelled": cancelled,
        "interrupted": interrupted,
        "seconds": seconds,
        "megapixels": megapixels,
        "files": files,
      ]
      let data =
        (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])) ?? Data()
      return String(decoding: data, as: UTF8.self)
    }
  }
}
