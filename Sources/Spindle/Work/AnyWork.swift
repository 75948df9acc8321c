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
// @unchecked Sendable: `name`, `isAsync` and `acceptsFailedDependencies` are immutable; `rawPriority`
// is atomic and changes only under the engine's lock;
// the fields marked "lock" are only touched while holding `lock`; `remaining` is atomic; the `registry` fields
// belong to the owning engine and are only touched while holding that engine's state lock.
public class AnyWork: @unchecked Sendable {
  /// The priority of the work among the ready items of its queue; settable until the work starts.
  ///
  /// Raising it moves ready work ahead of the items of lower priority that have not started; once the work
  /// runs (or completed), setting it has no effect.
  ///
  /// ```swift
  /// thumbnail.priority = .veryHigh   // it scrolled into view
  /// ```
  public var priority: WorkPriority {
    get { WorkPriority(rawValue: Int(rawPriority.load(ordering: .relaxed)))! }
    set { reprioritize(newValue) }
  }

  /// The priority's raw value; written only under the engine's lock, before the work starts. One byte: it shares
  /// its word with the flags and the item's lock.
  let rawPriority: Atomic<UInt8>

  /// Whether the body is `async` (it runs in a task of its own, started from whichever thread frees a slot).
  let isAsync: Bool

  /// Whether the body receives `Result` inputs (and so runs even when a dependency failed or was cancelled).
  let acceptsFailedDependencies: Bool

  let lock = SpinLock()

  /// Dependencies not yet finished, plus one while the work is still being wired up.
  let remaining: Atomic<Int>

  // The mutable fields below are guarded by `lock` (or the engine's lock, as marked). The runtime's dynamic
  // exclusivity checks on them (`swift_beginAccess` on every access, a few per cent of an empty item's cost under
  // `perf`) would only repeat what those locks guarantee, so they are off; ThreadSanitizer still checks them.

  // lock. The engine that runs the work; cleared when the work completes, so finished work keeps no queue alive.
  // Unretained: an engine keeps itself alive while it has unfinished work (`EngineState.keepAlive`), and work is
  // unfinished from its admission (before which its creator holds the queue) until its engine retires it, after
  // this field was cleared. A strong reference here was a retain by the adding thread and a release by the worker
  // on every item, both on the engine's first line of memory, which every adding thread reads.
  @exclusivity(unchecked) var engine: Unmanaged<WorkEngine>?
  // Declared in an order that leaves little padding between them (Swift lays the fields out as declared): the one-byte
  // flags fill the bytes after `phase`, and the callback flags those after `dependents`' tag; with `rawPriority` one
  // byte wide, an `add(after:)` item is 248 bytes (a 256-byte block of `malloc`'s, four cache lines; the two flags
  // after the registry's links took it from 240, within the same block).
  // lock (taken out, and so released, when the body starts or the work ends without running)
  @exclusivity(unchecked) var body: ErasedBody?
  // lock
  @exclusivity(unchecked) var phase: Phase
  // lock
  @exclusivity(unchecked) var cancelRequested = false
  // lock: whether `extras` may hold cancellation handlers (set when one is added), so that completing work needs no
  // look at `extras` otherwise
  @exclusivity(unchecked) var mayHaveCancelHandlers = false
  // lock: whether the engine has retired the ended work (its queue no longer counts it as unfinished)
  @exclusivity(unchecked) var isRetired = false
  // Set once before the work is visible to other threads: a barrier keeps ordering its queue when cancelled.
  @exclusivity(unchecked) var isBarrier = false
  // Set once before the work is visible to other threads: the work's deinit only frees memory (its value type is
  // plain, it has no extras), so a worker may hand its last reference back to the adding thread (see
  // `WorkEngine.handBack`) once it finished successfully.
  @exclusivity(unchecked) var freesOnlyMemory = false
  // lock: the error of work that failed or was cancelled with a reason (`phase` is `.failed` or
  // `.cancelledWithReason`); set once, when the work completes
  @exclusivity(unchecked) var failure: (any Error)?
  // lock
  @exclusivity(unchecked) var dependents = SmallList<AnyWork>()
  // lock: whether a callback body's `finish` was called (or dropped)
  @exclusivity(unchecked) var finishCalled = false
  // lock: a callback body is on the stack of the worker that started it
  @exclusivity(unchecked) var inBody = false
  // lock: a thread is delivering this item's events to its observers (outside the lock); the other threads' events of
  // the item wait in `extras` for it (see `claimEventDeliveryLocked`). Only ever set while the queue is observed. In
  // the padding after `inBody`: no item is larger for it.
  @exclusivity(unchecked) var deliveringEvents = false
  // lock
  @exclusivity(unchecked) var completionHandlers = SmallList<@Sendable () -> Void>()
  // lock: when the body (its latest attempt) started, on the coarse clock; for the stuck-queue report
  @exclusivity(unchecked) var startedAt: UInt64 = 0
  // The dependency whose value an `add(after:)` body receives, held here instead of in the body's closure: set before
  // the work is admitted, read by the body on the thread that runs it, and taken by that thread once the body has run
  // for the last time, before the work completes (`letGoOfValueSource`, which may hand it back: see
  // `WorkEngine.handBack`), or dropped when the work ends without running. While `dependencyList` is `.valueSource`
  // (the work waits), `dependencies` also reads it, under `lock`: the work becomes ready under that lock before any
  // thread takes it.
  @exclusivity(unchecked) @usableFromInline var valueSource: AnyWork?

  /// ``valueSource`` (which must be set), read without a retain: for the thread that runs the body. From the moment the
  /// work is ready until that thread lets go of the source, it is the only one that touches the field (while the work
  /// waits, `dependencies` and the queue's report read it under the lock), and the field keeps the source alive.
  @inlinable
  final var unretainedValueSource: Unmanaged<AnyWork> {
    withUnsafeMutablePointer(to: &valueSource) { field in
      field.withMemoryRebound(to: Unmanaged<AnyWork>?.self, capacity: 1) { $0.pointee.unsafelyUnwrapped }
    }
  }
  // lock: what the work waits for, until it is ready
  @exclusivity(unchecked) var dependencyList: DependencyList
  // lock: the state of the rarely used features (delay, timeout, retry, condition, cancel reason, cancellation
  // handlers); nil for most
  @exclusivity(unchecked) var extras: WorkExtras?

