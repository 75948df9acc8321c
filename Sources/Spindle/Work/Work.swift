import Dispatch

/// A unit of work added to a ``WorkQueue``, producing a typed value.
///
/// `Work` is a handle: keep it to read the ``value``, pass it as a dependency, observe it or cancel it.
/// Dropping the handle does not cancel the work. Once complete, the work keeps only its outcome: it releases
/// its body, the values of its dependencies and its links to dependents.
///
/// ```swift
/// let load = queue.add(name: "load") { try decode(path) }               // Work<Image>
/// let blur = queue.add(name: "blur", after: load) { image in tiltShift(image) }
/// blur.onCompletion(on: .main) { result in show(result) }
/// let image = try await blur.value
/// ```
public final class Work<Value: Sendable>: AnyWork, @unchecked Sendable {
  // Thread safety: `body`, `storedValue` and `finishCalled` are only touched while holding `lock` (see AnyWork).

  enum Body {
    case sync(@Sendable () throws -> Value)
    case async(@Sendable () async throws -> Value)
    case callback(@Sendable (WorkFinish<Value>) -> Void)
  }

  // lock
  private var body: Body?
  // lock
  private var storedValue: Value?
  // lock
  private var finishCalled = false

  init(
    queue: WorkQueue,
    name: String?,
    priority: WorkPriority,
    dependencyCount: Int,
    acceptsFailedDependencies: Bool,
    body: Body
  ) {
    self.body = body
    super.init(
      queue: queue,
      name: name,
      priority: priority,
      dependencyCount: dependencyCount,
      acceptsFailedDependencies: acceptsFailedDependencies
    )
  }

  // MARK: - Public API

  /// The outcome, or `nil` while the work is not complete.
  ///
  /// A cancelled item's result is `.failure(CancellationError())`; a failed item's is the error its body (or
  /// the failed dependency that ended it) threw.
  public var result: Result<Value, any Error>? {
    lock.withLock { resultLocked }
  }

  /// The value, waiting for the work to complete.
  ///
  /// Throws the error the work failed with, or `CancellationError` when it was cancelled. Cancelling the
  /// task that awaits does not cancel the work (call ``AnyWork/cancel()`` for that).
  public var value: Value {
    get async throws {
      if let result { return try result.get() }
      return try await withCheckedThrowingContinuation { continuation in
        whenComplete { continuation.resume(with: $0) }
      }
    }
  }

  /// Blocks the calling thread until the work completes and returns its value.
  ///
  /// Throws like ``value``. Never call it from a body running on a queue the work waits for with no free
  /// slot left: that deadlocks. In `async` code use ``value``.
  @available(*, noasync, message: "use 'try await work.value' in async code")
  @discardableResult
  public func wait() throws -> Value {
    if let result { return try result.get() }
    let done = DispatchSemaphore(value: 0)
    whenComplete { _ in done.signal() }
    done.wait()
    return try result!.get()
  }

  /// Calls `handler` with the outcome on `queue` once the work is complete.
  ///
  /// The handler runs exactly once, also when added after the work completed (it is then dispatched at once).
  public func onCompletion(
    on queue: DispatchQueue,
    _ handler: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) {
    whenComplete { result in queue.async { handler(result) } }
  }

  /// Calls `handler` with the outcome on the main actor once the work is complete.
  ///
  /// The handler runs exactly once, also when added after the work completed.
  public func onMainActorCompletion(
    _ handler: @escaping @MainActor @Sendable (Result<Value, any Error>) -> Void
  ) {
    whenComplete { result in Task { @MainActor in handler(result) } }
  }

  // MARK: - Engine

  private var resultLocked: Result<Value, any Error>? {
    switch phase {
    case .pending, .ready, .running: nil
    case .finished: .success(storedValue!)
    case .failed(let error): .failure(error)
    case .cancelled: .failure(CancellationError())
    }
  }

  /// Runs `handler` with the outcome once complete: at once, on this thread, if it already is.
  func whenComplete(_ handler: @escaping @Sendable (Result<Value, any Error>) -> Void) {
    whenCompleteErased { [self] in handler(result!) }
  }

  /// The value of a finished dependency, for a dependent's body. Only called once the work finished.
  func dependencyValue() -> Value {
    lock.withLock {
      guard let value = storedValue else {
        preconditionFailure("Spindle: a dependent ran before its dependency finished")
      }
      return value
    }
  }

  /// The outcome of a completed dependency, for a dependent's body that takes `Result` inputs.
  func dependencyResult() -> Result<Value, any Error> {
    lock.withLock {
      guard let result = resultLocked else {
        preconditionFailure("Spindle: a dependent ran before its dependency completed")
      }
      return result
    }
  }

  override func takeBodyLocked() -> Any? {
    guard let body else { return nil }
    self.body = nil
    return body
  }

  override func execute() -> Execution {
    let body: Body? = lock.withLock {
      guard case .ready = phase else { return nil }
      phase = .running
      let body = self.body
      self.body = nil
      return body
    }
    guard let body else { return .skipped }
    switch body {
    case .sync(let run):
      let saved = WorkContext.bind(self)
      let result: Result<Value, any Error>
      do {
        result = .success(try run())
      } catch {
        result = .failure(error)
      }
      WorkContext.restore(saved)
      guard let completed = complete(result) else {
        preconditionFailure("Spindle: running work completed twice")
      }
      return .completed(completed)
    case .async(let run):
      let task = Task(priority: queue.taskPriority) { [self] in
        let result: Result<Value, any Error>
        do {
          result = .success(try await WorkContext.$taskWork.withValue(self) { try await run() })
        } catch {
          result = .failure(error)
        }
        finishDetached(result)
      }
      let cancelNow: Bool = lock.withLock {
        guard case .running = phase else { return false }
        runningTask = task
        return cancelRequested
      }
      if cancelNow { task.cancel() }
      return .detached
    case .callback(let run):
      let saved = WorkContext.bind(self)
      run(WorkFinish(work: self))
      WorkContext.restore(saved)
      return .detached
    }
  }

  /// Stores the outcome of a body and moves to the final phase; `nil` if already complete.
  private func complete(_ result: Result<Value, any Error>) -> Completed? {
    lock.withLock {
      guard phase.termination == nil else { return nil }
      switch result {
      case .success(let success):
        storedValue = success
        return completeLocked(.finished)
      case .failure(let error):
        return completeLocked(error is CancellationError ? .cancelled : .failed(error))
      }
    }
  }

  /// Completes an `async` or callback body, which held its slot until now.
  func finishDetached(_ result: Result<Value, any Error>) {
    guard let completed = complete(result) else { return }
    queue.retire(self, completed: completed, releasingSlot: true)
  }

  /// Handles a call of a callback body's `finish`; reports and ignores every call after the first.
  func finishFromCallback(_ result: Result<Value, any Error>) {
    let first: Bool = lock.withLock {
      if finishCalled { return false }
      finishCalled = true
      return true
    }
    guard first else {
      reportMisuse(
        "Spindle: finish called more than once for work '\(name ?? "unnamed")' on WorkQueue '\(queue.name)'; "
          + "the extra call is ignored"
      )
      return
    }
    finishDetached(result)
  }
}
