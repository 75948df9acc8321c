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
  /// Free permits minus registered waiters; the fast paths of `wait` and `signal` only touch this.
  ///
  /// A waiter registers by decrementing it; a result above zero before the decrement means it holds a permit
  /// without taking the lock. A signal increments it; a negative value before the increment means a waiter is
  /// registered, and the signal takes the lock to hand the permit over (see ``State/handOff()``).
  @usableFromInline let count: Atomic<Int>
  private let state: TSanVisibleMutex<State>

  /// What `count` is set to once the semaphore failed: so negative that every later call takes the lock.
  private static let failedCount = Int.min / 2

  /// Creates a semaphore with `value` permits.
  ///
  /// - Precondition: `value >= 0`; a negative count is a programming error and stops the program with a message.
  public init(value: Int) {
    precondition(value >= 0, "AsyncSemaphore(value:) needs a non-negative number of permits, got \(value)")
    count = Atomic(value)
    state = TSanVisibleMutex(State())
  }

  deinit {
    failAllWaiters(with: .destroyed)
  }

  /// The number of permits free right now (a snapshot; 0 while tasks wait).
  public var availablePermits: Int {
    state.withLock { state in
      state.failure == nil ? max(0, count.load(ordering: .relaxed) + state.abandoned) : 0
    }
  }

  /// The number of tasks suspended in ``wait()`` right now (a snapshot).
  public var waiterCount: Int { state.withLock { $0.waiters.count } }

  /// Takes a permit, suspending until one is free, whether or not the task is cancelled.
  ///
  /// Waiters are woken in the order they called `wait()` or ``waitUnlessCancelled()``. Like
  /// `DispatchSemaphore.wait()`, this ignores cancellation: it returns only once it holds a permit, so
  /// every call must be balanced by ``signal()``. Use ``waitUnlessCancelled()`` in work that should stop
  /// waiting when cancelled.
  @inlinable
  nonisolated(nonsending) public func wait() async {
    // Inlined into the caller: an uncontended wait is one atomic decrement, with no call and no async frame.
    if count.subtract(1, ordering: .acquiringAndReleasing).oldValue > 0 { return }
    await waitForHandOff()
  }

  /// The slow path of ``wait()``: the caller registered; suspends until a signal hands it a permit.
  @usableFromInline
  nonisolated(nonsending) func waitForHandOff() async {
    // The only failure is `.destroyed`, impossible while this call keeps `self` alive.
    try? await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
      let outcome = state.withLock { $0.enqueue(continuation, cancelled: false) }
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
  @inlinable
  nonisolated(nonsending) public func waitUnlessCancelled() async throws {
    if Task.isCancelled { try throwCancelledOrFailed() }
    if count.subtract(1, ordering: .acquiringAndReleasing).oldValue > 0 { return }
    try await waitForHandOffUnlessCancelled()
  }

  /// Throws the semaphore's failure if it failed, else `CancellationError`.
  @usableFromInline
  func throwCancelledOrFailed() throws {
    if let failure = state.withLock({ $0.failure }) { throw failure }
    throw CancellationError()
  }

  /// The slow path of ``waitUnlessCancelled()``: the caller registered; suspends until a signal hands it a permit
  /// or the task is cancelled.
  @usableFromInline
  nonisolated(nonsending) func waitForHandOffUnlessCancelled() async throws {
    // Written and read only under `state`'s lock: the ticket of the queued waiter, for the cancellation handler.
    nonisolated(unsafe) var ticket: State.Ticket?
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
        // Checking cancellation under the lock closes the race with `onCancel`: the flag is set before the
        // handler runs, and the handler takes the same lock.
        let outcome = state.withLock { state in
          let outcome = state.enqueue(continuation, cancelled: Task.isCancelled)
          if case .mustWait(let queued) = outcome { ticket = queued }
          return outcome
        }
        resume(continuation, after: outcome)
      }
    } onCancel: {
      let waiter = state.withLock { state in ticket.flatMap { state.cancel($0) } }
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
    let waiters = state.withLock { state in
      count.store(Self.failedCount, ordering: .releasing)
      return state.failAll(with: error)
    }
    for waiter in waiters { waiter.resume(throwing: error) }
  }

  /// Takes a permit if one is free and nobody is waiting, without suspending.
  ///
  /// - Returns: `true` if a permit was taken (balance it with ``signal()``), `false` otherwise.
  public func tryWait() -> Bool {
    var current = count.load(ordering: .relaxed)
    while current > 0 {
      let (exchanged, original) = count.compareExchange(
        expected: current,
        desired: current - 1,
        ordering: .acquiringAndReleasing
      )
      if exchanged { return true }
      current = original
    }
    return false
  }

  /// Returns a permit: resumes the longest-waiting task, or makes the permit free if nobody waits.
  ///
  /// Signalling more often than waiting raises the count above the initial value, as with
  /// `DispatchSemaphore`.
  @inlinable
  public func signal() {
    // Inlined into the caller: with nobody registered, a signal is one atomic increment.
    if count.add(1, ordering: .acquiringAndReleasing).oldValue >= 0 { return }
    handOffAfterSignal()
  }

  /// The slow path of ``signal()``: `count` was negative, so a waiter registered; hand it the permit.
  @usableFromInline
  func handOffAfterSignal() {
    repeat {
      switch state.withLock({ $0.handOff() }) {
      case .resume(let waiter):
        waiter.resume()
        return
      case .done:
        return
      case .retry:
        continue
      }
    } while count.add(1, ordering: .acquiringAndReleasing).oldValue < 0
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
  /// The slow-path state of the semaphore; every method runs under the semaphore's lock.
  ///
  /// Every registration (a waiter's decrement of `count` that found no free permit) ends exactly once: a signal
  /// resumes it from `waiters`, it takes a signal's `pendingWakes` (the signal came before it queued), or it
  /// leaves without a permit (cancelled) and counts in `abandoned` until a signal absorbs it.
  struct State: ~Copyable {
    typealias Waiter = UnsafeContinuation<Void, any Error>
    typealias Ticket = TicketedRingBuffer<Waiter>.Ticket

    enum Admission {
      case acquired
      case failed(any Error)
      case mustWait(Ticket)
    }

    enum HandOff {
      /// Resume this waiter: it now holds the permit.
      case resume(Waiter)
      /// The permit was absorbed by a cancelled registration: add it to `count` again.
      case retry
      /// The permit is parked for a registered waiter still on its way to the line (or the semaphore failed).
      case done
    }

    var failure: AsyncSemaphoreError?
    /// Suspended waiters in arrival order.
    var waiters = TicketedRingBuffer<Waiter>()
    /// Permits handed over by signals to waiters that registered but had not queued yet.
    var pendingWakes = 0
    /// Registrations of waiters that left without a permit, not yet absorbed by a signal.
    var abandoned = 0

    /// Queues a registered `waiter`, unless a permit already waits for it, the semaphore failed, or it is cancelled.
    mutating func enqueue(_ waiter: Waiter, cancelled: Bool) -> Admission {
      if let failure { return .failed(failure) }
      if pendingWakes > 0 {
        // The caller checks cancellation once resumed, and passes the permit on if it must.
        pendingWakes -= 1
        return .acquired
      }
      if cancelled {
        abandoned += 1
        return .failed(CancellationError())
      }
      return .mustWait(waiters.append(waiter))
    }

    /// Takes a cancelled waiter out of the line; nil if a signal already resumed it.
    mutating func cancel(_ ticket: Ticket) -> Waiter? {
      guard let waiter = waiters.remove(ticket) else { return nil }
      if failure == nil { abandoned += 1 }
      return waiter
    }

    /// What a signal that found a registered waiter does with its permit.
    mutating func handOff() -> HandOff {
      if failure != nil { return .done }
      if let waiter = waiters.popFirst() { return .resume(waiter) }
      if abandoned > 0 {
        abandoned -= 1
        return .retry
      }
      pendingWakes += 1
      return .done
    }

    mutating func failAll(with error: AsyncSemaphoreError) -> [Waiter] {
      failure = error
      pendingWakes = 0
      abandoned = 0
      return waiters.removeAll()
    }
  }
}
