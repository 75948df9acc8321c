import Dispatch
import Synchronization

extension DispatchGroup {
  /// Suspends until every block and every ``enter(_:)`` of the group has finished, without blocking a thread.
  ///
  /// Built on `notify(queue:execute:)` and a continuation, so it is the asynchronous twin of the blocking
  /// `wait()`: in an `async` context `await group.wait()` picks this overload. Returns at once if the group
  /// is empty.
  ///
  /// Cancellation does not end the wait: the group's work is not the task's to cancel, and returning early
  /// would break the promise that everything finished. Use ``waitUnlessCancelled()`` to stop waiting when
  /// the task is cancelled.
  ///
  /// ```swift
  /// let group = DispatchGroup()
  /// for url in urls { group.enter { lease in legacyDownload(url) { _ in lease.leave() } } }
  /// await group.wait()
  /// ```
  public func wait() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      notify(queue: .global()) { continuation.resume() }
    }
  }

  /// Suspends until the group is empty or the task is cancelled, without blocking a thread.
  ///
  /// - Throws: `CancellationError` if the task is cancelled before the group empties (checked on entry too).
  ///   The group's work keeps running; only the wait ends.
  public func waitUnlessCancelled() async throws {
    let once = OneShotContinuation<Void>()
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        once.arm(continuation)
        notify(queue: .global()) { once.resume(with: .success(())) }
        if Task.isCancelled { once.resume(with: .failure(CancellationError())) }
      }
    } onCancel: {
      once.resume(with: .failure(CancellationError()))
    }
  }

  /// Runs `body` on the main actor once the group is empty (the seed's `dispatch_group_notify` on the main queue).
  ///
  /// ```swift
  /// group.notifyOnMainActor { statusLabel.text = "Animations completed" }
  /// ```
  public func notifyOnMainActor(_ body: @escaping @MainActor @Sendable () -> Void) {
    notify(queue: .main) {
      MainActor.assumeIsolated { body() }
    }
  }
}
