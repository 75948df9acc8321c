import Dispatch

/// A unit of work added to a ``WorkQueue``, producing a typed value.
///
/// `Work` is a handle: keep it to read the ``value``, pass it as a dependency, observe it or cancel it.
/// Dropping the handle does not cancel the work. Once complete, the work keeps only its outcome: it releases
/// its body, its queue, the values of its dependencies and its links to dependents.
///
/// ```swift
/// let load = queue.add(name: "load") { try decode(path) }               // Work<Image>
/// let blur = queue.add(name: "blur", after: load) { image in tiltShift(image) }
/// blur.onCompletion(on: .main) { result in show(result) }
/// let image = try await blur.value
/// ```
// @unchecked Sendable: `valueWords`, `hasValue` and `valueNeedsDestroy` are guarded by `lock` (see AnyWork); the running body writes the
// value once before the work completes under that lock. Once the work finished, they never change again: a dependent's
// body, which runs after that completion, reads them without the lock (see `dependencyValue()`).
// Not final: plain work keeps its typed body in a subclass (`WorkSync`, `WorkCallback`, `WorkAfter`; the class is not
// `open`), so that each item carries one body field, and work with a wrapped body (`async`, or with options) none.
public class Work<Value: Sendable>: AnyWork, @unchecked Sendable {
  // The value of finished work. Guarded by `lock` (written without it only by the running body, before the work
  // completes under the lock); usable from inlinable code so that `runSync` specializes in the caller's module.
  //
  // Why not a `Value?` field: the class's deinit is generic, and destroying a `Value?` there looked up the metadata
  // of `Optional<Value>` in the runtime's cache for every item (a third of the instructions of an empty item's
  // deinit, under callgrind); an existential instead costs a dynamic cast at every read. So the value lives in
  // three words of raw storage (a value that does not fit, or needs more alignment, in a heap cell whose address
  // the first word holds), typed by `Value` alone: no lookup, no cast. `Void` is never stored.
  @exclusivity(unchecked) @usableFromInline final var valueWords: (UInt, UInt, UInt) = (0, 0, 0)
  // Whether `valueWords` holds a value (guarded as `valueWords`).
  @exclusivity(unchecked) @usableFromInline final var hasValue = false
  // Whether a kept value needs `destroyValue` when the work is freed (it is not a plain value kept inline); guarded as
  // `valueWords`. Set by `keep`, where `Value` is known (specialized, a constant), so that the deinit, which is not
  // specialized, reads one byte instead of asking the type's metadata through a call (about 20 instructions of every
  // item with a value, under callgrind). In the padding after `hasValue`: no item is larger for it.
  @exclusivity(unchecked) @usableFromInline final var valueNeedsDestroy = false

  deinit {
    if hasValue && valueNeedsDestroy { Self.destroyValue(in: self) }
  }

  // MARK: - Public API

  /// The outcome, or `nil` while the work is not complete.
  ///
  /// A cancelled item's result is `.failure(CancellationError())`; a failed item's is the error its body (or
  /// the failed dependency that ended it) threw.
  public final var result: Result<Value, any Error>? {
    lock.withLock { resultLocked }
  }

