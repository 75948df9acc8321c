import Dispatch
import Spindle
import Synchronization

/// Runs the tilt-shift pipeline — decode → filter → encode and write — over many files on Spindle's `WorkQueue`.
///
/// Each file is three `Work` items with dependencies, all on one queue `jobs` wide, so the batch never runs more
/// decodes, filters and encodes at once than it has jobs (cores, by default); the filter and the encode go before
/// the next decode (a higher priority), so the files in flight finish first. At most ``BatchConfiguration/maxImagesInMemory`` files are past
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

  /// Runs every decode, filter and encode of the batch.
  ///
  /// One queue, not one per stage: with a codec queue and a filter queue each `jobs` wide, a two-core batch ran
  /// three or four bodies at once for much of the time, and each body took longer than its share (`spindle demo`,
  /// eight interleaved runs on a 2-core host: a median speed-up of 1.69× with two queues, 1.88× with one).
  let queue: WorkQueue
  /// Serialises the bookkeeping: starting files, recording reports, calling `onFileFinished`.
  let bookkeeping = DispatchQueue(label: "tiltshift.batch")
  let state: TSanVisibleMutex<State>
  /// What the batch gave its queues; work is added to them under this lock (see ``workProgress``).
  let itemCounts = TSanVisibleMutex(ItemCounts())
  /// How many bands each file's filter gets: counts the batch's running bodies (see
  /// ``BatchConfiguration/bandsPerImage``).
  let filterBands: FilterBands
  /// The pixel buffers of finished stages, for the next files' decodes and filters (closed when the batch ends).
  /// It holds at most two buffers per image in memory and a third of the memory budget. An 8-bit file holds one
  /// buffer, its pixels, which the filter overwrites; it holds two only when streaming would not save memory (a
  /// box over about 1,000 pixels, or a small image under a wide box) and the filter takes a scratch buffer. So
  /// with images of one size no more buffers exist at once than the files in flight needed. What the pool holds
  /// counts against the budget and is trimmed to fit before each file is admitted (see
  /// ``BatchConfiguration/memoryBudget``).
  let buffers: PixelBufferPool

  struct State {
    var next = 0
    var inFlight = 0
    /// The estimated bytes of the files in flight, and each one's share.
    var bytesInFlight = 0
    var costs: [Int: Int] = [:]
    /// The memory estimate of file `index` (the next to start), made before it starts.
    var headCost: (index: Int, bytes: Int, info: ImageInfo?)?
    var cancelled = false
    var started = false
    var finished = false
    var reports: [FileReport?]
    var progress: BatchProgress
    var totals = StageTimings()
    var waiters: [@Sendable () -> Void] = []
    var onFileFinished: @Sendable (FileReport, BatchProgress) -> Void = { _, _ in }
    var start = ContinuousClock.now
    /// The subscribers of ``workProgressUpdates``.
    var watchers: [Int: WorkProgressWatcher] = [:]
    var nextWatcher = 0
  }

  /// Creates a batch; nothing runs until ``run(onFileFinished:)``.
  public init(items: [BatchItem], configuration: BatchConfiguration = BatchConfiguration()) {
    self.items = items
    self.configuration = configuration
    queue = WorkQueue(name: "tiltshift", maxConcurrent: configuration.jobs, trace: configuration.trace)
    filterBands = FilterBands(most: configuration.bandsPerImage)
    buffers = PixelBufferPool(
      maxBuffers: 2 * configuration.maxImagesInMemory, maxBytes: (configuration.memoryBudget ?? Int.max) / 3)
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
    queue.cancelAll()
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
}
