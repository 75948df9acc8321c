import Dispatch
import Foundation
import Spindle
import SpindleBenchmarks
import TiltShift

/// `spindle tiltshift INPUT... -o DIR`: the real batch tool.
enum TiltShiftCommand {
  static let spec = CommandSpec(
    name: "spindle tiltshift",
    abstract: "Apply a tilt-shift (miniature) effect to JPEG and PNG photos in batch.",
    discussion: """
      Inputs may be files or folders (a folder contributes its .jpg/.jpeg/.png files). Outputs are
      written atomically (temporary file, then rename) into DIR as <name><suffix>.<ext>; inputs are
      never overwritten. Ctrl-C stops cleanly (exit 130) and leaves only complete outputs.

      Exit status: 0 all files done, 1 some files failed, 2 bad usage, 130 interrupted (143 on SIGTERM).

      Spread a large batch over machines with --shard K/N, e.g. a Kubernetes indexed Job or a Slurm array:
        spindle tiltshift /data/photos -o /data/out --shard $((SLURM_ARRAY_TASK_ID+1))/$SLURM_ARRAY_TASK_COUNT
      Every shard sorts the same input list and takes its own contiguous slice: the slices are
      disjoint and together cover every input.
      """,
    positionals: [("inputs", "Photos or folders of photos (JPEG, PNG).", true, false)],
    options: [
      OptionSpec(
        name: "output", short: "o", valueName: "dir", help: "Folder for the results (created if missing).",
        isRequired: true),
      OptionSpec(name: "jobs", short: "j", valueName: "n", help: "Files processed at once (default: cores)."),
      OptionSpec(
        name: "radius", valueName: "px",
        help: "Blur radius, as a Gaussian sigma (default \(Int(TiltShiftParameters.defaultRadius)))."),
      OptionSpec(name: "band", valueName: "a-b", help: "Sharp band as fractions of height (default 0.35-0.65)."),
      OptionSpec(name: "intensity", valueName: "x", help: "Blur at the band edge, 0...1 (default 0.5)."),
      OptionSpec(name: "quality", valueName: "q", help: "JPEG quality 1...100 (default 90)."),
      OptionSpec(name: "format", valueName: "jpeg|png|same", help: "Output format (default: same as input)."),
      OptionSpec(name: "suffix", valueName: "text", help: "Appended to output names (default -tiltshift)."),
      OptionSpec(name: "max-pixels", valueName: "n", help: "Refuse larger images (default 100000000)."),
      OptionSpec(name: "shard", valueName: "K/N", help: "Process only the K-th of N slices of the sorted inputs."),
      OptionSpec(name: "recursive", short: "r", help: "Descend into sub-folders (mirrored under -o)."),
      OptionSpec(name: "overwrite", help: "Replace existing outputs (never inputs)."),
      OptionSpec(name: "quiet", short: "q", help: "Print only errors and the summary."),
      OptionSpec(name: "json", help: "Print a machine-readable JSON summary on stdout."),
    ]
  )

