import Spindle

extension TiltShiftBatch: CustomDebugStringConvertible {
  /// A report for a batch that seems stuck or slow: files and work items done, then its queue's stuck-queue
  /// report (`WorkQueue.debugDescription`: what runs, what is ready, and what each pending item waits
  /// for).
  ///
  /// Safe to ask for from any thread while the batch runs (a signal handler's queue, for example); the batch
  /// goes on.
  ///
  /// ```swift
  /// print(String(reflecting: batch))
  /// // TiltShiftBatch: 2 of 6 files ended, 8 of 18 work items completed
  /// // WorkQueue 'tiltshift': width 2, 1 running, 0 ready, 3 unfinished
  /// //   running 'decode c.jpg' (normal) …
  /// ```
  public var debugDescription: String {
    let files = state.withLock { $0.progress.completed }
    let work = workProgress
    return "TiltShiftBatch: \(files) of \(items.count) files ended, \(work.completed) of \(work.total) work items "
      + "completed\n" + String(reflecting: queue)
  }
}