  // The owning engine's state lock.
  @exclusivity(unchecked) var registryNext: AnyWork?
  // The owning engine's state lock. Not a strong reference: the previous item is held by the link before it (its
  // `registryNext`, or the engine's `registryHead`) for as long as it is in the registry, and it leaves the registry
  // (under that lock) only after it updated this field of its successor. Unmanaged, so that following it costs no
  // retain and release.
  // Before the work enters the registry, the link of the engine's incoming list (`WorkEngine.admit`): written by
  // the adding thread before the compare-exchange that publishes the work, read under the engine's lock by the
  // thread whose exchange took the list.
  // Reused, once the work has left the registry, as the link of the engine's hand-back list (`WorkEngine.handBack`):
  // written by the one worker that holds the only reference, before the releasing compare-exchange that publishes
  // the work; read by the thread whose acquiring exchange took the list.
  @exclusivity(unchecked) var registryPrevious: Unmanaged<AnyWork>?
  // Set once, by the adding thread, before the work goes on its engine's incoming list: whether it was ready when
  // added (the engine queues it when it takes the list; see `WorkEngine.withState`). On the registry's line of memory,
  // which is all that taking the list touches of an item: the worker that takes it leaves alone the lines that the
  // adding thread writes next (the item's lock and dependents, when it adds the item's dependent).
  @exclusivity(unchecked) var admittedReady = false
  // The owning engine's state lock: whether the engine took the work off its incoming list (and counts it). A worker's
  // retirement that makes a dependent ready takes the list only when that dependent is not registered yet (see
  // `WorkEngine.withStateOnRetirement`).
  @exclusivity(unchecked) var isRegistered = false

  // Below: what a plain synchronous item's worker does not touch (names for messages, the state of `async` and
  // callback bodies). Declared last, so that the fields every item's worker reads and
  // writes share fewer cache lines: the worker takes each item's lines from the adding thread's cache.

  /// The name given when the work was added, used in traces and messages.
  public let name: String?
  // lock
  @exclusivity(unchecked) var runningTask: Task<Void, Never>?
  // lock: how a callback body that called `finish` before returning ended (the worker completes it)
  @exclusivity(unchecked) var inlineTermination: Termination?

  // The parameters are consumed and moved into the fields (`consume`): read first what is needed of them, so that
  // each is stored without a copy (a copy is a retain here and a release when the parameter dies).
  // Required: `WorkQueue.makeWork` creates items through a metatype that may be a subclass of `Work` (`WorkAfter`).
  required init(
    engine: borrowing WorkEngine,
    name: consuming String?,
    priority: WorkPriority,
    dependencyCount: Int,
    acceptsFailedDependencies: Bool,
    dependencies: consuming DependencyList,
    extras: consuming WorkExtras?,
    body: consuming ErasedBody
  ) {
    if case .async = body { isAsync = true } else { isAsync = false }
    self.engine = Unmanaged.passUnretained(engine)
    self.dependencyList = consume dependencies
    self.extras = consume extras
    self.body = consume body
    self.name = consume name
    self.rawPriority = Atomic(UInt8(priority.rawValue))
    self.acceptsFailedDependencies = acceptsFailedDependencies
    self.remaining = Atomic(dependencyCount + 1)
    self.phase = .pending
  }

  /// Records the first call of the running attempt's `finish` (through its `token`); `false` for any later one, and
  /// for a `finish` of an earlier attempt (the caller then reports it with ``reportRepeatedFinish(queue:)`` once
  /// unlocked). Call with `lock` held.
  final func claimFinishLocked(_ token: FinishToken) -> Bool {
    guard !finishCalled, token.attempt == attemptLocked else { return false }
    finishCalled = true
    token.wasCalled.store(true, ordering: .relaxed)
    return true
  }

  /// Records how a callback body that is still on its worker's stack ended (`finish` called before the body returned),
  /// for that worker to complete the work; `false` when the body has returned (the caller then completes the work with
  /// ``finishDetached(_:)``). Call with `lock` held, from the call of `finish` that claimed it.
  final func recordInlineFinishLocked(_ termination: @autoclosure () -> Termination) -> Bool {
    guard inBody else { return false }
    if !phase.isFinal { inlineTermination = termination() }
    return true
  }

  /// The number of the running (or last) attempt. Call with `lock` held.
  final var attemptLocked: Int { extras?.attempts ?? 1 }

  /// Reports a second call of `finish` (misuse; the call is ignored) on the queue named `queue` (the work may have
  /// completed, and left its queue). Call without the lock: handlers are user code.
  final func reportRepeatedFinish(queue: String) {
    reportMisuse(
      "Spindle: finish called more than once for work '\(name ?? "unnamed")' on WorkQueue '\(queue)'; "
        + "the extra call is ignored"
    )
  }

  /// The last copy of a callback body's `finish` (`token`) was released: if it was never called, the work fails
  /// with ``WorkFinishDroppedError`` instead of holding its slot forever. A `finish` of an attempt that already ended
  /// (the work is being retried) changes nothing.
  final func finishDropped(_ token: FinishToken) {
    guard lock.withLock({ claimFinishLocked(token) }) else { return }
    finishDetached(droppedFinish(token))
  }

  /// How work ends whose `finish` (`token`) was released uncalled.
  final func droppedFinish(_ token: FinishToken) -> Termination {
    .failed(WorkFinishDroppedError(work: name, queue: token.queueName))
  }

