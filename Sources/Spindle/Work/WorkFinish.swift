/// The completion handle a callback body receives: call it once with the value, a `Result` or an error.
///
/// A callback body (``WorkQueue/addCallback(name:priority:dependencies:_:)``) keeps its queue slot until
/// `finish` is called, from any thread. Calling `finish` more than once is a programmer error: the extra
/// call is ignored and reported through ``WorkQueue/misuseHandler`` (by default a message on standard
/// error); it never crashes and never completes the work twice. Never calling it leaves the work running.
///
/// ```swift
/// let fetch = queue.addCallback { finish in
///   legacyFetch(url) { data, error in
///     if let error { finish(error) } else { finish(data!) }
///   }
/// }
/// ```
public struct WorkFinish<Value: Sendable>: Sendable {
  let work: Work<Value>

  /// Completes the work with `value`.
  public func callAsFunction(_ value: Value) {
    work.finishFromCallback(.success(value))
  }

  /// Completes the work with `result`; a `CancellationError` failure ends it as cancelled.
  public func callAsFunction(_ result: Result<Value, any Error>) {
    work.finishFromCallback(result)
  }

  /// Completes the work as failed with `error` (or as cancelled when `error` is a `CancellationError`).
  public func callAsFunction(_ error: any Error) {
    work.finishFromCallback(.failure(error))
  }

  /// Whether the work has been cancelled while its body runs; poll it in long-running callbacks.
  public var isCancelled: Bool {
    work.isCancellationRequested
  }
}
