import Spindle

/// A subscriber of ``TiltShiftBatch/workProgressUpdates``: its stream and the last value it was given.
final class WorkProgressWatcher: Sendable {
  let continuation: AsyncStream<WorkProgress>.Continuation
  /// The last value yielded; taken for the whole of a publication, so values leave in the order they were read.
  let last = Locked<WorkProgress?>(nil)

  init(_ continuation: AsyncStream<WorkProgress>.Continuation) {
    self.continuation = continuation
  }
}

/// The batch's own count of what it gave its queue, read together with the queue's progress.
struct ItemCounts {
  /// Work items added to the batch's queue so far.
  var added = 0
  /// Files that never started (refused by the memory budget, or cancelled first): their items count as done.
  var skippedFiles = 0
}

extension TiltShiftBatch {
  /// Work items per file: decode, filter, encode (and write).
  public static let itemsPerFile = 3

  /// How much of the batch's work is done, in work items, read from its queue's `WorkQueue.progress`.
  ///
  /// The total is known before the batch starts: ``itemsPerFile`` (decode, filter, encode) per file. Completed
  /// counts the items the batch's queue has completed — finished, failed or cancelled — plus the
  /// three items of each file that never started (one refused by the memory budget, or cancelled before its
  /// turn), so it reaches the total exactly when all the batch's work is over. It never decreases, even though
  /// the queue's own progress starts again whenever it falls idle between files.
  ///
  /// ```swift
  /// let p = batch.workProgress
  /// print("\(p.completed) of \(p.total) items (\(Int(p.fractionCompleted * 100)) %)")
  /// ```
  public var workProgress: WorkProgress {
    workSnapshot().progress
  }

  /// ``workProgress`` now and after every change of the batch's queue's `WorkQueue.progressUpdates`, as an
  /// `AsyncStream` that keeps the newest value and ends once the batch has ended and its queue holds none of
  /// its work; the last value then has `completed == total`.
  ///
  /// Values never decrease. Ask for the stream before or while the batch runs (one asked for afterwards gives
  /// the final value and ends); stopping the iteration only stops observing, it does not cancel the batch.
  ///
  /// ```swift
  /// let watching = Task {
  ///   for await p in batch.workProgressUpdates { bar.show(p.fractionCompleted) }
  /// }
  /// let summary = await batch.run()
  /// await watching.value
  /// ```
  public var workProgressUpdates: AsyncStream<WorkProgress> {
    let (stream, continuation) = AsyncStream.makeStream(of: WorkProgress.self, bufferingPolicy: .bufferingNewest(1))
    let watcher = WorkProgressWatcher(continuation)
    let id = state.withLock { state in
      state.nextWatcher += 1
      state.watchers[state.nextWatcher] = watcher
      return state.nextWatcher
    }
    // The task that forwards the queue's updates, and whether the stream ended (a task made after that is cancelled
    // at once).
    let forwarder = Locked<(task: Task<Void, Never>?, ended: Bool)>((nil, false))
    continuation.onTermination = { [self] _ in
      let task = forwarder.withLock { forwarder in
        forwarder.ended = true
        return forwarder.task
      }
      task?.cancel()
      _ = state.withLock { $0.watchers.removeValue(forKey: id) }
    }
    let task = Task { [self] in
      for await _ in queue.progressUpdates { publish(to: watcher) }
    }
    let kept = forwarder.withLock { forwarder in
      forwarder.task = task
      return !forwarder.ended
    }
    if !kept { task.cancel() }
    publish(to: watcher)
    return stream
  }

  /// The batch's progress in items, and how many of its items the queue still holds, read in one step.
  func workSnapshot() -> (progress: WorkProgress, outstanding: Int) {
    itemCounts.withLock { counts in
      // Adds happen under this lock, so `added` and the queue's counts agree. The queue's progress is for its
      // current burst only, but what is still outstanding (total - completed) does not depend on bursts.
      var progress = queue.progress
      let outstanding = progress.total - progress.completed
      progress.total = Self.itemsPerFile * items.count
      progress.completed = counts.added - outstanding + Self.itemsPerFile * counts.skippedFiles
      return (progress, outstanding)
    }
  }

  /// Gives `watcher` the progress now (when it changed), and ends its stream once the batch is over.
  func publish(to watcher: WorkProgressWatcher) {
    watcher.last.withLock { last in
      // Read first: once finished, no more work is added, so an empty snapshot taken after it is the end.
      let finished = state.withLock { $0.finished }
      let (progress, outstanding) = workSnapshot()
      if progress != last {
        last = progress
        watcher.continuation.yield(progress)
      }
      if finished && outstanding == 0 { watcher.continuation.finish() }
    }
  }

  /// Publishes to every subscriber (when the batch ends).
  func publishToWatchers() {
    let watchers = state.withLock { Array($0.watchers.values) }
    for watcher in watchers { publish(to: watcher) }
  }
}
