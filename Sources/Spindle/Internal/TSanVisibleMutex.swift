import Synchronization

/// A `Mutex` whose hand-offs between threads ThreadSanitizer can see.
///
/// On Linux, `Synchronization.Mutex` parks contended threads on a priority-inheritance futex and the kernel
/// hands the lock straight to a waiter; ThreadSanitizer does not see that hand-off and reports the guarded
/// state as racing. Every critical section here starts with an acquiring load and ends with a releasing
/// store of an epoch counter, which gives ThreadSanitizer the happens-before edge the lock already
/// guarantees. On x86 both are plain moves, so the cost is nil; on ARM they are one `ldar`/`stlr` pair.
///
/// The lock to embed in a type: every target of the package uses it (`package` access) instead of `Mutex` directly,
/// so that `swift test --sanitize=thread` reports only real races. It is one of three locks, one per shape of state:
/// ``Locked`` is the box shared by reference, ``PlatformMutex`` the pthread mutex that pairs with a condition variable.
@usableFromInline
package struct TSanVisibleMutex<Value: ~Copyable>: ~Copyable, Sendable {
  @usableFromInline let mutex: Mutex<Value>
  @usableFromInline let epoch = Atomic<UInt>(0)

  @inlinable
  package init(_ value: consuming sending Value) {
    mutex = Mutex(value)
  }

  @inlinable @inline(__always)
  package borrowing func withLock<Result: ~Copyable, Failure: Error>(
    _ body: (inout sending Value) throws(Failure) -> sending Result
  ) throws(Failure) -> sending Result {
    try mutex.withLock { (value: inout sending Value) throws(Failure) -> sending Result in
      let current = epoch.load(ordering: .acquiring)
      defer { epoch.store(current &+ 1, ordering: .releasing) }
      return try body(&value)
    }
  }

  /// Runs `body` under the lock if nobody holds it, without waiting; nil if the lock was taken.
  @inlinable @inline(__always)
  package borrowing func withLockIfAvailable<Result, Failure: Error>(
    _ body: (inout sending Value) throws(Failure) -> sending Result
  ) throws(Failure) -> sending Result? {
    try mutex.withLockIfAvailable { (value: inout sending Value) throws(Failure) -> sending Result in
      let current = epoch.load(ordering: .acquiring)
      defer { epoch.store(current &+ 1, ordering: .releasing) }
      return try body(&value)
    }
  }
}
