import Foundation
import Spindle

/// An `Operation` whose work may end after `main()` returns: it is finished only when you call ``finish(file:line:)``.
///
/// Subclass it, override `main()`, start the asynchronous work there and call ``finish(file:line:)`` exactly once
/// when the work is over, from any thread. The queue keeps the operation *executing* until then, so
/// dependents wait for the real end of the work, not for `main()` to return.
///
/// The class fixes the playground's `AsyncOperation`:
/// - The state is kept behind a lock, so `isExecuting`/`isFinished` are safe to read from any thread.
/// - ``start()`` moves to ``State/executing`` *before* it calls `main()`, so a body that calls ``finish(file:line:)``
///   before `main()` returns ends finished (the seed's ended executing forever).
/// - `cancel()` only sets `isCancelled`: it never marks the operation finished while its body may still
///   run. The body observes `isCancelled` (or registers ``onCancel(_:)``) and calls ``finish(file:line:)`` itself.
///   An operation cancelled before it started finishes without running `main()` when the queue starts it.
/// - ``finish(file:line:)`` wins exactly once. A second call (or a call before the operation started) changes
///   nothing and is reported through ``reportMisuse(_:)`` — by default to `MisuseReporting.handler`, one line on standard error unless replaced;
///   it never traps.
/// - The queue learns of each change through `willChangeValue(forKey:)`/`didChangeValue(forKey:)` for
///   `"isExecuting"` and `"isFinished"`: KVO on Apple platforms, and on Linux the same calls are how
///   swift-corelibs-foundation's `OperationQueue` (which has no KVO) learns that an operation finished.
///   Notifications are posted outside the lock, in the order will-executing, will-finished, change,
///   did-executing, did-finished.
///
/// Readiness is Foundation's: an operation is ready when all its dependencies have finished (or it was
/// cancelled). This class does not override `isReady`.
///
/// On Linux, a cancelled operation removes its dependencies as it finishes (so `dependencies` is empty
/// afterwards). swift-corelibs-foundation keeps an unowned reference from a dependency to each dependent;
/// a cancelled dependent finishes at once, and if it is freed before its dependency finishes, the
/// dependency crashes touching it. Plain `BlockOperation`s still have that bug; ours do not.
///
/// ```swift
/// final class LoadOperation: AsyncOperation, @unchecked Sendable {
///   override func main() {
///     legacyLoad { data in
///       self.store(data)
///       self.finish()
///     }
///   }
/// }
/// ```
// `machine` (a lock) protects the life cycle and the cancel handlers;
// Foundation's own locks protect the rest of `Operation`.
open class AsyncOperation: Operation, @unchecked Sendable {
  /// The life cycle of an ``AsyncOperation``: ready, then executing, then finished.
  ///
  /// The raw value names the `Operation` property it drives (`"is" + rawValue`), as in the playground.
  public enum State: String, Sendable, CaseIterable {
    /// Not started yet (it may be waiting for dependencies, or be cancelled and waiting to be started).
    case ready = "Ready"
    /// `main()` was called and ``AsyncOperation/finish(file:line:)`` was not yet.
    case executing = "Executing"
    /// Over: `isFinished` is `true`; the queue has been told.
    case finished = "Finished"

    /// The key whose change notifications announce this state (`"isReady"`, `"isExecuting"`, `"isFinished"`).
    public var key: String { "is" + rawValue }
  }

  private let machine = Locked(AsyncOperationStateMachine())

  /// Creates an operation in the ``State/ready`` state.
  public override init() {
    super.init()
  }

  /// The current state; safe to read from any thread.
  public final var state: State { machine.withLock { $0.state } }

  /// Always `true`: the operation manages its own executing and finished states.
  public final override var isAsynchronous: Bool { true }

  /// Whether the operation has started and not yet finished.
  public final override var isExecuting: Bool { state == .executing }

  /// Whether the operation is over (finished normally, failed, or cancelled).
  public final override var isFinished: Bool { state == .finished }

  /// Begins the operation; called by the queue (or by you, for an operation not in a queue).
  ///
  /// If the operation was cancelled before it started, it moves straight to finished without calling
  /// `main()`. Otherwise it moves to executing, posts the notifications, and calls `main()`. A second
  /// call is reported through ``reportMisuse(_:)`` and ignored.
  public final override func start() {
    let cancelled = isCancelled
    switch machine.withLock({ $0.start(isCancelled: cancelled) }) {
    case .run:
      willChangeValue(forKey: State.executing.key)
      machine.withLock { $0.commitStart() }
      didChangeValue(forKey: State.executing.key)
      main()
    case .finishWithoutRunning:
      willFinishWithoutRunning()
      detachFromDependenciesIfCancelled()
      willChangeValue(forKey: State.finished.key)
      machine.withLock { $0.commitFinish() }
      didChangeValue(forKey: State.finished.key)
    case .misuse(let kind):
      reportMisuse(Misuse(kind: kind, operation: misuseName, location: nil, firstFinish: nil))
    }
  }

