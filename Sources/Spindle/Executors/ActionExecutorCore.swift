import Dispatch

/// What ``ConcurrentActionExecutor`` and ``ThrowingConcurrentActionExecutor`` share: where actions run, at what
/// priority, the `maxInFlight` bound (an ``AsyncSemaphore``), where completions go, and the four ways to run one
/// action (completion-style or `async`, cancellable or not).
///
/// The two public types only say what an action produces (`Output`, or a `Result`) and what a skipped execution
/// reports; every bound, task and delivery decision is made here once.
struct ActionExecutorCore: Sendable {
  let executor: any TaskExecutor
  let priority: TaskPriority
  /// The most actions running at once, or nil for no bound.
  let maxInFlight: Int?
  /// One permit per action allowed to run at once; nil for no bound.
  let slots: AsyncSemaphore?
  let outputQueue: DispatchQueue?

  init(executor: any TaskExecutor, priority: TaskPriority, maxInFlight: Int?, outputQueue: DispatchQueue?) {
    if let maxInFlight {
      precondition(maxInFlight >= 1, "maxInFlight must be at least 1, got \(maxInFlight)")
    }
    self.executor = executor
    self.priority = priority
    self.maxInFlight = maxInFlight
    self.slots = maxInFlight.map { AsyncSemaphore(value: $0) }
    self.outputQueue = outputQueue
  }

  /// Actions holding a slot now (nil without a bound).
  var inFlight: Int? {
    guard let maxInFlight, let slots else { return nil }
    return maxInFlight - slots.availablePermits
  }

  /// Calls waiting for a slot now (nil without a bound).
  var waiting: Int? { slots?.waiterCount }

  // MARK: - Completion style

  /// Starts a task on the executor that takes a slot, runs `work`, gives the slot back and hands the value to
  /// `deliver`; if the task is cancelled before it gets a slot, `work` does not run and `skipped` is called.
  func start<Value: Sendable>(
    _ work: @escaping @Sendable () -> Value,
    deliver: @escaping @Sendable (Value) async -> Void,
    skipped: @escaping @Sendable () async -> Void
  ) -> ActionExecution {
    let slots = slots
    return ActionExecution(
      task: Task(executorPreference: executor, priority: priority) {
        if let slots {
          guard (try? await slots.waitUnlessCancelled()) != nil else { return await skipped() }
        } else if Task.isCancelled {
          return await skipped()
        }
        let value = work()
        slots?.signal()
        await deliver(value)
      })
  }

  /// Calls `completion` on the output queue if there is one, else right here.
  func deliver<Value: Sendable>(_ value: Value, to completion: @escaping @Sendable (Value) -> Void) {
    if let outputQueue {
      outputQueue.async { completion(value) }
    } else {
      completion(value)
    }
  }

  // MARK: - async

  /// Runs `work` on the executor within the calling task, holding a slot (waited for uncancellably).
  func run<Value: Sendable>(_ work: @Sendable () -> Value) async -> Value {
    guard let slots else { return await withTaskExecutorPreference(executor) { work() } }
    await slots.wait()
    defer { slots.signal() }
    return await withTaskExecutorPreference(executor) { work() }
  }

  /// Runs throwing `work` on the executor within the calling task; throws `CancellationError` without
  /// running it if the task is cancelled before it gets a slot.
  func runThrowing<Value: Sendable>(_ work: @Sendable () throws -> Value) async throws -> Value {
    guard let slots else {
      try Task.checkCancellation()
      return try await withTaskExecutorPreference(executor) { try work() }
    }
    try await slots.waitUnlessCancelled()
    defer { slots.signal() }
    return try await withTaskExecutorPreference(executor) { try work() }
  }
}
