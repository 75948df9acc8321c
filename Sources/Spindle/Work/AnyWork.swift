import Dispatch
import Synchronization

/// A type-erased work item: what every ``Work`` shares, whatever its value type.
///
/// Use `AnyWork` for ordering-only dependencies, when a body must wait for work whose value it does not
/// need. Every ``Work`` is an `AnyWork`, so an array literal of work with different value types works:
///
/// ```swift
/// let clean = queue.add(name: "clean") { try removeTemporaryFiles() }      // Work<Void>
/// let count = queue.add(name: "count") { try countInputs() }               // Work<Int>
/// let report = queue.add(name: "report", dependencies: [clean, count]) { "done" }
/// ```
///
/// You cannot create an `AnyWork` yourself; ``WorkQueue`` creates ``Work`` items.
// @unchecked Sendable: `name`, `priority`, `queueName`, `isAsync` and `acceptsFailedDependencies` are immutable;
// the fields marked "lock" are only touched while holding `lock`; `remaining` is atomic; the `registry` fields
// belong to the owning engine and are only touched while holding that engine's state lock.
public class AnyWork: @unchecked Sendable {
  /// The name given when the work was added, used in traces and messages.
  public let name: String?

  /// The priority of the work among the ready items of its queue.
  public let priority: WorkPriority

  /// The name of the queue that runs the body.
  let queueName: String

  /// Whether the body is `async` (it runs in a task of its own, started from whichever thread frees a slot).
  let isAsync: Bool

  /// Whether the body receives `Result` inputs (and so runs even when a dependency failed or was cancelled).
  let acceptsFailedDependencies: Bool

  let lock = SpinLock()

  /// Dependencies not yet finished, plus one while the work is still being wired up.
  let remaining: Atomic<Int>

  // lock. The engine that runs the work; released when the work completes, so finished work keeps no queue alive.
  var engine: WorkEngine?
  // lock (taken out, and so released, when the body starts or the work ends without running)
  var body: ErasedBody?
  // lock
  var phase: Phase
  // lock
  var cancelRequested = false
  // lock
  var dependents = SmallList<AnyWork>()
  // lock
  var completionHandlers = SmallList<@Sendable () -> Void>()
  // lock: called at most once, when running work is cancelled
  var cancelHandlers = SmallList<@Sendable () -> Void>()
  // lock
  var runningTask: Task<Void, Never>?
  // lock: a callback body is on the stack of the worker that started it
  var inBody = false
  // lock: how a callback body that called `finish` before returning ended (the worker completes it)
  var inlineTermination: Termination?

  // The owning engine's state lock.
  var registryNext: AnyWork?
  // The owning engine's state lock.
  unowned(unsafe) var registryPrevious: AnyWork?

  init(
    engine: WorkEngine,
    name: String?,
    priority: WorkPriority,
    dependencyCount: Int,
    acceptsFailedDependencies: Bool,
    body: ErasedBody
  ) {
    self.engine = engine
    self.queueName = engine.name
    self.body = body
    self.name = name
    self.priority = priority
    self.acceptsFailedDependencies = acceptsFailedDependencies
    self.remaining = Atomic(dependencyCount + 1)
    self.phase = .pending
    if case .async = body { isAsync = true } else { isAsync = false }
  }

  /// Where the work is in its life; a snapshot that may change as soon as it is read.
  public var state: WorkState {
    lock.withLock { phase.state }
  }

  /// Cancels the work.
  ///
  /// - Pending or ready work completes at once as ``WorkState/cancelled`` without running, and its
  ///   dependents end the same way (unless they take `Result` inputs, in which case they run and receive
  ///   `CancellationError`).
  /// - Running work is asked to stop: ``WorkContext/isCancelled`` becomes `true` for a synchronous or
  ///   callback body, the handlers given to ``WorkContext/onCancel(_:)`` and ``WorkFinish/onCancel(_:)`` run
  ///   (once), and an `async` body's task is cancelled. The work ends as cancelled if the body throws
  ///   `CancellationError`; otherwise it keeps the body's outcome.
  /// - Finished work is not affected. Calling `cancel()` more than once is harmless.
  public func cancel() {
    enum Action {
      case none
      case completed(Completed)
      case running(Task<Void, Never>?, SmallList<@Sendable () -> Void>)
    }
    let action: Action = lock.withLock {
      switch phase {
      case .pending, .ready:
        return .completed(completeLocked(.cancelled))
      case .running:
        guard !cancelRequested else { return .none }
        cancelRequested = true
        let handlers = cancelHandlers
        cancelHandlers = SmallList()
        return .running(runningTask, handlers)
      case .finished, .failed, .cancelled:
        return .none
      }
    }
    switch action {
    case .none:
      break
    case .running(let task, let handlers):
      task?.cancel()
      for handler in handlers { handler() }
    case .completed(let completed):
      completed.engine?.retire(self, completed: completed)
    }
  }