  /// Releases the typed body that `Work` stores for plain synchronous and callback work, once the work ended without
  /// running it (called outside every lock, by the engine that retires the work; nothing else touches that body any
  /// more).
  func dropStoredBody() {
    valueSource = nil
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
  ///   `CancellationError`; otherwise it keeps the body's outcome. Observers get one
  ///   ``WorkEvent/Kind/cancelRequested(reason:)``, after the work's `started` event and before its `finished`.
  /// - Finished work is not affected. Calling `cancel()` more than once is harmless.
  public func cancel() {
    cancel(reason: nil)
  }

  /// Cancels the work, as ``cancel()`` does, with a reason that its error and its observers show.
  ///
  /// Work cancelled before it ran fails with a ``WorkCancellationError`` carrying `reason` (it still counts
  /// as ``WorkState/cancelled``, and its dependents end cancelled too).
  ///
  /// ```swift
  /// thumbnail.cancel(reason: "scrolled away")
  /// ```
  public func cancel(reason: String) {
    cancel(reason: Optional(reason))
  }

  private func cancel(reason: String?) {
    defer { cancelMembers() }
    enum Action: ~Copyable {
      case none
      case completed(Completed)
      /// The task and handlers to cancel, and the engine when this thread delivers the item's events now.
      case running(Task<Void, Never>?, SmallList<@Sendable () -> Void>, WorkEngine?)
    }
    let action: Action = lock.withLock {
      switch phase {
      case .pending where isBarrier:
        // A barrier still orders the queue: work added before it may still run, so it ends only once that work has
        // finished, skipping its body (see `addBarrier`). With a reason, it ends with that reason, as running work does.
        // A ready barrier has nothing left before it: it ends now, as other ready work does (marked and left in place
        // instead, `cancelAll` took it out of the ready queue and it never ran).
        if let reason {
          if extras == nil { extras = WorkExtras(options: WorkOptions()) }
          extras?.cancelReason = reason
        }
        cancelRequested = true
        return .none
      case .pending, .ready:
        if let reason {
          return .completed(completeLocked(.failed(WorkCancellationError(work: name, reason: reason))))
        }
        return .completed(completeLocked(.cancelled))
      case .running:
        guard !cancelRequested else { return .none }
        if let reason {
          if extras == nil { extras = WorkExtras(options: WorkOptions()) }
          extras?.cancelReason = reason
        }
        cancelRequested = true
        // The event takes its place among the item's events here, under the lock that marked the work cancelled,
        // before it can complete: when the worker is still delivering `willStart` and `started`, or another thread an
        // earlier event, this one is left to that thread, which delivers it next; otherwise this thread delivers it,
        // and then whatever was left to it meanwhile (a `finished`, when the body ended at once). The engine is taken
        // here, while the work holds it: once the work completed, it no longer does.
        var deliverer: WorkEngine? = nil
        if let engine, engine._withUnsafeGuaranteedRef({ $0.isObserved.load(ordering: .relaxed) }),
          claimEventDeliveryLocked(.cancelRequested(reason: reason))
        {
          deliverer = engine.takeUnretainedValue()
        }
        return .running(runningTask, extras?.takeCancelHandlers() ?? SmallList(), deliverer)
      case .finished, .failed, .cancelled, .cancelledWithReason:
        return .none
      }
    }
    switch consume action {
    case .none:
      break
    case .running(let task, let handlers, let deliverer):
      if let deliverer {
        deliverer.deliver(.cancelRequested(reason: reason), for: self)
        deliverer.deliverHeldEvents(of: self)
      }
      task?.cancel()
      for handler in handlers { handler() }
    case .completed(let completed):
      completed.retire(self)
    }
  }

  /// Whether the body has been asked to stop (or the work was cancelled before it ran).
  var isCancellationRequested: Bool {
    lock.withLock {
      switch phase {
      case .cancelled, .cancelledWithReason: return true
      default: return cancelRequested
      }
    }
  }

  /// Runs `handler` once if the running work is cancelled: now if it already was, never if it completes first.
  final func onCancel(_ handler: @escaping @Sendable () -> Void) {
    let runNow: Bool = lock.withLock {
      switch phase {
      case .running:
        if cancelRequested { return true }
        // Kept with the rarely used state: an item that never gets a handler has no field for them.
        if extras == nil { extras = WorkExtras(options: WorkOptions()) }
        extras.unsafelyUnwrapped.cancelHandlers.append(handler)
        mayHaveCancelHandlers = true
        return false
      case .cancelled, .cancelledWithReason:
        return true
      case .pending, .ready, .finished, .failed:
        return false
      }
    }
    if runNow { handler() }
  }

  private func reprioritize(_ newValue: WorkPriority) {
    guard let engine = lock.withLock({ phase.isStarted ? nil : engine?.takeUnretainedValue() }) else { return }
    engine.withState { state in
      let old = Int(rawPriority.load(ordering: .relaxed))
      guard old != newValue.rawValue else { return }
      let wasReady = state.scheduler.removeReady(priority: old) { $0 === self }
      rawPriority.store(UInt8(newValue.rawValue), ordering: .relaxed)
      if wasReady { state.scheduler.push(self, priority: newValue.rawValue) }
    }
  }

  /// The engine while the work is unfinished.
  final var currentEngine: WorkEngine? {
    lock.withLock { engine?.takeUnretainedValue() }
  }

  /// The name of the queue that runs the work, while the work is unfinished ("" once it completed).
  ///
  /// Read from the engine, not kept in the item: a second string in every item was a copy made by the adding thread
  /// and a release by the thread that frees the item, and 16 bytes on the lines the worker reads. What needs the name
  /// after the work completed keeps its own copy (a callback body's `finish` handle, the trace's record).
  final var queueName: String {
    lock.withLock { queueNameLocked }
  }

  /// ``queueName``; call with `lock` held.
  final var queueNameLocked: String {
    // Alive: an engine holds itself while it has unfinished work, and the field is cleared when this work completes.
    engine.map { $0.takeUnretainedValue().name } ?? ""
  }

  // MARK: - Running

  /// Delivers the start events of work that has just become running, on an observed queue; called and returns with
  /// `lock` held. Out of line: inlined into `execute`, the look-ups of the held events' types (a tuple with
  /// `ContinuousClock.Instant`) were hoisted out of the `isObserved` test and ran on every item (about 40 instructions,
  /// under callgrind).
  @inline(never)
  private func emitStartLocked(on owner: WorkEngine) {
    let attempt = extras?.attempts ?? 1
    // The start events take their place among the item's events here, under the lock that made the work running: a
    // `cancel()` from now on finds this thread delivering them, and leaves its event to it (see `emit`).
    let delivers = claimEventDeliveryLocked(.willStart(attempt: attempt))
    // Another thread still delivers an event of the item (none is known to): both go to it, in order.
    if !delivers { _ = claimEventDeliveryLocked(.started(attempt: attempt)) }
    lock.unlock()
    if delivers {
      owner.deliver(.willStart(attempt: attempt), for: self)
      owner.deliver(.started(attempt: attempt), for: self)
      owner.deliverHeldEvents(of: self)
    }
    lock.lock()
  }

  /// Runs the body if the work is still ready. Called by whoever holds a slot of the queue for it.
  ///
  /// Not generic: the body was erased when the work was created, so the hot path needs no type metadata.
  ///
  /// `owner` is the engine that took the item from its scheduler: the item's own `engine` (an item is queued and
  /// started only by the engine it holds, which it drops only when it completes, and ready work has not completed).
  /// The caller holds it for the whole call, so this reads nothing of `engine` (a load, a retain and a release).
  final func execute(
    on owner: WorkEngine,
    handingBackInto batch: inout HandBackBatch,
    cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
    spareToken: inout FinishToken?
  ) -> Execution {
    lock.lock()
    guard case .ready = phase else {
      lock.unlock()
      return .skipped
    }
    if let extras, extras.options.exclusive != nil, !extras.holdsKey {
      return askForKeyLocked(extras, on: owner, handingBackInto: &batch, cell: cell, spareToken: &spareToken)
    }
    // Moved out, not copied and then cleared (a retain and a release of the closure).
    guard let body = self.body.take() else {
      lock.unlock()
      return .skipped
    }
    assert(owner === engine?.takeUnretainedValue(), "Spindle: work started by an engine that is not its own")
    phase = .running
    startedAt = Platform.coarseUptimeNanoseconds
    let trace = owner.trace
    if owner.isObserved.load(ordering: .relaxed) { emitStartLocked(on: owner) }
    if let extras {
      // The slow path: conditions, timeouts and retries. Plain work never gets here.
      if extras.options.retry != nil { extras.retryBody = body }
      lock.unlock()
      let execution = executeWithExtras(body, extras, trace, cell: cell, spareToken: &spareToken)
      // A borrowing `switch`: `Execution` is not copyable, and `if case` would consume it.
      switch execution {
      case .completed: if valueSource != nil { letGoOfValueSource(on: owner, batch: &batch) }
      default: break
      }
      return execution
    }
    lock.unlock()
    // Only an `async` body's task needs the queue's priority, so it is asked for only then: `TaskPriority` comes from a
    // resilient module, and passing a `TaskPriority?` went through its value witnesses on every item (about 50 of an
    // independent item's 3,500 instructions, under callgrind).
    // `consume`: the body moves into the call (without it, the closure was retained for the call and released after).
    // The closure captures the engine unretained (the caller holds it for the call): capturing `owner` itself cost a
    // retain and a release of the engine per item, on the line of memory that holds its reference count.
    let unretainedOwner = Unmanaged.passUnretained(owner)
    let ran = run(
      consume body, trace: trace, priority: { unretainedOwner.takeUnretainedValue().taskPriority }, cell: cell,
      spareToken: &spareToken)
    switch consume ran {
    case .detached:
      return .detached
    case .ended(let termination):
      if valueSource != nil { letGoOfValueSource(on: owner, batch: &batch) }
      // Not through an optional result of `withLock`: unwrapping a `Completed?` cost about 25 instructions per item.
      lock.lock()
      guard !phase.isFinal else {
        lock.unlock()
        preconditionFailure("Spindle: running work completed twice")
      }
      // A body that stopped for `cancel(reason:)` ends with the reason, as an `async` or callback body does (their
      // ending goes through `settleLocked`): `extras` holds it, made by that call. Only a cancelled ending looks.
      let completed: Completed
      if case .cancelled = termination, let reason = extras?.cancelReason {
        completed = completeLocked(.failed(WorkCancellationError(work: name, reason: reason)))
      } else {
        completed = completeLocked(termination)
      }
      lock.unlock()
      return .completed(completed)
    }
  }

  /// Lets go of ``valueSource`` once the body that read it has run for the last time, before the work completes (so
  /// before its completion handlers run and its waiters wake), as when the body's closure held it: hands it back
  /// to the adding thread when that is possible (see `WorkEngine.handBack`), releases it here otherwise. Called only
  /// by the thread that ran the body; nothing else touches `valueSource` from the moment the work became ready until
  /// it has completed.
  private func letGoOfValueSource(on owner: WorkEngine, batch: inout HandBackBatch) {
    var source = valueSource.take()
    // The body ran, so the source finished successfully (`add(after:)` does not run after a failed dependency).
    if source?.freesOnlyMemory == true { owner.handBack(&source, into: &batch) }
  }

  /// How a body that was started went on.
  private enum BodyRun {
    /// It ended on this thread (a synchronous body, or a callback body that called `finish` before returning).
    case ended(Termination)
    /// An `async` body's task or a callback body's pending `finish` holds the slot now.
    case detached
  }

  /// Runs a body on this thread (synchronous, callback) or starts its task (`async`). Called without the lock.
  ///
  /// `cell` is this thread's cell of ``threadWork``, where ``WorkContext`` finds the running item; `priority` gives the
  /// priority of an `async` body's task (called only for one). `spareToken` is the calling worker's `finish` token kept
  /// from an earlier callback body of the same queue, if any (see ``FinishToken``): a callback body takes it (or gets a
  /// new one) and gives it back when nothing else kept it.
  private func run(
    _ body: consuming ErasedBody,
    trace: WorkTrace?,
    priority: () -> TaskPriority?,
    cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
    spareToken: inout FinishToken?
  ) -> BodyRun {
    switch consume body {
    case .sync(let run):
      let start = trace?.now()
      let saved = WorkContext.bind(self, cell: cell)
      let termination = run(self)
      WorkContext.restore(saved, cell: cell)
      if let trace, let start {
        trace.record(self, start: start, thread: currentThreadID(), termination: termination)
      }
      return .ended(termination)
    case .async(let run):
      startTask(consume run, trace: trace, priority: priority)
      return .detached
    case .callback(let run):
      let (attempt, queue): (Int, String) = lock.withLock {
        inBody = true
        return (attemptLocked, queueNameLocked)
      }
      // The worker's spare token when it has one (made for an earlier body of this queue: the same queue name).
      var token: FinishToken
      if let spare = spareToken.take() {
        spare.arm(work: self, attempt: attempt)
        token = spare
      } else {
        token = FinishToken(work: self, attempt: attempt, queueName: queue)
      }
      trace?.recordStart(self)
      let saved = WorkContext.bind(self, cell: cell)
      // Tasks the body starts inherit the binding, so misuse from the body's asynchronous half is detected.
      WorkContext.$taskWork.withValue(self) { run(self, token) }
      WorkContext.restore(saved, cell: cell)
      let (inline, reusable): (Termination?, Bool) = lock.withLock {
        inBody = false
        defer { inlineTermination = nil }
        // Looked at under the lock: every other thread that used a copy of this `finish` took the lock after reading
        // the token (each use of `finish` does), and let go of its copy after that; if this frame's reference is the
        // only one now, those threads are done with the token, and their reads happened before this lock was taken.
        let unique = isKnownUniquelyReferenced(&token)
        if unique && !token.wasCalled.load(ordering: .relaxed) {
          // The body let go of every copy of `finish` without calling it (what the token's deinit reports when the
          // last copy goes elsewhere): the work fails instead of holding its slot forever.
          if claimFinishLocked(token), !phase.isFinal { inlineTermination = droppedFinish(token) }
        }
        return (!phase.isFinal ? inlineTermination : nil, unique)
      }
      if reusable {
        token.disarm()
        spareToken = consume token
      } else {
        // Let go of here, after the lock, on purpose: if another thread released its copy since the check, this is the
        // last reference, and the token's deinit takes the work's lock (to fail work whose `finish` was dropped).
        _ = consume token
      }
      guard let inline else { return .detached }
      trace?.recordEnd(self, queue: queue, termination: inline)
      return .ended(inline)
    }
  }

  /// Whether the caller runs in the task of this work's `async` body itself (``runningTask``): not in a task the
  /// body started (an unstructured task inherits the body's `WorkContext`, and may outlive it), nor in a child task of
  /// the body (`async let`, a task group), which is not told apart here.
  ///
  /// Compares the hash of the calling task with that of the body's `Task` handle: both hash the task's identity (a
  /// test holds the standard library to it), and two tasks alive at once share a hash with a chance of about 2⁻⁶⁴.
  /// Asked at no cost to the body: storing the body task's own identity when it starts (through
  /// `withUnsafeCurrentTask`) cost every `async` item about 550 instructions (5 %) under callgrind. The worker that
  /// started the body's task stores the handle a moment after creating it; a body asking before that waits for it.
  final var isBodyTask: Bool {
    guard let caller = withUnsafeCurrentTask(body: { $0?.hashValue }) else { return false }
    while true {
      let (task, starting): (Task<Void, Never>?, Bool) = lock.withLock {
        guard case .running = phase else { return (nil, false) }
        return (runningTask, runningTask == nil)
      }
      if let task { return task.hashValue == caller }
      if !starting { return false }
      Platform.yieldThread()
    }
  }

  /// Starts the task of an `async` body (see ``run(_:trace:priority:cell:spareToken:)``).
  ///
  /// Out of line: inlined into `run`, the look-up of `TaskPriority?`'s metadata (a resilient type, whose size is known
  /// only at run time) was hoisted to the top of `run` and made for every body, synchronous ones too (about 10
  /// instructions per item, under callgrind).
  @inline(never)
  private func startTask(
    _ run: @escaping @Sendable (AnyWork) async -> Termination,
    trace: WorkTrace?,
    priority: () -> TaskPriority?
  ) {
    // This attempt's number, read before its task exists: the attempt cannot end (and the next one start) before.
    let attempt = lock.withLock { attemptLocked }
    let task = Task(priority: priority()) { [self] in
      trace?.recordStart(self)
      let termination = await WorkContext.$taskWork.withValue(self) { await run(self) }
      finishDetached(termination)
    }
    #if DEBUG
      if let hook = Self.taskStartHookForTesting.withLock({ $0 }) { hook(self, attempt) }
    #endif
    let cancelNow: Bool = lock.withLock {
      // Stored only while this attempt runs: a body that failed at once can be retried, and its next attempt started
      // and given its own task, before this thread comes here (found in a ThreadSanitizer run, where an attempt's await
      // of its own work then waited for ever: the stale handle told the check that the awaiting task was not the
      // body's, and `cancel()` cancelled the ended task instead of the running one).
      guard case .running = phase, attemptLocked == attempt, runningTask == nil else { return false }
      runningTask = task
      return cancelRequested
    }
    if cancelNow { task.cancel() }
  }

  #if DEBUG
    /// Tests only (debug builds): called by the thread that starts an `async` body's task, with the work and the
    /// attempt, after the task is made and before its handle is stored (see `startTask`).
    static let taskStartHookForTesting = Locked<(@Sendable (AnyWork, Int) -> Void)?>(nil)
    /// Tests only (debug builds): the running `async` body's task handle.
    var runningTaskForTesting: Task<Void, Never>? { lock.withLock { runningTask } }
  #endif

  /// Completes an `async` or callback body (its value, if any, is already stored); it held its slot until now.
  final func finishDetached(_ termination: Termination) {
    let retryable = retryableError(termination)
    let settled: Settled? = lock.withLock {
      guard !phase.isFinal else { return nil }
      if inBody {
        // A callback body called `finish` before returning: its worker completes the work.
        inlineTermination = termination
        return nil
      }
      return settleLocked(termination, retryable: retryable)
    }
    switch consume settled {
    case nil:
      break
    case .completed(let completed):
      completed.retire(self, releasingSlot: true)
    case .retry(let engine, let wait, _, let retrying):
      if let retrying {
        engine.deliver(retrying, for: self)
        engine.deliverHeldEvents(of: self)
      }
      engine.retryLater(self, after: wait, releasingSlot: true)
    }
  }

  // MARK: - Conditions, timeouts, retries

  /// How an attempt ended once the rarely used features had their say.
  enum Settled: ~Copyable {
    case completed(Completed)
    /// Another attempt, after `wait`; the work is pending again and gives its slot back. The last attempt's
    /// cancellation handlers go with it, released once the lock is (see `dropCancelHandlers()`). The `retrying` event
    /// is there when this thread delivers the item's events now (then those left to it: see `deliverHeldEvents`).
    case retry(WorkEngine, Duration, SmallList<@Sendable () -> Void>, WorkEvent.Kind?)
  }

  /// Ready exclusive work that does not hold its key, about to start: asks for the key before the work is made
  /// running, and runs it (``execute(on:handingBackInto:cell:spareToken:)`` again) if it got it; otherwise it waits
  /// in the key's line, pending, and gives its slot back (`.parked`). Called with `lock` held; returns without it.
  ///
  /// So exclusive work is never running without its key: it starts (and its observers see `willStart` and `started`)
  /// once per attempt, when it has the key, and a `cancel()` meanwhile finds it pending and completes it at once.
  @inline(never)
  private func askForKeyLocked(
    _ extras: WorkExtras,
    on owner: WorkEngine,
    handingBackInto batch: inout HandBackBatch,
    cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
    spareToken: inout FinishToken?
  ) -> Execution {
    // Back to pending first, with one dependency left (the key), so that a release racing this call finds the item
    // in line and pending, and makes it ready by resolving that dependency.
    phase = .pending
    remaining.store(1, ordering: .releasing)
    lock.unlock()
    switch ExclusivityRegistry.shared.acquire(extras.options.exclusive.unsafelyUnwrapped, for: self) {
    case .acquired: break
    case .waiting: return .parked
    case .ended: return .skipped  // cancelled since: it completed, and the slot moves on
    }
    let resumed: Bool = lock.withLock {
      guard case .pending = phase else { return false }
      remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing)
      phase = .ready
      return true
    }
    // Cancelled after `acquire`: it completed, and its retirement releases the key it holds; the slot moves on.
    guard resumed else { return .skipped }
    return execute(on: owner, handingBackInto: &batch, cell: cell, spareToken: &spareToken)
  }