  static func run(_ arguments: [String]) async throws -> Int32 {
    let parsed = try spec.parse(arguments)
    if parsed.flag("help") {
      Terminal.out(spec.help)
      return 0
    }
    let usage = spec.usage
    guard let outputFolder = parsed.string("output"), !outputFolder.isEmpty else {
      throw UsageError(message: "missing -o/--output <dir>", usage: usage)
    }
    let jobs = try parsed.int("jobs", default: WorkQueue.activeProcessorCount, range: 1...256)
    let radius = try parsed.double(
      "radius", default: TiltShiftParameters.defaultRadius, range: 0...TiltShiftParameters.maximumRadius)
    let intensity = try parsed.double("intensity", default: 0.5, range: 0...1)
    let quality = try parsed.int("quality", default: 90, range: 1...100)
    let format = try parsed.choice("format", default: "same", among: ["jpeg", "jpg", "png", "same"])
    let maxPixels = try parsed.int("max-pixels", default: 100_000_000, range: 1...Int(Int32.max) * 4)
    let suffix = parsed.string("suffix") ?? "-tiltshift"
    guard !suffix.contains("/") else { throw UsageError(message: "--suffix must not contain '/'", usage: usage) }
    var band: ClosedRange<Double> = 0.35...0.65
    if let text = parsed.string("band") {
      let parts = text.split(separator: "-", maxSplits: 1).map { Double($0) }
      guard parts.count == 2, let low = parts[0], let high = parts[1], 0 <= low, low <= high, high <= 1 else {
        throw UsageError(message: "--band expects two fractions 'a-b' with 0 ≤ a ≤ b ≤ 1, got '\(text)'", usage: usage)
      }
      band = low...high
    }
    var shard = (index: 1, count: 1)
    if let text = parsed.string("shard") {
      guard let value = BatchPlan.parseShard(text) else {
        throw UsageError(message: "--shard expects K/N with 1 ≤ K ≤ N, got '\(text)'", usage: usage)
      }
      shard = value
    }
    let parameters: TiltShiftParameters
    do {
      parameters = try TiltShiftParameters(radius: radius, clearBand: band, innerIntensity: intensity)
    } catch {
      throw UsageError(message: error.description, usage: usage)
    }
    let quiet = parsed.flag("quiet")
    let json = parsed.flag("json")

    // Plan every input, then take this shard's slice, so all shards agree on collisions. Nothing is written
    // before the plan is whole.
    let (inputs, missing) = BatchPlan.collectInputs(parsed.positionals, recursive: parsed.flag("recursive"))
    let plan = BatchPlan.make(
      inputs: inputs,
      outputFolder: outputFolder,
      suffix: suffix,
      format: format == "jpg" ? "jpeg" : format,
      overwrite: parsed.flag("overwrite")
    )
    let mine = plan.decisions[BatchPlan.shardRange(total: plan.decisions.count, index: shard.index, count: shard.count)]
    var items: [BatchItem] = []
    var rejected: [(path: String, reason: String)] = []
    for decision in missing + mine {
      switch decision {
      case .process(let item): items.append(item)
      case .reject(let path, let reason): rejected.append((path, reason))
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
    // Output folders (mirrored sub-folders too) exist before any work starts.
    for folder in Set([outputFolder] + items.map { ($0.output as NSString).deletingLastPathComponent }) {
      do {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      } catch {
        Terminal.error("error: cannot create output folder \(folder): \(error.localizedDescription)")
        return 1
      }
    }
    // Temporary files a killed earlier run left for these outputs go now (never those of other names: another
    // shard may be writing into the same folder).
    ImageFile.removeTemporaryFiles(forDestinations: items.map(\.output))

    let configuration = BatchConfiguration(
      filter: TiltShiftFilter(parameters: parameters),
      decoder: ImageDecoder(maxPixels: maxPixels),
      outputFormat: format == "same" ? nil : (format == "png" ? .png : .jpeg),
      jpegQuality: quality,
      jobs: jobs,
      bandsPerImage: WorkQueue.activeProcessorCount,
      replaceExisting: parsed.flag("overwrite")
    )
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    let progressBar = ProgressBar(enabled: Terminal.stderrIsTerminal && !quiet && !json, total: items.count)
    let monitor = InterruptMonitor(
      onInterrupt: { _ in
        progressBar.clear()
        Terminal.error("interrupted: finishing nothing new, cancelling running files (Ctrl-C again to exit at once)")
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
    let summary = await batch.run { report, progress in
      progressBar.clear()
      if !quiet && !json || !report.succeeded {
        Terminal.error(line(for: report))
      }
      progressBar.draw(progress)
    }
    progressBar.clear()
    // The monitor stays on until the process exits: a Ctrl-C that lands after the batch, while the summary is
    // printed, must still end with status 130, not kill the process with SIGINT.
    let seconds = (clock.now - start).seconds
    // Anything a cancelled write left behind (there should be none) goes too.
    _ = ImageFile.removeInFlightTemporaryFiles()

    let interrupted = monitor.interrupted || summary.wasCancelled
    let result = Summary(
      processed: summary.reports,
      rejected: rejected,
      interrupted: interrupted,
      seconds: seconds,
      megapixels: Double(summary.progress.pixels) / 1e6
    )
    if json {
      Terminal.out(result.json)
    } else {
      Terminal.error(result.text)
    }
    if interrupted { return monitor.exitStatus }
    return rejected.isEmpty && summary.progress.failed == 0 ? 0 : 1
  }

  static func line(for report: FileReport) -> String {
    switch report.outcome {
    case .succeeded(let width, let height, _, let written):
      return "ok    \(report.item.input) → \(report.item.output) (\(width)×\(height), \(Format.bytes(written)), "
        + "\(Format.seconds(report.timings.total)))"
    case .failed(let error):
      return Terminal.styled("error:", .red, forError: true) + " \(error)"
    case .cancelled:
      return "cancelled \(report.item.input)"
    }
  }

  /// The end-of-run summary, as text or JSON.
  struct Summary {
    var processed: [FileReport]
    var rejected: [(path: String, reason: String)]
    var interrupted: Bool
    var seconds: Double
    var megapixels: Double

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
        var entry: [String: Any] = ["input": report.item.input, "output": report.item.output]
        switch report.outcome {
        case .succeeded(let width, let height, let read, let written):
          entry["status"] = "ok"
          entry["width"] = width
          entry["height"] = height
          entry["bytesRead"] = read
          entry["bytesWritten"] = written
          entry["seconds"] = [
            "decode": report.timings.decode, "filter": report.timings.filter, "encode": report.timings.encode,
          ]
        case .failed(let error):
          entry["status"] = "failed"
          entry["error"] = error.description
        case .cancelled:
          entry["status"] = "cancelled"
        }
        files.append(entry)
      }
      for (path, reason) in rejected {
        files.append(["input": path, "status": "failed", "error": "\(path): \(reason)"])
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