  /// Ends the operation: moves it from executing to finished and tells the queue. Call it exactly once.
  ///
  /// Safe to call from any thread, including from inside `main()` before it returns. A second call, or
  /// a call before the operation started, changes nothing and is reported through ``reportMisuse(_:)``
  /// with both call sites; it never traps. A cancelled operation must still call `finish()` once its body
  /// has stopped.
  public final func finish(file: StaticString = #fileID, line: UInt = #line) {
    finish(at: Misuse.Location(file: file, line: line), storing: nil)
  }

  /// Sets `isCancelled` and runs the handlers registered with ``onCancel(_:)``; does not finish.
  ///
  /// Cancelling an operation that has not started makes it ready at once; when the queue starts it, it
  /// finishes without running `main()`. Cancelling a running operation only asks the body to stop: the
  /// operation stays executing until the body calls ``finish(file:line:)``. Cancelling a finished operation does
  /// nothing. Subclasses that override this must call `super.cancel()`.
  open override func cancel() {
    super.cancel()
    guard isCancelled else { return }
    let handlers = machine.withLock { $0.takeCancelHandlers() }
    for handler in handlers { handler() }
  }

  /// Registers `handler` to run once when the operation is cancelled (at once, if it already is).
  ///
  /// Use it to cancel the underlying work of a wrapped callback API. The handler runs on the thread that
  /// calls `cancel()` (or on the calling thread if already cancelled), outside the operation's locks; it
  /// must still let the body call ``finish(file:line:)``.
  public final func onCancel(_ handler: @escaping @Sendable () -> Void) {
    let runNow = machine.withLock { $0.addCancelHandler(handler) }
    if runNow { handler() }
  }

  /// Reports a misuse of this operation (a second ``finish(file:line:)``, a finish before start, a second start).
  ///
  /// The default sends a `MisuseReport` (message: ``Misuse/description``, detail: `misuse`) to the package's one
  /// misuse handler, `MisuseReporting.handler` (standard error unless replaced), like every other Spindle library.
  /// Override it only to route one operation class's reports elsewhere (a test recorder); it must not call back
  /// into the operation's life cycle. It is called outside the operation's locks, on the thread that misused it.
  ///
  /// ```swift
  /// MisuseReporting.handler = { report in
  ///   if let misuse = report.detail as? AsyncOperation.Misuse, misuse.kind == .finishedTwice { log(misuse) }
  /// }
  /// ```
  open func reportMisuse(_ misuse: Misuse) {
    MisuseReporting.report(MisuseReport(message: misuse.description, detail: misuse))
  }

  // MARK: - Internal hooks for subclasses in this module

  /// Finishes once; `store` runs only for the winning call, before the finished state is visible.
  final func finish(at location: Misuse.Location, storing store: (() -> Void)?) {
    switch machine.withLock({ $0.finish(at: location) }) {
    case .finish:
      store?()
      willFinishAfterRunning()
      detachFromDependenciesIfCancelled()
      willChangeValue(forKey: State.executing.key)
      willChangeValue(forKey: State.finished.key)
      machine.withLock { $0.commitFinish() }
      didChangeValue(forKey: State.executing.key)
      didChangeValue(forKey: State.finished.key)
    case .misuse(let kind, let first):
      reportMisuse(Misuse(kind: kind, operation: misuseName, location: location, firstFinish: first))
    }
  }

  /// Works around swift-corelibs-foundation keeping an *unowned* reference from each dependency to this
  /// operation: cancelling makes the operation ready at once, so it may finish and be freed while a
  /// dependency still runs, which then crashes touching it when it finishes. Removing the dependencies
  /// first (serialized with the dependency's own lock) drops those references. Apple's Foundation does
  /// not need it.
  private func detachFromDependenciesIfCancelled() {
    #if !canImport(Darwin)
      guard isCancelled else { return }
      for dependency in dependencies { removeDependency(dependency) }
    #endif
  }

  /// Called once, before the finished state of a started operation becomes visible.
  func willFinishAfterRunning() {}

  /// Called once, before an operation cancelled before it started becomes finished.
  func willFinishWithoutRunning() {}

  /// A name for reports: the type, the operation's `name` if any, and its address.
  var misuseName: String {
    let address = "0x" + String(UInt(bitPattern: ObjectIdentifier(self).hashValue), radix: 16)
    if let name { return "\(type(of: self)) '\(name)' (\(address))" }
    return "\(type(of: self)) (\(address))"
  }
}