  /// Runs a body of work that has extras: its condition first, a timeout timer, and a retry on failure.
  private func executeWithExtras(
    _ body: ErasedBody,
    _ extras: WorkExtras,
    _ trace: WorkTrace?,
    cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
    spareToken: inout FinishToken?
  ) -> Execution {
    if let condition = extras.options.condition {
      let outcome: Termination?
      switch condition(self) {
      case .run: outcome = nil
      case .skip(let termination): outcome = termination
      case .fail(let error): outcome = .failed(error)
      }
      if let outcome {
        return .completed(lock.withLock { completeLocked(outcome) })
      }
    }
    if let timeout = extras.options.timeout {
      let attempt = lock.withLock { extras.attempts }
      DispatchQueue.global().asyncAfter(deadline: .now() + dispatchInterval(timeout)) { [weak self] in
        self?.timeOut(attempt: attempt)
      }
    }
    let priority = { [self] in
      extras.options.qos.map(taskPriority(for:)) ?? lock.withLock { engine?.takeUnretainedValue().taskPriority }
    }
    switch run(body, trace: trace, priority: priority, cell: cell, spareToken: &spareToken) {
    case .detached: return .detached
    case .ended(let termination): return settleOnWorker(termination)
    }
  }

  /// Settles an attempt that ended on the worker that ran it.
  private func settleOnWorker(_ termination: Termination) -> Execution {
    let retryable = retryableError(termination)
    let settled: Settled? = lock.withLock {
      guard !phase.isFinal else { return nil }
      return settleLocked(termination, retryable: retryable)
    }
    switch consume settled {
    case nil: preconditionFailure("Spindle: running work completed twice")
    case .completed(let completed): return .completed(completed)
    case .retry(let engine, let wait, _, let retrying):
      if let retrying {
        engine.deliver(retrying, for: self)
        engine.deliverHeldEvents(of: self)
      }
      return .retry(wait)
    }
  }

