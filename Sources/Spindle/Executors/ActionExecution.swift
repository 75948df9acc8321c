import Dispatch

/// A handle to one execution started by a completion-style `execute` call.
///
/// Cancelling it cancels the task that runs the action:
/// - if the action has not started yet (it waits for a `maxInFlight` slot, or has not been scheduled),
///   it never runs; ``ConcurrentActionExecutor`` then never calls the completion, and
///   ``ThrowingConcurrentActionExecutor`` calls it once with `CancellationError`;
/// - if the action is running, `Task.isCancelled` becomes true inside it; the action decides what to
///   do, and its result is delivered as usual.
///
/// Cancelling twice, or after the execution ended, does nothing. Dropping the handle does not cancel.
///
/// ```swift
/// let execution = resizer.execute(image) { thumbnail in show(thumbnail) }
/// execution.cancel()  // the user scrolled away
/// ```
public struct ActionExecution: Sendable, Hashable {
  let task: Task<Void, Never>

  init(task: Task<Void, Never>) {
    self.task = task
  }

  /// Asks the execution to stop; see the type's documentation for what happens.
  public func cancel() {
    task.cancel()
  }

  /// Whether ``cancel()`` has been called.
  public var isCancelled: Bool { task.isCancelled }

  /// Waits until the execution has ended: the action finished or was skipped, and the completion was
  /// called or handed to its queue (a completion sent to an output queue or the main actor may still
  /// be about to run).
  public func wait() async {
    await task.value
  }
}
