import Foundation

/// A value behind a lock that ThreadSanitizer understands.
///
/// `Synchronization.Mutex` on Linux hands a contended lock over inside the kernel (a priority-inheriting
/// futex), which ThreadSanitizer does not see, so it reports false races under contention. `NSLock` is a
/// `pthread_mutex_t`, which ThreadSanitizer intercepts.
// `lock` protects `value`; it is only touched inside `withLock`.
final class Protected<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) {
    self.value = value
  }

  /// Runs `body` with exclusive access to the value.
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