  /// Whether a failed attempt may be tried again, by the policy's own predicate (user code: no lock held).
  private func retryableError(_ termination: Termination) -> Bool {
    guard case .failed(let error) = termination, !(error is WorkCancellationError),
      let retry = lock.withLock({ extras?.options.retry })
    else { return false }
    return retry.shouldRetry(error)
  }

  /// Decides how an attempt ends: a timeout or a cancellation reason replaces its outcome; a retryable failure
  /// with attempts left makes the work pending again. Call with `lock` held and the phase not final.
  private func settleLocked(_ termination: Termination, retryable: Bool) -> Settled {
    guard let extras else { return .completed(completeLocked(termination)) }
    if extras.timedOut, let timeout = extras.options.timeout {
      return .completed(completeLocked(.failed(WorkTimeoutError(work: name, queue: queueNameLocked, timeout: timeout))))
    }
    if case .cancelled = termination, let reason = extras.cancelReason {
      return .completed(completeLocked(.failed(WorkCancellationError(work: name, reason: reason))))
    }
    if retryable, cancelRequested, let retry = extras.options.retry, extras.attempts < retry.maxAttempts {
      // Cancelled while an attempt ran that would have been retried: the retrying stops, as cancelled.
      let reason = extras.cancelReason
      return .completed(
        completeLocked(reason.map { .failed(WorkCancellationError(work: name, reason: $0)) } ?? .cancelled)
      )
    }
    if retryable, !cancelRequested, let retry = extras.options.retry, extras.attempts < retry.maxAttempts,
      let engine = engine?.takeUnretainedValue(), let retryBody = extras.retryBody
    {
      let wait = retry.wait(after: extras.attempts)
      extras.attempts += 1
      phase = .pending
      body = retryBody
      // The next attempt's body gets a `finish` of its own (its token carries the new attempt's number).
      finishCalled = false
      runningTask = nil
      remaining.store(1, ordering: .releasing)
      // The event takes its place among the item's events here, under the lock that made the work pending again, as
      // a cancel's does: a `cancel()` or a group's timeout can complete the pending work as soon as the lock is let
      // go, and its `finished` must come after this. (Emitted after the lock, `retrying` could follow `finished`: a
      // review staged it.)
      var retrying: WorkEvent.Kind? = nil
      if case .failed(let error) = termination, engine.isObserved.load(ordering: .relaxed) {
        let event = WorkEvent.Kind.retrying(attempt: extras.attempts, error: error)
        if claimEventDeliveryLocked(event) { retrying = event }
      }
      return .retry(engine, wait, extras.takeCancelHandlers(), retrying)
    }
    return .completed(completeLocked(termination))
  }

