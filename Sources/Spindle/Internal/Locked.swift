/// A value guarded by a pthread mutex (adaptive on glibc: it spins briefly before sleeping), shared by reference.
///
/// The package's lock box for state that closures capture and hand around. The package has three locks, each for
/// one shape of state: `Locked` (a box shared by reference), ``TSanVisibleMutex`` (non-copyable, embedded in a type,
/// built on `Synchronization.Mutex`), and ``PlatformMutex`` (a bare pthread mutex, paired with a condition variable).
/// ThreadSanitizer intercepts pthread mutexes, so it sees every hand-off of `Locked`.
///
/// `Locked` is `Sendable` only when `Value` is: a box of non-`Sendable` state must not cross threads, because a value
/// read out under the lock would then be shared unprotected.
///
/// ```swift
/// let hits = Locked(0)
/// hits.withLock { $0 += 1 }
/// ```
package final class Locked<Value> {
  private let mutex = PlatformMutex()
  // Only touched inside `withLock`, while `mutex` is held: the runtime's dynamic exclusivity checks (a
  // `swift_beginAccess`/`swift_endAccess` pair, about 120 instructions, per `withLock`) would repeat what the mutex
  // guarantees; ThreadSanitizer still checks the accesses.
  @exclusivity(unchecked) private var value: Value

  /// Creates a box holding `value`.
  package init(_ value: Value) {
    self.value = value
  }

  deinit {
    mutex.destroy()
  }

  /// Runs `body` with exclusive access to the value.
  @inline(__always)
  package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    mutex.lock()
    defer { mutex.unlock() }
    return try body(&value)
  }
}

// Unchecked Sendable: `value` is only read or written inside `withLock`, while `mutex` is held, and it is itself
// Sendable, so what `withLock` hands out may cross threads.
extension Locked: @unchecked Sendable where Value: Sendable {}
