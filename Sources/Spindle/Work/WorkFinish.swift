import Synchronization

/// The completion handle a callback body receives: call it once with the value, a `Result` or an error.
///
/// A callback body (``WorkQueue/addCallback(name:priority:qos:dependencies:condition:delay:timeout:retry:exclusive:_:)``) keeps its queue slot until
/// `finish` is called, from any thread. When `finish` is called before the body returns, the same worker
/// completes the work and goes on with the next item (no thread hop). Calling `finish` more than once is a
/// programmer error: the extra call is ignored and reported through ``WorkQueue/misuseHandler`` (by default a
/// message on standard error); it never crashes and never completes the work twice. Dropping every copy of
/// `finish` without calling it fails the work with ``WorkFinishDroppedError``, so its slot is not held forever.
///
/// ```swift
/// let fetch = queue.addCallback { finish in
///   let request = legacyFetch(url) { data, error in
///     if let error { finish(error) } else { finish(data!) }
///   }
///   finish.onCancel { request.cancel() }
/// }
/// ```
public struct WorkFinish<Value: Sendable>: Sendable {
  let token: FinishToken

  @usableFromInline
  init(token: FinishToken) {
    self.token = token
  }

  /// The work this `finish` completes (the token holds it type-erased, so that making one looks up no metadata).
  var work: Work<Value> { unsafeDowncast(token.work, to: Work<Value>.self) }

  /// Completes the work with `value`.
  public func callAsFunction(_ value: Value) {
    work.finishFromCallback(value: value, token: token)
  }

  /// Completes the work with `result`; a `CancellationError` failure ends it as cancelled.
  public func callAsFunction(_ result: Result<Value, any Error>) {
    switch result {
    case .success(let value): work.finishFromCallback(value: value, token: token)
    case .failure(let error): work.finishFromCallback(error: error, token: token)
    }
  }

  /// Completes the work as failed with `error` (or as cancelled when `error` is a `CancellationError`).
  public func callAsFunction(_ error: any Error) {
    work.finishFromCallback(error: error, token: token)
  }

  /// Whether the work has been cancelled while its body runs; poll it in long-running callbacks.
  public var isCancelled: Bool {
    token.work.isCancellationRequested
  }

  /// Calls `handler` once if the work is cancelled before it completes (at once if it already was).
  ///
  /// Use it to stop the operation the callback started; the work still ends with what you pass to `finish`
  /// (pass `CancellationError()` to end it as cancelled).
  ///
  /// ```swift
  /// let call = queue.addCallback { finish in
  ///   let request = legacyFetch { finish($0) }
  ///   finish.onCancel { request.cancel() }
  /// }
  /// ```
  public func onCancel(_ handler: @escaping @Sendable () -> Void) {
    token.work.onCancel(handler)
  }
}

/// Shared by every copy of a `WorkFinish`: when the last copy goes away, an uncalled `finish` fails the work.
///
/// Not generic: a generic token's class metadata was looked up at run time for every callback item.
///
/// A worker reuses a token: when the frame that ran a callback body holds the only reference once the body returned
/// (nothing kept a copy of `finish`, the common case of a body that calls it at once), the worker disarms it and arms
/// it again for its next callback body of the same queue, instead of freeing it and allocating another (about 200
/// instructions of a callback item's 4,100, under callgrind).
// @unchecked Sendable: `work` and `attempt` change only in `arm` and `disarm`, called by the worker whose frame holds
// the only reference, after it took the work's lock (see `AnyWork.run`): every other thread that read them through a
// copy of `finish` did so before taking that lock, and had let go of its copy. `queueName` is set once; `wasCalled`
// is atomic.
@usableFromInline final class FinishToken: @unchecked Sendable {
  /// The work this `finish` completes; nil only while the token waits, disarmed, for its worker's next body.
  private(set) var armedWork: AnyWork?
  /// The attempt whose body got this `finish`: a retried callback body gets a new one for each attempt, and a call
  /// (or the release) of an earlier attempt's `finish` must not end the one running now.
  private(set) var attempt: Int
  /// The name of the work's queue.
  let queueName: String
  /// Whether this `finish` was called (set under the work's lock by the call that claimed it): then its release has
  /// nothing to check, and skips the work's lock. A stale `false` only takes the lock for nothing.
  let wasCalled = Atomic<Bool>(false)

  /// A token for the attempt `attempt` of `work`'s callback body; `queueName` (read when the body starts, while the
  /// queue runs the work) names the queue in the reports of a `finish` called twice or never, when the work may have
  /// left its queue.
  init(work: AnyWork, attempt: Int, queueName: String) {
    self.armedWork = work
    self.attempt = attempt
    self.queueName = queueName
  }

  /// The work (the token is armed whenever a copy of `finish` exists outside its worker's frame).
  var work: AnyWork { armedWork.unsafelyUnwrapped }

  /// Arms a disarmed token for attempt `attempt` of `work`, of the queue it was made for. Only with the sole reference.
  func arm(work: AnyWork, attempt: Int) {
    armedWork = work
    self.attempt = attempt
  }

  /// Lets go of the work (so the token keeps no finished work alive) and forgets the call. Only with the sole
  /// reference.
  func disarm() {
    armedWork = nil
    wasCalled.store(false, ordering: .relaxed)
  }

  deinit {
    if !wasCalled.load(ordering: .relaxed), let armedWork { armedWork.finishDropped(self) }
  }
}

/// The error of callback work whose `finish` was released without being called.
///
/// ```swift
/// let lost = queue.addCallback { (finish: WorkFinish<Int>) in }   // never calls finish
/// // try await lost.value throws WorkFinishDroppedError
/// ```
public struct WorkFinishDroppedError: Error, CustomStringConvertible, Sendable {
  /// The name of the work, if it had one.
  public var work: String?
  /// The name of its queue.
  public var queue: String

  public var description: String {
    "work '\(work ?? "unnamed")' on WorkQueue '\(queue)' ended without calling finish: every copy of its "
      + "finish handle was released uncalled"
  }
}

/// The error of a wait that could never end.
///
/// ``Work/wait()`` throws it instead of blocking forever (and so do ``Work/value`` and ``WorkQueue/allFinished()``
/// awaited by an `async` body, which holds its slot while it awaits), for example when a body of a serial queue waits for
/// work of the same queue that has not started yet, or for work that depends on the body's own work, or when
/// bodies, on one queue or several, would wait for each other. ``reason`` says which.
///
/// ```swift
/// let serial = WorkQueue(maxConcurrent: 1)
/// let later = serial.add { 2 }
/// let first = serial.add(priority: .veryHigh) { try later.wait() + 1 }   // fails with WorkDeadlockError
/// ```
public struct WorkDeadlockError: Error, CustomStringConvertible, Sendable {
  /// The work that was waited for.
  public var work: String?
  /// The work whose body waited.
  public var waiter: String?
  /// The queue of the work waited for.
  public var queue: String
  /// Why the wait could never end.
  public var reason: String

  public var description: String {
    "work '\(waiter ?? "unnamed")' waited for work '\(work ?? "unnamed")' on WorkQueue '\(queue)', which "
      + "would never end: \(reason)"
  }
}