  /// The timeout of attempt `attempt` fired: if it still runs, it is cancelled and will fail with a timeout.
  private func timeOut(attempt: Int) {
    let action: (Task<Void, Never>?, SmallList<@Sendable () -> Void>)? = lock.withLock {
      guard case .running = phase, let extras, extras.attempts == attempt, !extras.timedOut else { return nil }
      extras.timedOut = true
      cancelRequested = true
      return (runningTask, extras.takeCancelHandlers())
    }
    guard let (task, handlers) = action else { return }
    task?.cancel()
    for handler in handlers { handler() }
  }

  /// The number of the attempt running now, or of the last one (1 without retries).
  public var attempts: Int {
    lock.withLock { extras?.attempts ?? 1 }
  }

  /// The work this work waits for (its typed and ordering-only dependencies) while it waits; empty once they are
  /// all done (the work no longer holds them then).
  ///
  /// ```swift
  /// let deps: [AnyWork] = report.dependencies
  /// print(deps.map { $0.name ?? "unnamed" })
  /// ```
  public var dependencies: [AnyWork] {
    lock.withLock { dependencyArrayLocked() }
  }

  /// The dependencies the work still waits for. Call with `lock` held: while the list is `.valueSource`, the work
  /// has not become ready, so its `valueSource` is not being taken by a worker.
  final func dependencyArrayLocked() -> [AnyWork] {
    // `valueSource` is read only while the list says it is the dependency (the work waits): once the work is ready,
    // the thread that runs its body reads the field without the lock (see `unretainedValueSource`).
    guard case .valueSource = dependencyList else { return dependencyList.array(valueSource: nil) }
    return dependencyList.array(valueSource: valueSource)
  }

  // MARK: - Engine

  /// How the work ended, or `nil` while it has not. Call with `lock` held.
  final var terminationLocked: Termination? {
    switch phase {
    case .pending, .ready, .running: nil
    case .finished: .finished
    case .failed, .cancelledWithReason: .failed(failure!)
    case .cancelled: .cancelled
    }
  }

