import Synchronization

/// A counting semaphore for Swift concurrency: tasks suspend (never block a thread) until a permit is free.
///
/// Waiters are served first in, first out, and a task that arrives while others wait queues behind them
/// even if a permit happens to be free. Waiting is cancellation-aware: a cancelled waiter throws
/// `CancellationError` and never consumes a permit, even when cancellation races a ``signal()``.
///
/// ```swift
/// let permits = AsyncSemaphore(value: 3)
/// try await permits.wait()
/// defer { permits.signal() }
/// // at most three tasks run here at once
/// ```
///
/// Prefer ``withPermit(_:)``, which signals on every exit path. ``close()`` fails every current and
/// future waiter with ``AsyncSemaphoreError/closed``; if the semaphore is deallocated while tasks still
/// wait (only possible when they do not hold it, since a waiting call keeps its semaphore alive), they are
/// resumed throwing ``AsyncSemaphoreError/destroyed`` instead of leaking.
public final class AsyncSemaphore: Sendable {
  private let state: Mutex<State>
  private let tickets = Atomic<UInt64>(0)

  /// Creates a semaphore with `value` permits.
  ///
  /// - Precondition: `value >= 0`; a negative count is a programming error and stops the program with a message.
  public init(value: Int) {
    precondition(value >= 0, "AsyncSemaphore(value:) needs a non-negative number of permits, got \(value)")
    state = Mutex(State(permits: value))
  }

  deinit {
    let waiters = state.withLock { $0.failAll() }
    for waiter in waiters { waiter.resume(throwing: AsyncSemaphoreError.destroyed) }
  }

  /// The number of permits free right now (a snapshot; 0 while tasks wait).
  public var availablePermits: Int { state.withLock { $0.permits } }

  /// The number of tasks suspended in ``wait()`` right now (a snapshot).
  public var waiterCount: Int { state.withLock { $0.waiters.count } }

  /// Takes a permit, suspending until one is free.
  ///
  /// Waiters are woken in the order they called `wait()`. If the task is cancelled before or while it
  /// waits, `wait()` throws `CancellationError` without consuming a permit; when a ``signal()`` hands the
  /// permit over at the same moment as the cancellation, the permit is passed on to the next waiter.
  ///
  /// - Throws: `CancellationError` if the task is cancelled; ``AsyncSemaphoreError/closed`` after
  ///   ``close()``; ``AsyncSemaphoreError/destroyed`` if the semaphore is deallocated while waiting.
  public func wait() async throws {
    switch state.withLock({ $0.admit(cancelled: Task.isCancelled) }) {
    case .acquired: return
    case .failed(let error): throw error
    case .mustWait: break
    }
    let ticket = tickets.add(1, ordering: .relaxed).newValue
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        // Checking cancellation under the lock closes the race with `onCancel`: the flag is set before the
        // handler runs, and the handler takes the same lock.
        let outcome = state.withLock { $0.enqueue(ticket, continuation, cancelled: Task.isCancelled) }
        switch outcome {
        case .mustWait: break
        case .acquired: continuation.resume()
        case .failed(let error): continuation.resume(throwing: error)
        }
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

  /// Takes a permit if one is free and nobody is waiting, without suspending.
  ///
  /// - Returns: `true` if a permit was taken (balance it with ``signal()``), `false` otherwise.
  public func tryWait() -> Bool {
    state.withLock { $0.tryTake() }
  }

  /// Returns a permit: resumes the longest-waiting task, or makes the permit free if nobody waits.
  ///
  /// Signalling more often than waiting raises the count above the initial value, as with
  /// `DispatchSemaphore`. After ``close()`` signals are ignored.
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
  /// - Throws: What ``wait()`` throws (then `body` does not run), or what `body` throws.
  public func withPermit<Result, Failure: Error>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws(Failure) -> sending Result
  ) async throws -> sending Result {
    try await wait()
    defer { signal() }
    return try await body()
  }

  /// Fails every current and future waiter with ``AsyncSemaphoreError/closed``.
  ///
  /// After closing, ``wait()`` throws, ``tryWait()`` returns `false` and ``signal()`` does nothing.
  /// Closing twice is harmless.
  public func close() {
    let waiters = state.withLock { $0.failAll() }
    for waiter in waiters { waiter.resume(throwing: AsyncSemaphoreError.closed) }
  }
}

/// Why an ``AsyncSemaphore`` wait failed other than by cancellation.
public enum AsyncSemaphoreError: Error, Equatable, Sendable, CustomStringConvertible {
  /// ``AsyncSemaphore/close()`` was called before or while the task waited.
  case closed
  /// The semaphore was deallocated while the task waited, so no permit could ever arrive.
  case destroyed

  public var description: String {
    switch self {
    case .closed: "AsyncSemaphore was closed while the task waited for a permit"
    case .destroyed: "AsyncSemaphore was deallocated while a task still waited for a permit"
    }
  }
}

extension AsyncSemaphore {
  /// The semaphore's state machine; every method runs under the semaphore's lock.
  struct State: ~Copyable {
    typealias Waiter = CheckedContinuation<Void, any Error>

    enum Admission {
      case acquired
      case failed(any Error)
      case mustWait
    }

    var permits: Int
    var closed = false
    /// Suspended waiters by ticket.
    var waiters: [UInt64: Waiter] = [:]
    /// Tickets in arrival order from `order[head]` on; tickets no longer in `waiters` (cancelled) are skipped.
    var order: [UInt64] = []
    var head = 0

    init(permits: Int) { self.permits = permits }

    mutating func tryTake() -> Bool {
      guard !closed, permits > 0, waiters.isEmpty else { return false }
      permits -= 1
      return true
    }

    mutating func admit(cancelled: Bool) -> Admission {
      if closed { return .failed(AsyncSemaphoreError.closed) }
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
      if closed { return nil }
      while head < order.count {
        let ticket = order[head]
        head += 1
        if let waiter = waiters.removeValue(forKey: ticket) {
          compact()
          return waiter
        }
      }
      order.removeAll(keepingCapacity: true)
      head = 0
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

    mutating func failAll() -> [Waiter] {
      closed = true
      let failed = order[head...].compactMap { waiters[$0] }
      waiters.removeAll()
      order.removeAll()
      head = 0
      return failed
    }
  }
}