  /// The value, waiting for the work to complete.
  ///
  /// Throws the error the work failed with, or `CancellationError` when it was cancelled. If the task that
  /// awaits is cancelled, it stops waiting at once and throws `CancellationError`, but the work itself goes
  /// on: call ``AnyWork/cancel()`` to stop the work.
  ///
  /// ```swift
  /// let page = try await withTimeout(.seconds(1)) { try await fetch.value }   // the fetch keeps running
  /// ```
  ///
  /// An `async` body awaiting work is checked like ``wait()``: awaiting its own work, work that can only complete
  /// after the body's work (a dependent, work behind a barrier or key it holds, work whose body waits for it), or, on
  /// a queue whose every slot would then be held by bodies waiting for unstarted work of the queue, such work, throws
  /// ``WorkDeadlockError`` instead of hanging (an `async` body holds its slot while it awaits). Only the body's own
  /// task is checked: a task it started may outlive the body, and a child task of the body (`async let`, a task
  /// group) is not told apart from such a task.
  ///
  /// ```swift
  /// let serial = WorkQueue(maxConcurrent: 1)
  /// let later = serial.add { 2 }
  /// let first = serial.add(priority: .veryHigh) { () async throws -> Int in try await later.value + 1 }
  /// // first fails with WorkDeadlockError: `later` cannot start while `first` holds the only slot
  /// ```
  public final var value: Value {
    get async throws {
      if let result { return try result.get() }
      if let waiter = WorkEngine.holdingWaiter() {
        return try await checkedValue(by: waiter)
      }
      let waiter = OneShotContinuation<Value>()
      return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
          waiter.arm(continuation)
          whenComplete { waiter.resume(with: $0) }
        }
      } onCancel: {
        waiter.resume(with: .failure(CancellationError()))
      }
    }
  }

  /// ``value`` awaited by the body of running work (its `async` body's own task): recorded and checked like
  /// ``wait()``, so that a wait that could never end throws ``WorkDeadlockError``.
  private final func checkedValue(by waiter: AnyWork) async throws -> Value {
    // A cancelled task's await ends at once, unchecked (as an unchecked one does): it never hangs.
    try Task.checkCancellation()
    let continuation = OneShotContinuation<Value>()
    let (blocked, record) = try beginCheckedWait(by: waiter) { continuation.resume(with: $0) }
    defer { record?.end() }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation.arm($0) }
    } onCancel: {
      // The body no longer waits: its slot is not blocked by this wait any more, and the walk must not follow it
      // (the task may run again only much later).
      if continuation.resume(with: .failure(CancellationError())) {
        blocked.end()
        record?.end()
      }
    }
  }

  /// Blocks the calling thread until the work completes and returns its value.
  ///
  /// Throws like ``value``. Waiting that could never end throws ``WorkDeadlockError`` instead of hanging:
  /// a body waiting for its own work, a body of a serial queue waiting for unstarted work of the same queue,
  /// the last unblocked slot of a queue blocked waiting for work of that queue while the body in every other slot
  /// waits for work of that queue too (unstarted work then never gets a slot, and running work is one of the waiting
  /// bodies: A waits for running B, and B for unstarted C; work between retry attempts, or waiting for its exclusivity
  /// key, counts as unstarted), a body holding an exclusivity key waiting for work that needs the same key, or a body
  /// waiting for work that can only complete after the body's own work: work that depends on it (directly or through
  /// other work, on any queue), work added after a barrier that waits for it, work in the line of a key it holds, work
  /// whose body waits for it (on any queue: bodies of two queues waiting for each other are refused), unstarted work of
  /// a queue whose every slot is held by a body waiting for work behind the waiter — and so on.
  /// The check walks back from the awaited work along what it still waits
  /// for, so its cost grows with that (running work that does not wait ends the walk). A wait for work of another
  /// queue does not count against the slots of the waiter's queue.
  /// In `async` code use ``value``.
  ///
  /// It returns as soon as the work has completed, which can be a moment before its queue has retired it: the
  /// queue's ``WorkQueue/unfinishedCount`` and ``WorkQueue/progress`` may still count it then. A completion
  /// handler (``onCompletion(on:_:)``) or ``WorkQueue/waitUntilAllFinished()`` sees the queue without it.
  ///
  /// While it blocks, the calling thread frees the queue's finished items when the queue's workers ask it to (only
  /// their memory), as ``WorkQueue/waitUntilAllFinished()`` does.
  @available(*, noasync, message: "use 'try await work.value' in async code")
  @discardableResult
  public final func wait() throws -> Value {
    if let result { return try result.get() }
    let done = HelpingWait()
    let (_, record) = try beginCheckedWait(by: WorkEngine.holdingWaiter()) { _ in done.end() }
    defer { record?.end() }
    // While blocked, this thread frees the finished items the queue's workers hand back (see `HelpingWait`).
    done.wait(freeingFor: currentEngine)
    return try result!.get()
  }

  /// Begins a wait for this work by the calling code: calls `completed` with the outcome once the work completes, and,
  /// when `waiter` is the body the wait holds up (``WorkEngine/holdingWaiter()``), records the wait (``BodyWaits``) and
  /// checks it (``WorkEngine/checkWait(of:for:_:keeping:)``), throwing when it could never end. Returns the wait's slot count
  /// entry and its record, to end when the wait is over.
  private final func beginCheckedWait(
    by waiter: AnyWork?,
    _ completed: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) throws(WorkDeadlockError) -> (BlockedWait, BodyWaitRecord?) {
    // The wait stops counting as blocked when the work completes, not when the waiter wakes: the worker that
    // completed it may start its next body (which may wait too) before the waiter runs again. Registered before the
    // check, so that work completing between the check and here is seen (see `BlockedWait`).
    let blocked = BlockedWait()
    whenComplete { result in
      blocked.end()
      completed(result)
    }
    guard let waiter else { return (blocked, nil) }
    #if DEBUG
      if let hook = waiter.currentEngine?.waitCheckHook.withLock({ $0 }) { hook() }
    #endif
    // One check at a time in the process, and a wait that passed is recorded (`BodyWaits`) before the next check: each
    // check sees every wait that began before it. Run side by side, two bodies beginning to wait for each other both
    // passed (for unstarted work in each other's last slot) or were both refused (for each other's work).
    // What the check took a reference to is let go of after the lock (see `WorkEngine.checkWait`): a deinit it ends
    // up running is user code, and runs outside it.
    var keep: [AnyObject] = []
    let checked: Result<BodyWaitRecord?, WorkDeadlockError> = WorkEngine.waitChecks.withLock {
      do throws(WorkDeadlockError) {
        try WorkEngine.checkWait(of: waiter, for: self, blocked, keeping: &keep)
      } catch {
        return .failure(error)
      }
      return .success(WorkEngine.recordWait(of: waiter, for: self))
    }
    _ = consume keep
    return (blocked, try checked.get())
  }

  /// Calls `handler` with the outcome on `queue` once the work is complete.
  ///
  /// The handler runs exactly once, also when added after the work completed (it is then dispatched at once).
  /// Its queue has retired the work by then: ``WorkQueue/unfinishedCount`` and ``WorkQueue/progress`` no longer
  /// count it as unfinished, also for a handler added in the instant between the work's end and its retirement.
  public final func onCompletion(
    on queue: DispatchQueue,
    _ handler: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) {
    whenComplete { result in queue.async { handler(result) } }
  }

  /// Calls `handler` with the outcome on the main actor once the work is complete.
  ///
  /// The handler runs exactly once, also when added after the work completed, and after the work's queue retired
  /// it (as for ``onCompletion(on:_:)``).
  public final func onMainActorCompletion(
    _ handler: @escaping @MainActor @Sendable (Result<Value, any Error>) -> Void
  ) {
    whenComplete { result in Task { @MainActor in handler(result) } }
  }

  // MARK: - Engine

  private final var resultLocked: Result<Value, any Error>? {
    switch phase {
    case .pending, .ready, .running: nil
    case .finished: .success(Self.load(from: self))
    case .failed, .cancelledWithReason: .failure(failure!)
    case .cancelled: .failure(CancellationError())
    }
  }

  /// Runs `handler` with the outcome once complete: at once, on this thread, if it already is.
  final func whenComplete(_ handler: @escaping @Sendable (Result<Value, any Error>) -> Void) {
    whenCompleteErased { [self] in handler(result!) }
  }

  /// The value of a finished dependency, for a dependent's body. Only called once the work finished.
  ///
  /// Read without the lock: a dependent's body runs only after every path that made it ready (the dependency's
  /// completion telling it, or the adding thread seeing the dependency finished under its lock) went through that lock
  /// and the atomics and locks that hand the dependent to its worker, which order the read after the value was kept;
  /// and the value of finished work never changes again. Taken under the lock, the read was a lock and an unlock of the
  /// dependency per item of a chain, and the generic (unspecialized) call around it about 50 instructions under
  /// callgrind. Inlinable, so that it specializes in the caller's module with the body that calls it.
  @inlinable
  final func dependencyValue() -> Value {
    assert(isFinishedUnlocked, "Spindle: a dependent ran before its dependency finished")
    guard hasValue else {
      // Only `Void` is finished without a kept value (both have size 0); any other type means the dependency did not
      // finish, which its dependents never see.
      guard Value.self == Void.self else { Self.dependentRanTooEarly() }
      return unsafeBitCast((), to: Value.self)
    }
    return Self.readKeptValue(of: self)
  }

  /// A copy of the value kept in `work` (which must hold one), through read accesses only.
  ///
  /// Finished work's value is read by its dependents' bodies without the lock, on several threads at once, and by
  /// `load(from:)` under it: `valueAddress(in:)` takes the address of `valueWords` through an `inout`, a modifying
  /// access, which ThreadSanitizer reports when it overlaps another access. A value kept inline is copied out of a copy
  /// of the words (which the work still owns: `load` copies the value), one kept in a cell out of the cell.
  @inlinable @inline(__always)
  static func readKeptValue(of work: Work<Value>) -> Value {
    let words = work.valueWords
    if fitsInline { return withUnsafeBytes(of: words) { $0.load(as: Value.self) } }
    return UnsafeRawPointer(bitPattern: words.0).unsafelyUnwrapped.load(as: Value.self)
  }

  /// Whether the work finished, read without the lock: for the check of ``dependencyValue()`` (debug builds).
  @usableFromInline
  final var isFinishedUnlocked: Bool {
    if case .finished = phase { return true }
    return false
  }

  /// Stops the program: a dependent's body asked for the value of a dependency that did not finish.
  @usableFromInline @inline(never)
  static func dependentRanTooEarly() -> Never {
    preconditionFailure("Spindle: a dependent ran before its dependency finished")
  }

  /// The outcome of a completed dependency, for a dependent's body that takes `Result` inputs.
  final func dependencyResult() -> Result<Value, any Error> {
    lock.withLock {
      guard let result = resultLocked else {
        preconditionFailure("Spindle: a dependent ran before its dependency completed")
      }
      return result
    }
  }

  /// Whether a `Value` fits in `valueWords` (else it goes to a heap cell).
  @inlinable
  static var fitsInline: Bool {
    MemoryLayout<Value>.size <= MemoryLayout<(UInt, UInt, UInt)>.size
      && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
  }

  /// Where the value of `work` lives (in `valueWords`, or the cell it points to); valid while `work` is alive.
  ///
  /// Raw pointers only: in this generic code, a typed `UnsafeMutablePointer<Value>` as a generic result (of
  /// `withUnsafeMutablePointer`) costs a runtime metadata lookup per call.
  @inlinable @inline(__always)
  static func valueAddress(in work: Work<Value>) -> UnsafeMutableRawPointer {
    if fitsInline {
      // The address of a final stored property of a class instance is stable for the instance's life.
      return withUnsafeMutableBytes(of: &work.valueWords) { $0.baseAddress! }
    }
    return UnsafeMutableRawPointer(bitPattern: work.valueWords.0)!
  }

  /// Keeps the value of finished work (replacing one kept before); `Void` needs nothing kept.
  @inlinable @inline(__always)
  static func keep(_ value: Value, in work: Work<Value>) {
    if Value.self == Void.self { return }
    if work.hasValue { destroyValue(in: work) }
    if !fitsInline {
      let cell = UnsafeMutableRawPointer.allocate(
        byteCount: MemoryLayout<Value>.size,
        alignment: MemoryLayout<Value>.alignment
      )
      work.valueWords.0 = UInt(bitPattern: cell)
    }
    valueAddress(in: work).assumingMemoryBound(to: Value.self).initialize(to: value)
    work.hasValue = true
    if !(fitsInline && _isPOD(Value.self)) { work.valueNeedsDestroy = true }
  }

  /// Ends the life of the kept value (and frees its cell).
  @usableFromInline
  static func destroyValue(in work: Work<Value>) {
    // A plain value kept inline needs nothing done: in the class's deinit, which is not specialized, `deinitialize`
    // called into the runtime and the type's value witness even for an `Int` (about 50 instructions per item, under
    // callgrind); `_isPOD` reads one flag of the type's metadata.
    if fitsInline && _isPOD(Value.self) {
      work.hasValue = false
      return
    }
    let address = valueAddress(in: work)
    address.assumingMemoryBound(to: Value.self).deinitialize(count: 1)
    if !fitsInline { address.deallocate() }
    work.hasValue = false
  }

  /// A copy of the value that `keep` kept, for finished work.
  static func load(from work: Work<Value>) -> Value {
    guard work.hasValue else {
      // Only `Void` is finished without a kept value; both have size 0.
      guard Value.self == Void.self else { preconditionFailure("Spindle: finished work kept no value") }
      return unsafeBitCast((), to: Value.self)
    }
    return readKeptValue(of: work)
  }

  /// The value of `work`'s ``AnyWork/valueSource`` (a `Work<Value>`), for its body. Only called by that body.
  @inlinable @inline(__always)
  static func valueOfSource(of work: AnyWork) -> Value {
    // Read through an unretained reference: `work.valueSource` holds the source until this body has run, and only the
    // thread running it touches the field meanwhile. Loaded as a strong reference, it was retained and released.
    work.unretainedValueSource._withUnsafeGuaranteedRef { unsafeDowncast($0, to: self).dependencyValue() }
  }

  /// Runs a synchronous body for `work` (a `Work<Value>`) and stores its value.
  ///
  /// Callers capture `Work<Value>.self` when they create the body and call this on it, so running an item
  /// looks up no generic metadata.
  ///
  /// The running body is the only writer of the value; readers take `lock` after the work completes under
  /// it, which orders them after this write, or are dependents' bodies, which run after that completion (see
  /// ``dependencyValue()``).
  @inlinable @inline(__always)
  static func runSync(_ work: AnyWork, _ run: () throws -> Value) -> Termination {
    do {
      let value = try run()
      keep(value, in: unsafeDowncast(work, to: self))
      return .finished
    } catch {
      return Termination(error: error)
    }
  }

  /// Runs an `async` body for `work` (a `Work<Value>`) and stores its value, as ``runSync(_:_:)`` does.
  static func runAsync(_ work: AnyWork, _ run: () async throws -> Value) async -> Termination {
    do {
      let value = try await run()
      keep(value, in: unsafeDowncast(work, to: self))
      return .finished
    } catch {
      return Termination(error: error)
    }
  }

  /// Stores the value a condition gives to skipped work, before the work completes under the lock.
  static func store(_ value: Value, in work: AnyWork) {
    let work = unsafeDowncast(work, to: self)
    work.lock.withLock { keep(value, in: work) }
  }

  /// What a call of `finish` found, under the work's lock.
  enum FinishCall {
    /// The body is still running on its worker, which completes the work when it returns.
    case recorded
    /// The body has returned: the caller completes the work.
    case completes
    /// Not the first call of this attempt's `finish`: reported and ignored.
    case repeated
  }

  /// Handles a call of a callback body's `finish` through `token`; reports and ignores every call after the first.
  final func finishFromCallback(value: Value, token: FinishToken) {
    // No `Result<Value, any Error>` on this path: in this generic code, each one looked up its metadata at run time.
    // Called from the body itself (the common case), the ending is recorded in this visit to the lock for the worker.
    let call: FinishCall = lock.withLock {
      guard claimFinishLocked(token) else { return .repeated }
      Self.keep(value, in: self)
      return recordInlineFinishLocked(.finished) ? .recorded : .completes
    }
    switch call {
    case .recorded: break
    case .completes: finishDetached(.finished)
    case .repeated: reportRepeatedFinish(queue: token.queueName)
    }
  }

  /// Handles a call of a callback body's `finish` with an error through `token`; reports and ignores every call after
  /// the first.
  final func finishFromCallback(error: any Error, token: FinishToken) {
    let call: FinishCall = lock.withLock {
      guard claimFinishLocked(token) else { return .repeated }
      return recordInlineFinishLocked(Termination(error: error)) ? .recorded : .completes
    }
    switch call {
    case .recorded: break
    case .completes: finishDetached(Termination(error: error))
    case .repeated: reportRepeatedFinish(queue: token.queueName)
    }
  }
}

