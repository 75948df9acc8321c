import Dispatch
import Spindle
import Synchronization

/// One file of a batch: where to read it, where its result goes, and in which format.
public struct BatchItem: Sendable, Hashable {
  /// The photo to read (JPEG or PNG, detected from its bytes).
  public var input: String
  /// Where the filtered photo is written (atomically).
  public var output: String
  /// The output's format; nil follows ``BatchConfiguration/outputFormat``, then the input's own format.
  public var format: ImageFormat?

  /// Creates an item.
  public init(input: String, output: String, format: ImageFormat? = nil) {
    self.input = input
    self.output = output
    self.format = format
  }
}

/// How a batch runs: the filter, the codecs, and how much runs at once.
public struct BatchConfiguration: Sendable {
  /// The filter applied to every photo.
  public var filter: TiltShiftFilter
  /// The decoder, with its pixel limit (decompression bombs are refused before allocating).
  public var decoder: ImageDecoder
  /// The output format for items that name none, or nil to keep each input's format.
  public var outputFormat: ImageFormat?
  /// JPEG quality, 1...100.
  public var jpegQuality: Int
  /// Files decoded, filtered or encoded at once (the width of the codec and filter queues).
  public var jobs: Int
  /// Bands each image's filter is split into (1 = the filter runs on one thread).
  public var bandsPerImage: Int
  /// At most this many decoded images are held in memory at once, whatever the batch size.
  public var maxImagesInMemory: Int
  /// Whether an existing output file may be replaced.
  public var replaceExisting: Bool
  /// Records every decode, filter and encode item of the batch (see `WorkTrace`); nil records nothing.
  public var trace: WorkTrace?

  /// Creates a configuration; the defaults use every core and keep `jobs + 1` images in memory.
  public init(
    filter: TiltShiftFilter = TiltShiftFilter(),
    decoder: ImageDecoder = ImageDecoder(),
    outputFormat: ImageFormat? = nil,
    jpegQuality: Int = 90,
    jobs: Int = WorkQueue.activeProcessorCount,
    bandsPerImage: Int = WorkQueue.activeProcessorCount,
    maxImagesInMemory: Int? = nil,
    replaceExisting: Bool = false,
    trace: WorkTrace? = nil
  ) {
    self.filter = filter
    self.decoder = decoder
    self.outputFormat = outputFormat
    self.jpegQuality = jpegQuality
    self.jobs = max(1, jobs)
    self.bandsPerImage = max(1, bandsPerImage)
    self.maxImagesInMemory = max(1, maxImagesInMemory ?? (max(1, jobs) + 1))
    self.replaceExisting = replaceExisting
    self.trace = trace
  }

  /// One file at a time, one thread per filter: the baseline the demo compares against.
  public static func serial(filter: TiltShiftFilter = TiltShiftFilter()) -> BatchConfiguration {
    BatchConfiguration(filter: filter, jobs: 1, bandsPerImage: 1, maxImagesInMemory: 1)
  }
}

/// Seconds spent in each stage of one file.
public struct StageTimings: Sendable, Hashable {
  /// Reading and decoding.
  public var decode: Double = 0
  /// The tilt-shift filter.
  public var filter: Double = 0
  /// Encoding and the atomic write.
  public var encode: Double = 0

  /// The sum of the stages.
  public var total: Double { decode + filter + encode }

  /// Creates timings.
  public init(decode: Double = 0, filter: Double = 0, encode: Double = 0) {
    self.decode = decode
    self.filter = filter
    self.encode = encode
  }

  static func + (lhs: StageTimings, rhs: StageTimings) -> StageTimings {
    StageTimings(decode: lhs.decode + rhs.decode, filter: lhs.filter + rhs.filter, encode: lhs.encode + rhs.encode)
  }
}

/// What happened to one file.
public struct FileReport: Sendable {
  /// How a file ended.
  public enum Outcome: Sendable {
    /// Written to the item's output.
    case succeeded(width: Int, height: Int, bytesRead: Int, bytesWritten: Int)
    /// Not written; the error names the file and the reason.
    case failed(ImageError)
    /// The batch was cancelled before this file was written; nothing was left behind.
    case cancelled
  }

  /// The file.
  public var item: BatchItem
  /// How it ended.
  public var outcome: Outcome
  /// Time spent per stage (zero for stages that did not run).
  public var timings: StageTimings

  /// Whether the output was written.
  public var succeeded: Bool {
    if case .succeeded = outcome { return true }
    return false
  }
}

