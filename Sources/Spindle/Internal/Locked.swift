#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value guarded by a pthread mutex (adaptive on glibc: it spins briefly before sleeping), shared by reference.
///
/// The package's lock box, for state that closures capture and hand around (``TSanVisibleMutex`` is the
/// non-copyable one to embed in a type). ThreadSanitizer intercepts pthread mutexes, so it sees every hand-off;
/// it does not see `Synchronization.Mutex` hand a contended lock over on Linux (a futex in the uninstrumented
/// runtime) and reports false races there.
// @unchecked Sendable: `value` is only read or written inside `withLock`, while `mutex` is held. Like `Mutex`,
// the box is Sendable whatever `Value` is: callers move values in and out only under the lock.
package final class Locked<Value>: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private var value: Value

  /// Creates a box holding `value`.
  package init(_ value: Value) {
    self.value = value
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    #if canImport(Glibc)
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
    #endif
    let status = pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
    precondition(status == 0, "Spindle: pthread_mutex_init failed with \(status)")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }

  /// Runs `body` with exclusive access to the value.
  @inline(__always)
  package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value)
  }
}
