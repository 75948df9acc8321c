import Synchronization

/// A counting semaphore for Swift concurrency: tasks suspend (never block a thread) until a permit is free.
///
/// Waiters are served first in, first out, and a task that arrives while others wait queues behind them
/// even if a permit happens to be free. ``wait()`` ignores cancellation, like `DispatchSemaphore`;
/// ``waitUnlessCancelled()`` and ``withPermit(isolation:_:)`` are cancellation-aware: a cancelled waiter
/// throws `CancellationError` and never consumes a permit, even when cancellation races a ``signal()``.
///
/// ```swift
/// let permits = AsyncSemaphore(value: 3)
/// await permits.wait()
/// defer { permits.signal() }
/// // at most three tasks run here at once
/// ```
///
/// Prefer ``withPermit(isolation:_:)``, which signals on every exit path. A waiting call keeps its
/// semaphore alive, so it cannot normally be deallocated under a waiter; should that happen anyway, the
/// waiters are resumed (``waitUnlessCancelled()`` throwing ``AsyncSemaphoreError/destroyed``), never leaked.
public final class AsyncSemaphore: Sendable {
  private let state: TSanVisibleMutex<State>
  private let tickets = Atomic<UInt64>(0)

  /// Creates a semaphore with `value` permits.
  ///
  /// - Precondition: `value >= 0`; a negative count is a programming error and stops the program with a message.
  public init(value: Int) {
    precondition(value >= 0, "AsyncSemaphore(value:) needs a non-negative number of permits, got \(value)")
    state = TSanVisibleMutex(State(permits: value))
  }

  deinit {
    failAllWaiters(with: .destroyed)
  }

  /// The number of permits free right now (a snapshot; 0 while tasks wait).
  public var availablePermits: Int { state.withLock { $0.permits } }

  /// The number of tasks suspended in ``wait()`` right now (a snapshot).
  public var waiterCount: Int { state.withLock { $0.waiters.count } }

  /// Takes a permit, suspending until one is free, whether or not the task is cancelled.
  ///
  /// Waiters are woken in the order they called `wait()` or ``waitUnlessCancelled()``. Like
  /// `DispatchSemaphore.wait()`, this ignores cancellation: it returns only once it holds a permit, so
  /// every call must be balanced by ``signal()``. Use ``waitUnlessCancelled()`` in work that should stop
  /// waiting when cancelled.
  nonisolated(nonsending) public func wait() async {
    switch state.withLock({ $0.admit(cancelled: false) }) {
    case .acquired, .failed: return
    case .mustWait: break
    }
    let ticket = tickets.add(1, ordering: .relaxed).newValue
    // The only failure is `.destroyed`, impossible while this call keeps `self` alive.
    try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
      let outcome = state.withLock { $0.enqueue(ticket, continuation, cancelled: false) }
      resume(continuation, after: outcome)
    }
  }

  /// Takes a permit, suspending until one is free; a cancelled task throws instead and takes no permit.
  ///
  /// Waiters are woken in arrival order. If the task is cancelled before or while it waits, this throws
  /// `CancellationError` without consuming a permit; when a ``signal()`` hands the permit over at the same
  /// moment as the cancellation, the permit is passed on to the next waiter.
  ///
  /// ```swift
  /// try await permits.waitUnlessCancelled()
  /// defer { permits.signal() }
  /// ```
  ///
  /// - Throws: `CancellationError` if the task is cancelled; ``AsyncSemaphoreError/destroyed`` if the
  ///   semaphore is deallocated while waiting.
  nonisolated(nonsending) public func waitUnlessCancelled() async throws {
    switch state.withLock({ $0.admit(cancelled: Task.isCancelled) }) {
    case .acquired: return
    case .failed(let error): throw error
    case .mustWait: break
    }
    let ticket = tickets.add(1, ordering: .relaxed).newValue
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        // Checking cancellation under the lock closes the race with `onCancel`: the flag is set before the
        // handler runs, and the handler takes the same lock.
        let outcome = state.withLock { $0.enqueue(ticket, continuation, cancelled: Task.isCancelled) }
        resume(continuation, after: outcome)
      }
    } onCancel: {
      let waiter = state.withLock { $0.cancel(ticket) }
      waiter?.resume(throwing: CancellationError())
    }
    // The permit arrived, but the task may have been cancelled at the same instant: honour the cancellation
    // and pass the permit on, so a cancelled waiter never holds one.
    if Task.isCancelled {
      signal()
      throw CancellationError()
    }
  }

  private func resume(_ continuation: UnsafeContinuation<Void, any Error>, after outcome: State.Admission) {
    switch outcome {
    case .mustWait: break
    case .acquired: continuation.resume()
    case .failed(let error): continuation.resume(throwing: error)
    }
  }

  /// Resumes every waiter throwing `error`; later waits fail with it too. What `deinit` does.
  func failAllWaiters(with error: AsyncSemaphoreError) {
    let waiters = state.withLock { $0.failAll(with: error) }
    for waiter in waiters { waiter.resume(throwing: error) }
  }

  /// Takes a permit if one is free and nobody is waiting, without suspending.
  ///
  /// - Returns: `true` if a permit was taken (balance it with ``signal()``), `false` otherwise.
  public func tryWait() -> Bool {
    state.withLock { $0.tryTake() }
  }

  /// Returns a permit: resumes the longest-waiting task, or makes the permit free if nobody waits.
  ///
  /// Signalling more often than waiting raises the count above the initial value, as with
  /// `DispatchSemaphore`.
  public func signal() {
    let waiter = state.withLock { $0.signal() }
    waiter?.resume()
  }

  /// Runs `body` holding a permit and returns its result; the permit is returned on every exit path.
  ///
  /// ```swift
  /// let downloads = AsyncSemaphore(value: 4)
  /// let data = try await downloads.withPermit { try await fetch(url) }
  /// ```
  ///
  /// - Throws: What ``waitUnlessCancelled()`` throws (then `body` does not run), or what `body` throws.
  public func withPermit<Result, Failure: Error>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws(Failure) -> sending Result
  ) async throws -> sending Result {
    try await waitUnlessCancelled()
    defer { signal() }
    return try await body()
  }
}