/// Where a batch stands: counts, bytes and rate so far.
public struct BatchProgress: Sendable {
  /// Files in the batch.
  public var total: Int
  /// Files written.
  public var succeeded = 0
  /// Files that failed.
  public var failed = 0
  /// Files cancelled.
  public var cancelled = 0
  /// Bytes read from inputs that were written.
  public var bytesRead = 0
  /// Bytes written.
  public var bytesWritten = 0
  /// Pixels of the files written.
  public var pixels = 0
  /// Seconds since the batch started.
  public var elapsed: Double = 0
  /// The most files that were in flight (decoded and not yet written) at once; never above
  /// ``BatchConfiguration/maxImagesInMemory``.
  public var peakInFlight = 0

  /// Files that ended one way or another.
  public var completed: Int { succeeded + failed + cancelled }
  /// Megapixels written per second so far.
  public var megapixelsPerSecond: Double { elapsed > 0 ? Double(pixels) / 1e6 / elapsed : 0 }
  /// Estimated seconds until the batch ends, from the rate so far (nil before the first file).
  public var estimatedSecondsRemaining: Double? {
    guard completed > 0, elapsed > 0 else { return nil }
    return elapsed / Double(completed) * Double(total - completed)
  }
}

/// What a running batch reports through ``TiltShiftBatch/events()``.
public enum BatchEvent: Sendable {
  /// One file ended; the progress includes it.
  case fileFinished(FileReport, BatchProgress)
  /// Every file ended; always the last event.
  case finished(BatchSummary)
}

/// The end of a batch: every file's report (in input order) and the totals.
public struct BatchSummary: Sendable {
  /// One report per item, in the order the items were given.
  public var reports: [FileReport]
  /// Final counts and rate.
  public var progress: BatchProgress
  /// Stage times summed over every file.
  public var stageTotals: StageTimings
  /// Whether ``TiltShiftBatch/cancel()`` was called.
  public var wasCancelled: Bool
}

/// Runs the tilt-shift pipeline — decode → filter → encode and write — over many files on Spindle's `WorkQueue`.
///
/// Each file is three `Work` items with dependencies: decoding and encoding share a codec queue, filtering
/// has a queue of its own, both `jobs` wide. At most ``BatchConfiguration/maxImagesInMemory`` files are past
/// decoding and not yet written at any time: the next file's work is only added when one completes, so memory
/// stays bounded whatever the batch size. A file's failure (unreadable, corrupt, too large, not writable) is
/// recorded in its report and never stops the others. ``cancel()`` stops starting files, cancels pending
/// work and tells running work to stop; outputs are written to a temporary file and renamed, so a cancelled
/// batch leaves only complete outputs.
///
/// ```swift
/// let batch = TiltShiftBatch(items: [BatchItem(input: "a.jpg", output: "out/a.jpg")])
/// let summary = await batch.run { report, progress in
///   print("\(progress.completed)/\(progress.total) \(report.item.input)")
/// }
/// ```
public final class TiltShiftBatch: Sendable {
  /// The files, in order.
  public let items: [BatchItem]
  /// How the batch runs.
  public let configuration: BatchConfiguration

  private let codecQueue: WorkQueue
  private let filterQueue: WorkQueue
  /// Serialises the bookkeeping: starting files, recording reports, calling `onFileFinished`.
  private let bookkeeping = DispatchQueue(label: "tiltshift.batch")
  private let state: TSanVisibleMutex<State>

  private struct State {
    var next = 0
    var inFlight = 0
    var cancelled = false
    var started = false
    var finished = false
    var reports: [FileReport?]
    var progress: BatchProgress
    var totals = StageTimings()
    var waiters: [@Sendable () -> Void] = []
    var onFileFinished: @Sendable (FileReport, BatchProgress) -> Void = { _, _ in }
    var start = ContinuousClock.now
  }

  /// Creates a batch; nothing runs until ``run(onFileFinished:)``.
  public init(items: [BatchItem], configuration: BatchConfiguration = BatchConfiguration()) {
    self.items = items
    self.configuration = configuration
    codecQueue = WorkQueue(name: "tiltshift.codec", maxConcurrent: configuration.jobs, trace: configuration.trace)
    filterQueue = WorkQueue(name: "tiltshift.filter", maxConcurrent: configuration.jobs, trace: configuration.trace)
    state = TSanVisibleMutex(
      State(reports: Array(repeating: nil, count: items.count), progress: BatchProgress(total: items.count))
    )
  }

  /// Stops the batch: no new file starts, pending work is cancelled, running work is told to stop.
  ///
  /// Files already written stay; files not written are reported as cancelled. Safe to call from any thread,
  /// any number of times (a signal handler's queue, for example).
  public func cancel() {
    let wasCancelled = state.withLock { state in
      defer { state.cancelled = true }
      return state.cancelled
    }
    guard !wasCancelled else { return }
    codecQueue.cancelAll()
    filterQueue.cancelAll()
    // Files not yet started are reported as cancelled now, not when the running ones end.
    bookkeeping.async { [self] in startMore() }
  }

