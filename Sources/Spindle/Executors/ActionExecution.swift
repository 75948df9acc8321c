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

/// The settings shared by both executor types: where actions run, at what priority, how many at once,
/// and where completions go.
struct ExecutionSettings: Sendable {
  let executor: any TaskExecutor
  let priority: TaskPriority
  let limit: InFlightLimit?
  let outputQueue: DispatchQueue?

  init(executor: any TaskExecutor, priority: TaskPriority, maxInFlight: Int?, outputQueue: DispatchQueue?) {
    if let maxInFlight {
      precondition(maxInFlight >= 1, "maxInFlight must be at least 1, got \(maxInFlight)")
    }
    self.executor = executor
    self.priority = priority
    self.limit = maxInFlight.map { InFlightLimit(limit: $0) }
    self.outputQueue = outputQueue
  }

  /// Starts an unstructured task on the executor at the configured priority.
  func start(_ body: @escaping @Sendable () async -> Void) -> ActionExecution {
    ActionExecution(task: Task(executorPreference: executor, priority: priority, operation: body))
  }

  /// Calls `completion` on the output queue if there is one, else right here.
  func deliver<Value: Sendable>(_ value: Value, to completion: @escaping @Sendable (Value) -> Void) {
    if let outputQueue {
      outputQueue.async { completion(value) }
    } else {
      completion(value)
    }
  }
}

extension ExecutionSettings {
  /// Takes a `maxInFlight` slot if there is a limit; false if the task is or gets cancelled first.
  func acquireUnlessCancelled() async -> Bool {
    guard let limit else { return !Task.isCancelled }
    return await limit.acquireUnlessCancelled()
  }

  /// Returns the slot taken by ``acquireUnlessCancelled()``.
  func release() {
    limit?.release()
  }

  /// Runs `work` on the executor within the calling task, holding a slot (waited for uncancellably).
  func run<Value: Sendable>(_ work: @Sendable () -> Value) async -> Value {
    if let limit { await limit.acquire() }
    defer { limit?.release() }
    return await withTaskExecutorPreference(executor) { work() }
  }

  /// Runs throwing `work` on the executor within the calling task; throws `CancellationError` without
  /// running it if the task is cancelled before it gets a slot.
  func runThrowing<Value: Sendable>(_ work: @Sendable () throws -> Value) async throws -> Value {
    guard await acquireUnlessCancelled() else { throw CancellationError() }
    defer { release() }
    return try await withTaskExecutorPreference(executor) { try work() }
  }
}