  /// Moves the work to a final phase and takes what must happen after the lock is released.
  /// Call with `lock` held and the phase not yet final.
  final func completeLocked(_ termination: Termination) -> Completed {
    phase = Phase(termination)
    if case .failed(let error) = termination { failure = error }
    // Only an `async` body has a task.
    if isAsync { runningTask = nil }
    // Moved out with `take` and `swap`, not copied and then cleared: each copy of a reference is a retain that
    // the clearing releases again, on every item.
    var dependents = SmallList<AnyWork>()
    swap(&dependents, &self.dependents)
    var handlers = SmallList<@Sendable () -> Void>()
    swap(&handlers, &completionHandlers)
    // Only work that ends while it waits still has a list (work made ready gave it up then): assigned unconditionally,
    // the old value went through an outlined destroy call on every item.
    switch dependencyList {
    case .none: break
    case .valueSource: dependencyList = .none
    case .one, .many:
      // The list can hold the last reference to a dependency (finished, retired, dropped by its caller), whose deinit
      // runs user code (its value's, its handlers' captures): let go of with the completion's handlers, outside this
      // lock. Released here, such a deinit that cancelled another dependency of this work spun on this lock for ever.
      let released = dependencyList
      dependencyList = .none
      handlers.append { withExtendedLifetime(released) {} }
    }
    var releasedBody = body.take()
    var exclusiveKey: String? = nil
    if let extras {
      exclusiveKey = extras.options.exclusive
      // The retry policy's copy of the body (the same closures as `body`) may be their last reference: a callback
      // body whose `finish` another thread called after the body returned has no other. Released with the
      // completion, outside this lock, as the body is: released here, captures whose deinit reads the work spun on
      // this lock for ever. When the body itself is still here (the work ended without running), this copy is not
      // the last one.
      if let retryBody = extras.retryBody.take(), releasedBody == nil { releasedBody = consume retryBody }
    }
    // Built once, from its parts, at the end: a `var` of the whole value changed field by field was copied into the
    // result and then destroyed (through outlined value witnesses, about 190 instructions on every item).
    return Completed(
      termination: termination,
      engine: engine.take(),
      dependents: consume dependents,
      handlers: consume handlers,
      releasedBody: consume releasedBody,
      exclusiveKey: consume exclusiveKey
    )
  }

  /// Completes pending or ready work without running it (a failed or cancelled dependency).
  final func completeWithoutRunning(_ termination: Termination) -> Completed? {
    lock.withLock {
      switch phase {
      case .pending, .ready: completeLocked(termination)
      case .running, .finished, .failed, .cancelled, .cancelledWithReason: nil
      }
    }
  }

  /// Whether the work finished successfully (a snapshot, taken under its lock: once true, it stays true, and the
  /// value is visible to the caller).
  final var hasFinishedSuccessfully: Bool {
    lock.withLock {
      if case .finished = phase { return true }
      return false
    }
  }

  /// Records `dependent` to be told when this work completes; returns the termination instead if it already has.
  final func addDependent(_ dependent: AnyWork) -> Termination? {
    lock.withLock {
      if let termination = terminationLocked { return termination }
      dependents.append(dependent)
      return nil
    }
  }

  /// Counts down one resolved dependency; the engine to queue the work on when that was the last one and the
  /// work is now ready, `nil` otherwise (more to wait for, or completed — cancelled — in the meantime).
  final func dependencyResolved() -> WorkEngine? {
    switch dependencyResolved(on: nil) {
    case .waiting, .local: return nil
    case .elsewhere(let engine): return engine
    }
  }

  /// How counting down a resolved dependency left the work.
  enum Resolution {
    /// More to wait for, or completed (cancelled) in the meantime.
    case waiting
    /// Ready now, and its engine is the one the caller asked about (no reference to it is taken).
    case local
    /// Ready now, on this engine.
    case elsewhere(WorkEngine)
  }

  /// Counts down one resolved dependency, as ``dependencyResolved()``; when the work is now ready and its engine is
  /// `local`, says so without taking a reference to the engine (a retain and a release on every chained item).
  final func dependencyResolved(on local: WorkEngine?) -> Resolution {
    // Wrapping: one `lock xadd`. The trapping `subtract` is a compare-exchange loop (to check for overflow, which this
    // count, at most the number of dependencies plus two, cannot reach), and this line is the one a chain's adding
    // thread and its worker both write.
    guard remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return .waiting }
    var done = DependencyList.none
    let resolution: Resolution = lock.withLock {
      guard case .pending = phase else { return .waiting }
      phase = .ready
      swap(&done, &dependencyList)
      guard let engine else { return .waiting }
      if let local, engine.toOpaque() == Unmanaged.passUnretained(local).toOpaque() { return .local }
      return .elsewhere(engine.takeUnretainedValue())
    }
    // The dependencies (and whatever their release frees) go here, outside the item's lock. Taken apart case by case:
    // destroyed whole, the list went through an outlined call even when it held nothing (a chain's `.valueSource`).
    switch consume done {
    case .none, .valueSource: break
    case .one(let work): _ = consume work
    case .many(let works): _ = consume works
    }
    return resolution
  }

  /// ``dependencyResolved(on:)`` for work that no other thread can see yet (its creator has not published it): the
  /// same count-down and move to `.ready`, without a read-modify-write or the item's lock. Whether it is ready now.
  ///
  /// Why: the first locked instruction after an item's fields are written waits until those writes reach the cache,
  /// and the item's memory was last written by the worker that freed it, on the other core. On independent items
  /// `perf` put about a tenth of the whole run on this function's `lock xadd` and `lock cmpxchg`; without them the
  /// writes drain while the adding thread goes on, until it publishes the item.
  @inline(__always)
  final func dependencyResolvedUnpublished() -> Bool {
    let left = remaining.load(ordering: .relaxed) &- 1
    remaining.store(left, ordering: .relaxed)
    guard left == 0 else { return false }
    phase = .ready
    // What an unwired item's list can hold: nothing, or the one dependency that had finished before it was added.
    var done = DependencyList.none
    swap(&done, &dependencyList)
    switch consume done {
    case .none, .valueSource: break
    case .one(let work): _ = consume work
    case .many(let works): _ = consume works
    }
    return true
  }

  /// Runs `handler` once the work is complete and retired by its queue: now (on this thread) if it already is.
  final func whenCompleteErased(_ handler: @escaping @Sendable () -> Void) {
    // Work that ended but is not yet retired waits for the retire: a handler then always sees the work's queue
    // no longer counting it (its unfinished count and progress).
    let runNow: Bool = lock.withLock {
      if isRetired { return true }
      completionHandlers.append(handler)
      return false
    }
    if runNow { handler() }
  }

  /// Marks ended work retired by its engine (called once, after it left the queue's counts) and returns the
  /// completion handlers registered between its end and now, to run.
  final func markRetired() -> SmallList<@Sendable () -> Void> {
    let (late, dropHandlers): (SmallList<@Sendable () -> Void>, Bool) = lock.withLock {
      isRetired = true
      var late = SmallList<@Sendable () -> Void>()
      swap(&late, &completionHandlers)
      return (late, mayHaveCancelHandlers)
    }
    if dropHandlers { dropCancelHandlers() }
    return late
  }

  /// Releases the cancellation handlers of work that ended without being cancelled, once it is retired. Not when it
  /// completes, under the lock: a handler may hold the last copy of a callback body's `finish`, whose release takes
  /// this lock (a worker spun on it for ever). Nothing calls them any more: `cancel()` and timeouts look at the phase
  /// first. Out of line: most items have none. (Carried out in `Completed` instead, a field more made every item's
  /// completion copy that value through outlined functions: about 300 instructions per item under callgrind.)
  @inline(never)
  private func dropCancelHandlers() {
    let handlers = lock.withLock { extras?.takeCancelHandlers() }
    withExtendedLifetime(handlers) {}  // released here, after the lock
  }
}