  /// Whether the body has been asked to stop (or the work was cancelled before it ran).
  var isCancellationRequested: Bool {
    lock.withLock {
      if case .cancelled = phase { return true }
      return cancelRequested
    }
  }

  /// Runs `handler` once if the running work is cancelled: now if it already was, never if it completes first.
  final func onCancel(_ handler: @escaping @Sendable () -> Void) {
    let runNow: Bool = lock.withLock {
      switch phase {
      case .running:
        if cancelRequested { return true }
        cancelHandlers.append(handler)
        return false
      case .cancelled:
        return true
      case .pending, .ready, .finished, .failed:
        return false
      }
    }
    if runNow { handler() }
  }

  /// The engine while the work is unfinished.
  final var currentEngine: WorkEngine? {
    lock.withLock { engine }
  }

  // MARK: - Running

  /// Runs the body if the work is still ready. Called by whoever holds a slot of the queue for it.
  ///
  /// Not generic: the body was erased when the work was created, so the hot path needs no type metadata.
  final func execute() -> Execution {
    lock.lock()
    guard case .ready = phase, let body else {
      lock.unlock()
      return .skipped
    }
    phase = .running
    self.body = nil
    let trace = engine?.trace
    switch body {
    case .sync(let run):
      lock.unlock()
      let start = trace?.now()
      let saved = WorkContext.bind(self)
      let termination = run(self)
      WorkContext.restore(saved)
      if let trace, let start {
        trace.record(self, start: start, thread: currentThreadID(), termination: termination)
      }
      let completed: Completed? = lock.withLock {
        guard phase.termination == nil else { return nil }
        return completeLocked(termination)
      }
      guard let completed else { preconditionFailure("Spindle: running work completed twice") }
      return .completed(completed)
    case .async(let run):
      let priority = engine?.taskPriority
      lock.unlock()
      let task = Task(priority: priority) { [self] in
        trace?.recordStart(self)
        let termination = await WorkContext.$taskWork.withValue(self) { await run(self) }
        finishDetached(termination)
      }
      let cancelNow: Bool = lock.withLock {
        guard case .running = phase else { return false }
        runningTask = task
        return cancelRequested
      }
      if cancelNow { task.cancel() }
      return .detached
    case .callback(let run):
      inBody = true
      lock.unlock()
      trace?.recordStart(self)
      let saved = WorkContext.bind(self)
      // Tasks the body starts inherit the binding, so misuse from the body's asynchronous half is detected.
      WorkContext.$taskWork.withValue(self) { run(self) }
      WorkContext.restore(saved)
      let completed: Completed? = lock.withLock {
        inBody = false
        guard let termination = inlineTermination, phase.termination == nil else { return nil }
        inlineTermination = nil
        return completeLocked(termination)
      }
      guard let completed else { return .detached }
      trace?.recordEnd(self, termination: completed.termination)
      return .completed(completed)
    }
  }

  /// Completes an `async` or callback body (its value, if any, is already stored); it held its slot until now.
  final func finishDetached(_ termination: Termination) {
    let completed: Completed? = lock.withLock {
      guard phase.termination == nil else { return nil }
      if inBody {
        // A callback body called `finish` before returning: its worker completes the work.
        inlineTermination = termination
        return nil
      }
      return completeLocked(termination)
    }
    guard let completed else { return }
    completed.engine?.retire(self, completed: completed, releasingSlot: true)
  }

  // MARK: - Engine

