import Dispatch

/// Runs an `(Input) -> Output` action in the background and delivers the output by completion,
/// `async`, or on the main actor.
///
/// The seed's API, kept by name and shape, with three changes a careful user wants:
/// - **Actions run on ``BlockingExecutor/shared`` by default**, not on Swift's cooperative pool. The
///   action is synchronous and often long (decoding, file I/O, a blocking SDK call); on the pool each
///   running action holds one of only *cores* threads, and a few of them stall every other task in the
///   process. Pass `executor: globalConcurrentExecutor` for the seed's behaviour (short, CPU-only
///   actions), or your own ``BlockingExecutor``.
/// - **Sendable:** `Input` and `Output` cross threads, so both must be `Sendable`; the action and the
///   plain completions are `@Sendable`, main-actor completions are `@MainActor` (hence Sendable). The
///   executor itself is `Sendable` and can be shared.
/// - **Handles and limits:** completion-style calls return an ``ActionExecution`` you may ignore or
///   cancel; `maxInFlight` bounds how many actions run at once (the rest wait in FIFO order); plain
///   completions can be delivered on an `outputQueue`.
///
/// ```swift
/// let thumbnails = ConcurrentActionExecutor<Photo, Image>(maxInFlight: 4) { photo in
///   photo.decode().scaled(to: 128)  // synchronous, slow
/// }
/// thumbnails.executeAndDeliverOnMain(photo) { image in cell.image = image }
/// let image = await thumbnails.execute(photo)
/// ```
///
/// Semantics in short: each call runs the action exactly once unless cancelled before it starts;
/// completions are called at most once; a non-throwing action cannot fail, so a cancelled execution
/// that never started calls no completion (use ``ThrowingConcurrentActionExecutor`` to hear about it).
public final class ConcurrentActionExecutor<Input: Sendable, Output: Sendable>: Sendable {
  /// The work to run; it is called on the executor's threads, concurrently with itself.
  public typealias Action = @Sendable (Input) -> Output
  /// A completion that receives the action's output.
  public typealias ActionOutputCompletion = @Sendable (Output) -> Void

  /// The action every execution runs.
  public let action: Action
  /// The priority of the tasks started by completion-style calls.
  ///
  /// `async` calls run the action at the caller's own priority (they are structured: no new task).
  public let priority: TaskPriority

  let core: ActionExecutorCore

  /// Creates an executor for `action`.
  ///
  /// - Parameters:
  ///   - priority: the priority of tasks started by completion-style calls (the seed's default, `.high`).
  ///   - executor: where the action runs; ``BlockingExecutor/shared`` by default. Pass
  ///     `globalConcurrentExecutor` to run on Swift's cooperative pool (only for short, non-blocking work).
  ///   - maxInFlight: the most actions running at once across all calls; `nil` (default) for no bound.
  ///     Must be at least 1. Extra calls wait in FIFO order.
  ///   - outputQueue: where plain completions run; `nil` (default) runs them on the thread that ran
  ///     the action. Main-actor completions always run on the main actor.
  ///   - action: the synchronous work.
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
  ///
  /// Inside the completion, `IDQ.currentQueueIs(outputQueue)` is true.
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

  /// Runs the action on `input` in the background, then calls `completion` with the output.
  ///
  /// The completion runs on ``outputQueue`` if set, else on the thread that ran the action. If the
  /// returned execution is cancelled before the action starts, neither the action nor the completion
  /// runs.
  @discardableResult
  public func execute(_ input: Input, completion: @escaping ActionOutputCompletion) -> ActionExecution {
    let action = action
    let core = core
    return core.start({ action(input) }, deliver: { core.deliver($0, to: completion) }, skipped: {})
  }

  /// Runs the action in the background, then calls `completion` with the output (for `Input == Void`).
  @discardableResult
  public func execute(completion: @escaping ActionOutputCompletion) -> ActionExecution where Input == Void {
    execute((), completion: completion)
  }

  /// Runs the action on `input` in the background, then calls `completion` on the main actor.
  ///
  /// Delivery goes through the Swift runtime's main executor, so `completion` is isolated to the main
  /// actor both in a program with an `async` main and in one that parked its main thread in
  /// `dispatchMain()` (on Linux the main queue is then drained by other threads, swiftlang/swift#90851). Cancellation works as for ``execute(_:completion:)``.
  @discardableResult
  public func executeAndDeliverOnMain(
    _ input: Input,
    completion: @escaping @MainActor (Output) -> Void
  ) -> ActionExecution {
    let action = action
    return core.start({ action(input) }, deliver: { await completion($0) }, skipped: {})
  }

  /// Runs the action in the background, then calls `completion` on the main actor (for `Input == Void`).
  @discardableResult
  public func executeAndDeliverOnMain(
    completion: @escaping @MainActor (Output) -> Void
  ) -> ActionExecution where Input == Void {
    executeAndDeliverOnMain((), completion: completion)
  }

  // MARK: - async

  /// Runs the action on `input` on ``executor`` and returns its output.
  ///
  /// No task is created: the calling task moves to the executor for the action and back, so it keeps
  /// its priority and task-locals, and its cancellation is visible inside the action
  /// (`Task.isCancelled`). The action always runs — it must produce an `Output` — even if the caller
  /// is cancelled while waiting for a `maxInFlight` slot.
  public func execute(_ input: Input) async -> Output {
    await core.run { action(input) }
  }

  /// Runs the action on ``executor`` and returns its output (for `Input == Void`).
  public func execute() async -> Output where Input == Void {
    await execute(())
  }

  /// From the main actor: runs the action on ``executor`` and resumes on the main actor with its output.
  @MainActor
  public func executeAndDeliverOnMain(_ input: Input) async -> Output {
    await execute(input)
  }

  /// From the main actor: runs the action and resumes on the main actor with its output (`Input == Void`).
  @MainActor
  public func executeAndDeliverOnMain() async -> Output where Input == Void {
    await execute(())
  }
}