/// Plain synchronous work (no condition, delay, timeout, retry or exclusivity): the body is kept typed in the item,
/// so that `add` needs no wrapper closure around it. The erased body only calls `runStoredBody`, and captures nothing
/// once `add` is specialized, so each such item costs one allocation fewer (two for the work and the wrapper before,
/// when the body captures nothing).
///
/// Each kind of plain body has a subclass of its own (this one, `WorkCallback`, `WorkAfter`) rather than a field of
/// `Work`: with all three in `Work`, every item carried two empty 16-byte fields, which its deinit destroyed, on the
/// cache lines that the adding thread writes and the worker reads.
// @unchecked Sendable: as `Work`; `syncBody` is written before the work is admitted, then taken by the one thread that
// runs the body, or dropped by `dropStoredBody()` when the work ends without running.
@usableFromInline final class WorkSync<Value: Sendable>: Work<Value>, @unchecked Sendable {
  @exclusivity(unchecked) @usableFromInline var syncBody: (@Sendable () throws -> Value)?

  /// Runs the stored body and stores its value.
  @inlinable
  static func runStoredBody(_ work: AnyWork) -> Termination {
    let work = unsafeDowncast(work, to: self)
    guard let body = work.syncBody.take() else { preconditionFailure("Spindle: a stored body ran twice") }
    return runSync(work) { try body() }
  }

