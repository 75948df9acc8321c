import Dispatch

/// A ``ConcurrentActionExecutor`` whose action can throw: completions receive a `Result`, `async`
/// calls rethrow.
///
/// It is a separate type, not a generic parameter, so the seed's non-throwing API keeps its exact
/// shape. Errors are untyped (`any Error`) on purpose: a cancelled execution that never started
/// reports `CancellationError`, which a typed `throws(Failure)` could not carry without wrapping every
/// error. Every call ends exactly once: with the output, the action's error, or `CancellationError`.
///
/// ```swift
/// let loader = ThrowingConcurrentActionExecutor<String, [UInt8]>(maxInFlight: 8) { path in
///   try readFile(path)  // blocking I/O, runs on BlockingExecutor.shared
/// }
/// let bytes = try await loader.execute("/etc/hosts")
/// loader.execute("/missing") { result in
///   if case .failure(let error) = result { print("failed:", error) }
/// }
/// ```
public final class ThrowingConcurrentActionExecutor<Input: Sendable, Output: Sendable>: Sendable {
  /// The work to run; it is called on the executor's threads, concurrently with itself.
  public typealias Action = @Sendable (Input) throws -> Output
  /// A completion that receives the output or the error.
  public typealias ActionResultCompletion = @Sendable (Result<Output, any Error>) -> Void

  /// The action every execution runs.
  public let action: Action
  /// The priority of the tasks started by completion-style calls.
  public let priority: TaskPriority

  let core: ActionExecutorCore

  /// Creates an executor for a throwing `action`.
  ///
  /// The parameters mean what they mean for ``ConcurrentActionExecutor``: `executor` defaults to
  /// ``BlockingExecutor/shared``; `maxInFlight` (at least 1) bounds actions running at once;
  /// `outputQueue` is where plain completions run.
  public init(
    priority: TaskPriority = .high,
    executor: any TaskExecutor = BlockingExecutor.shared,
    maxInFlight: Int? = nil,
    outputQueue: DispatchQueue? = nil,
    action: @escaping Action
  ) {
    self.action = action
    self.priority = priority
    self.core = ActionExecutorCore(
      executor: executor,
      priority: priority,
      maxInFlight: maxInFlight,
      outputQueue: outputQueue
    )
  }

  /// Creates an executor that delivers plain completions on an ``IdentifiableDispatchQueue``.
  public convenience init(
    priority: TaskPriority = .high,
    executor: any TaskExecutor = BlockingExecutor.shared,
    maxInFlight: Int? = nil,
    outputQueue: IdentifiableDispatchQueue,
    action: @escaping Action
  ) {
    self.init(
      priority: priority,
      executor: executor,
      maxInFlight: maxInFlight,
      outputQueue: outputQueue.queue,
      action: action
    )
  }

  /// Where the action runs.
  public var executor: any TaskExecutor { core.executor }
  /// The most actions running at once, or `nil` for no bound.
  public var maxInFlight: Int? { core.maxInFlight }
  /// Where plain completions run, or `nil` for the thread that ran the action.
  public var outputQueue: DispatchQueue? { core.outputQueue }

  // MARK: - Completion

  /// Runs the action on `input` in the background, then calls `completion` once with the result.
  ///
  /// If the execution is cancelled before the action starts, the action does not run and `completion`
  /// receives `CancellationError`.
  @discardableResult
  public func execute(_ input: Input, completion: @escaping ActionResultCompletion) -> ActionExecution {
    let action = action
    let core = core
    return core.start(
      { Result { try action(input) } },
      deliver: { core.deliver($0, to: completion) },
      skipped: { core.deliver(.failure(CancellationError()), to: completion) }
    )
  }

  /// Runs the action, then calls `completion` once with the result (for `Input == Void`).
  @discardableResult
  public func execute(completion: @escaping ActionResultCompletion) -> ActionExecution where Input == Void {
    execute((), completion: completion)
  }

  /// Runs the action on `input` in the background, then calls `completion` once on the main actor.
  @discardableResult
  public func executeAndDeliverOnMain(
    _ input: Input,
    completion: @escaping @MainActor (Result<Output, any Error>) -> Void
  ) -> ActionExecution {
    let action = action
    return core.start(
      { Result { try action(input) } },
      deliver: { await completion($0) },
      skipped: { await completion(.failure(CancellationError())) }
    )
  }

  /// Runs the action, then calls `completion` once on the main actor (for `Input == Void`).
  @discardableResult
  public func executeAndDeliverOnMain(
    completion: @escaping @MainActor (Result<Output, any Error>) -> Void
  ) -> ActionExecution where Input == Void {
    executeAndDeliverOnMain((), completion: completion)
  }

  // MARK: - async

  /// Runs the action on `input` on ``executor`` within the calling task and returns or rethrows.
  ///
  /// Throws `CancellationError` without running the action if the caller is cancelled before the
  /// action starts (including while waiting for a `maxInFlight` slot); once it runs, the action sees
  /// the caller's cancellation through `Task.isCancelled`.
  public func execute(_ input: Input) async throws -> Output {
    try await core.runThrowing { try action(input) }
  }

  /// Runs the action within the calling task and returns or rethrows (for `Input == Void`).
  public func execute() async throws -> Output where Input == Void {
    try await execute(())
  }

  /// From the main actor: runs the action and resumes on the main actor with its output or error.
  @MainActor
  public func executeAndDeliverOnMain(_ input: Input) async throws -> Output {
    try await execute(input)
  }

  /// From the main actor: runs the action and resumes on the main actor (for `Input == Void`).
  @MainActor
  public func executeAndDeliverOnMain() async throws -> Output where Input == Void {
    try await execute(())
  }
}