/// The internal life cycle of a work item (see ``WorkState`` for the public view).
///
/// Plain cases: the error of failed work (or of work cancelled with a reason) is in ``AnyWork/failure``. With the
/// error as a payload, every change of phase (three or four per item) destroyed the old value through an outlined
/// function call, about 36 instructions of a chained item's worker under callgrind.
enum Phase {
  case pending
  case ready
  case running
  case finished
  case failed
  case cancelled
  case cancelledWithReason

  /// The phase of work that ended with `termination` (its error, if any, is kept beside it).
  init(_ termination: Termination) {
    switch termination {
    case .finished: self = .finished
    case .failed(let error): self = error is WorkCancellationError ? .cancelledWithReason : .failed
    case .cancelled: self = .cancelled
    }
  }

  /// Whether the work completed.
  var isFinal: Bool {
    switch self {
    case .pending, .ready, .running: false
    case .finished, .failed, .cancelled, .cancelledWithReason: true
    }
  }

  var isStarted: Bool {
    switch self {
    case .pending, .ready: false
    case .running, .finished, .failed, .cancelled, .cancelledWithReason: true
    }
  }

  var state: WorkState {
    switch self {
    case .pending: .pending
    case .ready: .ready
    case .running: .running
    case .finished: .finished
    case .failed: .failed
    case .cancelled, .cancelledWithReason: .cancelled
    }
  }
}

/// How a work item ended, without its value.
@usableFromInline
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
///
/// Not copyable: it only ever moves, from the item's lock to the retirement. A copy of its six fields went through
/// outlined value witnesses (a retain and a release of each reference), and the optimizer left one copy and destroy
/// on every item's path (about 190 instructions) until the compiler was told no copy is needed.
struct Completed: ~Copyable {
  /// Retires `item`, which this value completed, on the engine that ran it (nothing, if it had none); the value
  /// moves into the engine's retirement. The engine is held for the call: the retirement may end its unfinished
  /// work, and with it the reference it keeps to itself.
  consuming func retire(_ item: AnyWork, releasingSlot: Bool = false) {
    guard let engine = engine.take()?.takeUnretainedValue() else {
      // Work completes once, from a phase that is not final, and only until then does it hold its engine.
      assertionFailure("Spindle: a completion without the engine that ran its work")
      return
    }
    engine.retire(item, completed: self, releasingSlot: releasingSlot)
  }

  var termination: Termination
  /// The engine that ran (or would have run) the work; the item no longer refers to it. Unretained, as the item's
  /// was: the work is unfinished (its engine alive) until the engine retires it with this value.
  var engine: Unmanaged<WorkEngine>?
  var dependents: SmallList<AnyWork>
  var handlers: SmallList<@Sendable () -> Void>
  /// The body of work that completed without running, released with this value outside the lock.
  var releasedBody: ErasedBody?
  /// The exclusivity key to release (or whose line to leave).
  var exclusiveKey: String?
}

/// What happened when the engine asked an item to run.
enum Execution: ~Copyable {
  /// The item was no longer ready (cancelled while waiting); its slot is free for the next item.
  case skipped
  /// An `async` or callback body took over the slot; it hands the slot on when it completes.
  case detached
  /// The item completed on this thread (a synchronous body, or a callback body that called `finish` before
  /// returning); the slot is free for the next item.
  case completed(Completed)
  /// The attempt failed and the work will be tried again after the wait; it is pending, the slot is free.
  case retry(Duration)
  /// The work waits for its exclusivity key; it is pending, the slot is free.
  case parked
}

/// What a pending work item waits for. One dependency (an `add(after:)` chain, the hottest path) is held without
/// an array: building `[a]` for it cost every chained item a heap allocation.
enum DependencyList: Sendable {
  case none
  case one(AnyWork)
  case many([AnyWork])
  /// The one dependency is the work's ``AnyWork/valueSource`` (`add(after:)`), which holds it: no second reference
  /// (a retain by the adding thread and a release by the worker, on every chained item).
  case valueSource

  /// `first` (if any) followed by `more`.
  ///
  /// Borrowed: the common case of no dependency copies (retains) neither of them.
  init(first: borrowing AnyWork?, more: borrowing [AnyWork]) {
    if more.isEmpty {
      if let first = copy first { self = .one(first) } else { self = .none }
    } else if let first = copy first {
      self = .many([first] + more)
    } else {
      self = .many(copy more)
    }
  }

  /// The dependencies in order; `valueSource` is the value source of the work that holds the list.
  func array(valueSource: AnyWork?) -> [AnyWork] {
    switch self {
    case .none: []
    case .one(let work): [work]
    case .many(let works): works
    case .valueSource: valueSource.map { [$0] } ?? []
    }
  }
}

/// A body with its value type erased: it runs the user's closure, stores the value in the work item and says
/// how the work ended. Created by `Work<Value>`, run by `AnyWork.execute()`.
@usableFromInline
enum ErasedBody: Sendable {
  case sync(@Sendable (AnyWork) -> Termination)
  case async(@Sendable (AnyWork) async -> Termination)
  /// Given the work and the `finish` token of the attempt.
  case callback(@Sendable (AnyWork, FinishToken) -> Void)
}

extension Termination {
  /// How a body that threw `error` ends: cancelled for `CancellationError`, failed otherwise.
  @usableFromInline
  init(error: any Error) {
    switch error {
    case is CancellationError: self = .cancelled
    case let error as WorkCancellationError: self = .failed(error)
    default: self = .failed(error)
    }
  }
}

/// A `DispatchTimeInterval` for a `Duration` (nanosecond precision, saturating).
func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
  let (seconds, attoseconds) = duration.components
  let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
  guard !nanoseconds.overflow, seconds >= 0 else { return seconds < 0 ? .nanoseconds(0) : .never }
  return .nanoseconds(Int(nanoseconds.partialValue + attoseconds / 1_000_000_000))
}

/// The task priority that matches a quality of service.
func taskPriority(for qos: DispatchQoS.QoSClass) -> TaskPriority {
  switch qos {
  case .userInteractive, .userInitiated: .high
  case .utility: .utility
  case .background: .background
  default: .medium
  }
}