/// Why an ``AsyncSemaphore`` wait failed other than by cancellation.
public enum AsyncSemaphoreError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The semaphore was deallocated while the task waited, so no permit could ever arrive.
  case destroyed

  /// A sentence saying what happened to the waiting task.
  public var description: String {
    switch self {
    case .destroyed: "AsyncSemaphore was deallocated while a task still waited for a permit"
    }
  }
}

extension AsyncSemaphore {
  /// The semaphore's state machine; every method runs under the semaphore's lock.
  struct State: ~Copyable {
    typealias Waiter = UnsafeContinuation<Void, any Error>

    enum Admission {
      case acquired
      case failed(any Error)
      case mustWait
    }

    var permits: Int
    var failure: AsyncSemaphoreError?
    /// Suspended waiters by ticket.
    var waiters: [UInt64: Waiter] = [:]
    /// Tickets in arrival order from `order[head]` on; tickets no longer in `waiters` (cancelled) are skipped.
    var order: [UInt64] = []
    var head = 0

    init(permits: Int) { self.permits = permits }

    mutating func tryTake() -> Bool {
      guard failure == nil, permits > 0, waiters.isEmpty else { return false }
      permits -= 1
      return true
    }

    mutating func admit(cancelled: Bool) -> Admission {
      if let failure { return .failed(failure) }
      if cancelled { return .failed(CancellationError()) }
      return tryTake() ? .acquired : .mustWait
    }

    /// Queues `waiter` under `ticket`, unless it can be resumed at once.
    mutating func enqueue(_ ticket: UInt64, _ waiter: Waiter, cancelled: Bool) -> Admission {
      let admission = admit(cancelled: cancelled)
      guard case .mustWait = admission else { return admission }
      waiters[ticket] = waiter
      order.append(ticket)
      return .mustWait
    }

    mutating func cancel(_ ticket: UInt64) -> Waiter? {
      let waiter = waiters.removeValue(forKey: ticket)
      if waiters.isEmpty {
        order.removeAll(keepingCapacity: true)
        head = 0
      }
      return waiter
    }

    /// Returns the oldest waiter to resume, or frees a permit.
    mutating func signal() -> Waiter? {
      if failure != nil { return nil }
      while head < order.count {
        let ticket = order[head]
        head += 1
        if let waiter = waiters.removeValue(forKey: ticket) {
          compact()
          return waiter
        }
      }
      if head != 0 {
        order.removeAll(keepingCapacity: true)
        head = 0
      }
      permits += 1
      return nil
    }

    private mutating func compact() {
      if head == order.count {
        order.removeAll(keepingCapacity: true)
        head = 0
      } else if head > 64, head * 2 > order.count {
        order.removeFirst(head)
        head = 0
      }
    }

    mutating func failAll(with error: AsyncSemaphoreError) -> [Waiter] {
      failure = error
      let failed = order[head...].compactMap { waiters[$0] }
      waiters.removeAll()
      order.removeAll()
      head = 0
      return failed
    }
  }
}
