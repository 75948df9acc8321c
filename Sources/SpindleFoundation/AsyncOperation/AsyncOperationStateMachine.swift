/// The life cycle of an ``AsyncOperation``, as a plain value type the operation keeps behind a lock.
///
/// A transition is first *claimed* (`starting`, `finishing`) under the lock, so that exactly one caller
/// wins it; that caller then posts `willChangeValue`, *commits* the transition under the lock and posts
/// `didChangeValue`. Notifications are never posted while the lock is held, because observers (KVO on
/// Apple platforms, the queue on Linux) read `isExecuting`/`isFinished`, which take the same lock.
struct AsyncOperationStateMachine {
  enum Phase: Equatable {
    case ready
    /// `start()` won the transition to executing and is posting notifications.
    case starting
    case executing
    /// `finish()` (or `start()` of a cancelled operation) won the transition to finished.
    case finishing(from: AsyncOperation.State)
    case finished
  }

  enum StartAction: Equatable {
    /// Post the executing notifications, commit, then call `main()`.
    case run
    /// The operation was cancelled before it started: post the finished notifications and commit.
    case finishWithoutRunning
    /// `start()` was called on an operation that already started.
    case misuse(AsyncOperation.Misuse.Kind)
  }

  enum FinishAction: Equatable {
    /// Post the finished notifications and commit.
    case finish
    case misuse(AsyncOperation.Misuse.Kind, firstFinish: AsyncOperation.Misuse.Location?)
  }

  private(set) var phase = Phase.ready
  /// Handlers registered with `onCancel`, until `cancel()` takes them (each runs exactly once).
  private var cancelHandlers: [@Sendable () -> Void] = []
  private var cancelHandlersTaken = false
  /// Where `finish()` was first called, to name it when a second call is reported.
  private(set) var firstFinish: AsyncOperation.Misuse.Location?

  /// The state observers see: a claimed transition is not visible until it is committed.
  var state: AsyncOperation.State {
    switch phase {
    case .ready, .starting: .ready
    case .executing: .executing
    case .finishing(let from): from
    case .finished: .finished
    }
  }

  mutating func start(isCancelled: Bool) -> StartAction {
    guard phase == .ready else { return .misuse(.startedTwice) }
    if isCancelled {
      phase = .finishing(from: .ready)
      return .finishWithoutRunning
    }
    phase = .starting
    return .run
  }

  mutating func commitStart() {
    precondition(phase == .starting, "commitStart() without a claimed start")
    phase = .executing
  }

  mutating func finish(at location: AsyncOperation.Misuse.Location) -> FinishAction {
    switch phase {
    case .executing:
      phase = .finishing(from: .executing)
      firstFinish = location
      return .finish
    case .ready, .starting:
      return .misuse(.finishedBeforeStart, firstFinish: nil)
    case .finishing, .finished:
      return .misuse(.finishedTwice, firstFinish: firstFinish)
    }
  }

  mutating func commitFinish() {
    guard case .finishing = phase else { preconditionFailure("commitFinish() without a claimed finish") }
    phase = .finished
  }

  /// Keeps `handler`, or returns `true` if the operation was already cancelled and it must run now.
  mutating func addCancelHandler(_ handler: @escaping @Sendable () -> Void) -> Bool {
    if cancelHandlersTaken { return true }
    cancelHandlers.append(handler)
    return false
  }

  /// Hands back the handlers to run on cancellation; later handlers run at once when added.
  mutating func takeCancelHandlers() -> [@Sendable () -> Void] {
    cancelHandlersTaken = true
    defer { cancelHandlers = [] }
    return cancelHandlers
  }
}