  override func dropStoredBody() {
    super.dropStoredBody()
    syncBody = nil
  }
}

/// Plain callback work: the callback body kept typed in the item, as `WorkSync` keeps a synchronous one.
// @unchecked Sendable: as `WorkSync`.
@usableFromInline final class WorkCallback<Value: Sendable>: Work<Value>, @unchecked Sendable {
  @exclusivity(unchecked) @usableFromInline var callbackBody: (@Sendable (WorkFinish<Value>) -> Void)?

  /// Runs the stored body, handing it its `finish` (for `token`).
  @inlinable
  static func runStoredCallback(_ work: AnyWork, _ token: FinishToken) {
    let work = unsafeDowncast(work, to: self)
    guard let body = work.callbackBody.take() else { preconditionFailure("Spindle: a stored body ran twice") }
    body(WorkFinish(token: token))
  }

  override func dropStoredBody() {
    super.dropStoredBody()
    callbackBody = nil
  }
}

/// Plain synchronous work whose body receives the value of its one typed dependency (`add(after:)` without a
/// condition, delay, timeout, retry or exclusivity): the body is kept typed in the item, as `WorkSync` keeps one
/// without a dependency, so that `add` needs no wrapper closure around it. The wrapper was a second allocation
/// per item of a chain (`malloc` counted: two per item before, one after), made by the adding thread and freed by the
/// worker that ran the body, under the adding thread's `malloc` arena lock.
// @unchecked Sendable: as `Work`; `afterBody` is written before the work is admitted, then taken by the one thread
// that runs the body, or dropped by `dropStoredBody()` when the work ends without running.
@usableFromInline final class WorkAfter<Source: Sendable, Value: Sendable>: Work<Value>, @unchecked Sendable {
  @exclusivity(unchecked) @usableFromInline var afterBody: (@Sendable (Source) throws -> Value)?

  /// Runs the stored body with the value of the work's `valueSource` (a `Work<Source>`), and stores its value.
  @inlinable
  static func runStoredAfterBody(_ work: AnyWork) -> Termination {
    let work = unsafeDowncast(work, to: self)
    guard let body = work.afterBody.take() else { preconditionFailure("Spindle: a stored body ran twice") }
    // Read before the closure: read inside it, the inliner left the closure as a call of its own (about 14 more
    // instructions per item under callgrind).
    let source = Work<Source>.valueOfSource(of: work)
    return runSync(work) { try body(source) }
  }

  override func dropStoredBody() {
    super.dropStoredBody()
    afterBody = nil
  }
}
