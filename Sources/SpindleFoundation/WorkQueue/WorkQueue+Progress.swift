import Foundation
import Spindle

extension WorkQueue {
  /// A Foundation `Progress` that follows the queue's ``WorkQueue/progress``: its units are the items of the
  /// current burst of work (completed of added).
  ///
  /// Cancelling the `Progress` cancels the queue's unfinished work (``WorkQueue/cancelAll()``). The progress
  /// is updated from a task that ends once the `Progress` is released.
  ///
  /// ```swift
  /// let progress = queue.makeProgress()
  /// progressView.observedProgress = progress        // on Apple platforms
  /// ```
  public func makeProgress() -> Progress {
    let progress = Progress(totalUnitCount: Int64(self.progress.total))
    progress.completedUnitCount = Int64(self.progress.completed)
    let box = WeakProgress(progress)
    let updates = progressUpdates
    Task.detached {
      for await update in updates {
        guard let progress = box.progress else { return }
        progress.totalUnitCount = Int64(update.total)
        progress.completedUnitCount = Int64(update.completed)
      }
    }
    progress.cancellationHandler = { [weak self] in self?.cancelAll() }
    return progress
  }
}

/// A weak reference to a `Progress`, handed to the updating task.
// @unchecked Sendable: `progress` is a weak reference set once at creation; `Progress` itself is thread-safe
// (Foundation documents its properties as safe to change from any thread).
private final class WeakProgress: @unchecked Sendable {
  weak var progress: Progress?
  init(_ progress: Progress) { self.progress = progress }
}