  /// Moves the work to a final phase and takes what must happen after the lock is released.
  /// Call with `lock` held and the phase not yet final.
  final func completeLocked(_ termination: Termination) -> Completed {
    phase = Phase(termination)
    runningTask = nil
    let completed = Completed(
      termination: termination,
      engine: engine,
      dependents: dependents,
      handlers: completionHandlers,
      releasedBody: body
    )
    engine = nil
    body = nil
    dependents = SmallList()
    completionHandlers = SmallList()
    cancelHandlers = SmallList()
    return completed
  }

  /// Completes pending or ready work without running it (a failed or cancelled dependency).
  final func completeWithoutRunning(_ termination: Termination) -> Completed? {
    lock.withLock {
      switch phase {
      case .pending, .ready: completeLocked(termination)
      case .running, .finished, .failed, .cancelled: nil
      }
    }
  }

  /// Records `dependent` to be told when this work completes; returns the termination instead if it already has.
  final func addDependent(_ dependent: AnyWork) -> Termination? {
    lock.withLock {
      if let termination = phase.termination { return termination }
      dependents.append(dependent)
      return nil
    }
  }

  /// Counts down one resolved dependency; the engine to queue the work on when that was the last one and the
  /// work is now ready, `nil` otherwise (more to wait for, or completed — cancelled — in the meantime).
  final func dependencyResolved() -> WorkEngine? {
    guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return nil }
    return lock.withLock {
      guard case .pending = phase else { return nil }
      phase = .ready
      return engine
    }
  }

  /// Runs `handler` once the work is complete: now (on this thread) if it already is.
  final func whenCompleteErased(_ handler: @escaping @Sendable () -> Void) {
    let runNow: Bool = lock.withLock {
      if phase.termination != nil { return true }
      completionHandlers.append(handler)
      return false
    }
    if runNow { handler() }
  }
}

/// The internal life cycle of a work item (see ``WorkState`` for the public view).
enum Phase {
  case pending
  case ready
  case running
  case finished
  case failed(any Error)
  case cancelled

  init(_ termination: Termination) {
    switch termination {
    case .finished: self = .finished
    case .failed(let error): self = .failed(error)
    case .cancelled: self = .cancelled
    }
  }

  var termination: Termination? {
    switch self {
    case .pending, .ready, .running: nil
    case .finished: .finished
    case .failed(let error): .failed(error)
    case .cancelled: .cancelled
    }
  }

  var isStarted: Bool {
    switch self {
    case .pending, .ready: false
    case .running, .finished, .failed, .cancelled: true
    }
  }

  var state: WorkState {
    switch self {
    case .pending: .pending
    case .ready: .ready
    case .running: .running
    case .finished: .finished
    case .failed: .failed
    case .cancelled: .cancelled
    }
  }
}

/// How a work item ended, without its value.
enum Termination: Sendable {
  case finished
  case failed(any Error)
  case cancelled

  var isSuccess: Bool {
    if case .finished = self { return true }
    return false
  }
}

/// What a completed item hands to the engine: whom to notify and what to run, outside any lock.
struct Completed {
  var termination: Termination
  /// The engine that ran (or would have run) the work; the item no longer holds it.
  var engine: WorkEngine?
  var dependents: SmallList<AnyWork>
  var handlers: SmallList<@Sendable () -> Void>
  /// The body of work that completed without running, released with this value outside the lock.
  var releasedBody: ErasedBody?
}

/// What happened when the engine asked an item to run.
enum Execution {
  /// The item was no longer ready (cancelled while waiting); its slot is free for the next item.
  case skipped
  /// An `async` or callback body took over the slot; it hands the slot on when it completes.
  case detached
  /// The item completed on this thread (a synchronous body, or a callback body that called `finish` before
  /// returning); the slot is free for the next item.
  case completed(Completed)
}

/// A body with its value type erased: it runs the user's closure, stores the value in the work item and says
/// how the work ended. Created by `Work<Value>`, run by `AnyWork.execute()`.
enum ErasedBody: Sendable {
  case sync(@Sendable (AnyWork) -> Termination)
  case async(@Sendable (AnyWork) async -> Termination)
  case callback(@Sendable (AnyWork) -> Void)
}

extension Termination {
  /// How a body that threw `error` ends: cancelled for `CancellationError`, failed otherwise.
  init(error: any Error) {
    self = error is CancellationError ? .cancelled : .failed(error)
  }
}