  /// Runs every file and returns when all have ended; `onFileFinished` is called once per file as it ends.
  ///
  /// `onFileFinished` runs on an internal serial queue, one call at a time, with the progress after that file.
  /// A batch runs once: a second call starts nothing, waits for the first run and returns the same summary
  /// (its `onFileFinished` is not called).
  public func run(
    onFileFinished: @escaping @Sendable (FileReport, BatchProgress) -> Void = { _, _ in }
  ) async -> BatchSummary {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      start(onFileFinished: onFileFinished) { continuation.resume() }
    }
    return summary()
  }

  /// Runs the batch and reports it as a stream: one ``BatchEvent/fileFinished(_:_:)`` per file, then
  /// ``BatchEvent/finished(_:)``.
  ///
  /// The batch starts when this is called. Ending the iteration early (breaking out of the loop, or cancelling
  /// the task that iterates) cancels the batch, with the guarantees of ``cancel()``.
  ///
  /// ```swift
  /// for await event in batch.events() {
  ///   if case .fileFinished(let report, let progress) = event { bar.draw(progress) }
  /// }
  /// ```
  public func events() -> AsyncStream<BatchEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: BatchEvent.self)
    continuation.onTermination = { [self] termination in
      if case .cancelled = termination { cancel() }
    }
    Task {
      let summary = await run { report, progress in continuation.yield(.fileFinished(report, progress)) }
      continuation.yield(.finished(summary))
      continuation.finish()
    }
    return stream
  }

  /// Runs every file and blocks the calling thread until all have ended; see ``run(onFileFinished:)``.
  ///
  /// For synchronous programs and benchmarks. Never call it from a body of the batch's own queues.
  @available(*, noasync, message: "use run(onFileFinished:) from async code")
  public func runAndWait(
    onFileFinished: @escaping @Sendable (FileReport, BatchProgress) -> Void = { _, _ in }
  ) -> BatchSummary {
    let done = DispatchSemaphore(value: 0)
    start(onFileFinished: onFileFinished) { done.signal() }
    done.wait()
    return summary()
  }

  /// Starts the batch (once) and calls `whenDone` when every file has ended.
  private func start(
    onFileFinished: @escaping @Sendable (FileReport, BatchProgress) -> Void,
    whenDone: @escaping @Sendable () -> Void
  ) {
    let start = ContinuousClock.now
    let (first, finished) = state.withLock { state in
      defer { state.started = true }
      if !state.finished { state.waiters.append(whenDone) }
      if !state.started {
        state.onFileFinished = onFileFinished
        state.start = start
      }
      return (!state.started, state.finished)
    }
    if finished {
      whenDone()
    } else if first {
      bookkeeping.async { [self] in startMore() }
    }
  }

  private func summary() -> BatchSummary {
    state.withLock { state in
      BatchSummary(
        reports: state.reports.enumerated().map { index, report in
          report ?? FileReport(item: items[index], outcome: .cancelled, timings: StageTimings())
        },
        progress: state.progress,
        stageTotals: state.totals,
        wasCancelled: state.cancelled
      )
    }
  }

  /// Adds pipelines while fewer than `maxImagesInMemory` are in flight; once cancelled, reports the rest as such;
  /// resumes the waiters when every file has ended. Runs on `bookkeeping` only.
  private func startMore() {
    dispatchPrecondition(condition: .onQueue(bookkeeping))
    let (onFileFinished, start) = state.withLock { ($0.onFileFinished, $0.start) }
    while true {
      enum Step {
        case start(Int)
        case cancelRest(Range<Int>, BatchProgress)
        case finish([@Sendable () -> Void])
        case wait
      }
      let step: Step = state.withLock { state in
        guard state.started, !state.finished else { return .wait }
        if state.cancelled, state.next < items.count {
          let rest = state.next..<items.count
          state.next = items.count
          for index in rest {
            state.reports[index] = FileReport(item: items[index], outcome: .cancelled, timings: StageTimings())
          }
          state.progress.cancelled += rest.count
          state.progress.elapsed = (ContinuousClock.now - start).secondsValue
          return .cancelRest(rest, state.progress)
        }
        if state.next < items.count, state.inFlight < configuration.maxImagesInMemory {
          state.inFlight += 1
          state.progress.peakInFlight = Swift.max(state.progress.peakInFlight, state.inFlight)
          state.next += 1
          return .start(state.next - 1)
        }
        guard state.inFlight == 0, state.next == items.count else { return .wait }
        state.finished = true
        defer { state.waiters = [] }
        return .finish(state.waiters)
      }
      switch step {
      case .start(let index):
        startPipeline(index) { [self] report in
          bookkeeping.async { [self] in
            let progress = state.withLock { state in
              state.inFlight -= 1
              state.reports[index] = report
              state.totals = state.totals + report.timings
              switch report.outcome {
              case .succeeded(let width, let height, let read, let written):
                state.progress.succeeded += 1
                state.progress.pixels += width * height
                state.progress.bytesRead += read
                state.progress.bytesWritten += written
              case .failed: state.progress.failed += 1
              case .cancelled: state.progress.cancelled += 1
              }
              state.progress.elapsed = (ContinuousClock.now - start).secondsValue
              return state.progress
            }
            onFileFinished(report, progress)
            startMore()
          }
        }
      case .cancelRest(let rest, let progress):
        for index in rest {
          onFileFinished(FileReport(item: items[index], outcome: .cancelled, timings: StageTimings()), progress)
        }
      case .finish(let waiters):
        for waiter in waiters { waiter() }
        return
      case .wait:
        return
      }
    }
  }

  private struct Decoded: Sendable {
    var image: Image
    var format: ImageFormat
    var bytesRead: Int
  }

  private struct Written: Sendable {
    var width: Int
    var height: Int
    var bytesRead: Int
    var bytesWritten: Int
  }

  /// Adds the three work items of file `index` and calls `completion` once with its report.
  ///
  /// The completion handler holds neither the decoded nor the filtered image, so each is released as soon as
  /// the next stage is done with it.
  private func startPipeline(_ index: Int, completion: @escaping @Sendable (FileReport) -> Void) {
    let item = items[index]
    let configuration = configuration
    let timings = TSanVisibleMutex(StageTimings())
    let name = item.input.split(separator: "/").last.map(String.init) ?? item.input
    let decode = codecQueue.add(name: "decode \(name)") { () throws -> Decoded in
      let clock = ContinuousClock()
      let start = clock.now
      defer { timings.withLock { $0.decode = (clock.now - start).secondsValue } }
      let bytes = try ImageFile.read(item.input)
      try WorkContext.current?.checkCancellation()
      let image: Image
      do throws(ImageError) {
        image = try configuration.decoder.decode(bytes)
      } catch {
        throw error.naming(item.input)
      }
      return Decoded(image: image, format: ImageFormat(detecting: bytes) ?? .jpeg, bytesRead: bytes.count)
    }
    let filter = filterQueue.add(name: "filter \(name)", priority: .high, after: decode) {
      (decoded: Decoded) throws -> Decoded in
      try WorkContext.current?.checkCancellation()
      let clock = ContinuousClock()
      let start = clock.now
      defer { timings.withLock { $0.filter = (clock.now - start).secondsValue } }
      var result = decoded
      result.image = configuration.filter.apply(to: decoded.image, bands: configuration.bandsPerImage)
      return result
    }
    let encode = codecQueue.add(name: "encode \(name)", priority: .high, after: filter) {
      (filtered: Decoded) throws -> Written in
      try WorkContext.current?.checkCancellation()
      let clock = ContinuousClock()
      let start = clock.now
      defer { timings.withLock { $0.encode = (clock.now - start).secondsValue } }
      let format = item.format ?? configuration.outputFormat ?? filtered.format
      let bytes = try ImageEncoder(format: format, jpegQuality: configuration.jpegQuality).encode(filtered.image)
      // Last point at which a cancelled batch leaves no output for this file.
      try WorkContext.current?.checkCancellation()
      try ImageFile.writeAtomically(bytes, to: item.output, replacingExisting: configuration.replaceExisting)
      return Written(
        width: filtered.image.width,
        height: filtered.image.height,
        bytesRead: filtered.bytesRead,
        bytesWritten: bytes.count
      )
    }
    // A cancel() that raced with adding this file must still reach it.
    if state.withLock({ $0.cancelled }) {
      decode.cancel()
      filter.cancel()
      encode.cancel()
    }
    encode.onCompletion(on: DispatchQueue.global()) { result in
      let timings = timings.withLock { $0 }
      let outcome: FileReport.Outcome
      switch result {
      case .success(let written):
        outcome = .succeeded(
          width: written.width,
          height: written.height,
          bytesRead: written.bytesRead,
          bytesWritten: written.bytesWritten
        )
      case .failure(let error as ImageError):
        outcome = .failed(error.path == nil ? error.naming(item.input) : error)
      case .failure(is CancellationError):
        outcome = .cancelled
      case .failure(let error):
        outcome = .failed(ImageError(.writeFailed(reason: "\(error)"), path: item.input))
      }
      completion(FileReport(item: item, outcome: outcome, timings: timings))
    }
  }
}

extension Duration {
  var secondsValue: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
