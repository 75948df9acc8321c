/// Where a work item is in its life.
///
/// An item moves `pending` → `ready` → `running` → one of the three final states; cancellation or a
/// failed dependency can move it from `pending` or `ready` straight to a final state without running.
public enum WorkState: Sendable, Hashable {
  /// Waiting for its dependencies, a delay, its next retry or an exclusivity key.
  case pending
  /// Every dependency is done; waiting for a free slot in its queue (also while the queue is suspended). Work whose
  /// add raced another thread's ``WorkQueue/addBarrier(name:_:)`` (published after the barrier took what it waits for)
  /// may be ready and still wait for that barrier to end, as the work added after the barrier does while pending.
  case ready
  /// The body is running (an `async` or callback body counts as running until it completes).
  case running
  /// The body returned a value.
  case finished
  /// Cancelled before it ran, ended by a cancelled dependency, or the body threw `CancellationError`.
  case cancelled
  /// The body threw an error, or a dependency failed.
  case failed

  /// Whether the state is final (`finished`, `cancelled` or `failed`).
  public var isFinal: Bool {
    switch self {
    case .finished, .cancelled, .failed: true
    case .pending, .ready, .running: false
    }
  }
}
