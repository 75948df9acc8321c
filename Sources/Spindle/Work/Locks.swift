import Synchronization

// Why not `Synchronization.Mutex`: on Linux it is built on raw futex calls inside the prebuilt standard
// library, which ThreadSanitizer does not see, so every access it protects is reported as a race. The
// locks below are visible to ThreadSanitizer: one intercepts pthread calls, the other is made of atomics.

/// A one-byte lock for the tiny, rarely contended critical sections of a work item.
///
/// It spins, then yields the processor; never hold it across anything that can block or run user code.
struct SpinLock: ~Copyable {
  private let locked = Atomic<Bool>(false)

  init() {}

  @inline(__always)
  borrowing func lock() {
    if locked.compareExchange(expected: false, desired: true, successOrdering: .acquiring, failureOrdering: .relaxed)
      .exchanged
    {
      return
    }
    lockSlow()
  }

  @inline(never)
  private borrowing func lockSlow() {
    var spins = 0
    while true {
      if !locked.load(ordering: .relaxed)
        && locked.compareExchange(
          expected: false,
          desired: true,
          successOrdering: .acquiring,
          failureOrdering: .relaxed
        ).exchanged
      {
        return
      }
      spins += 1
      if spins > 100 { Platform.yieldThread() }
    }
  }

  @inline(__always)
  borrowing func unlock() {
    locked.store(false, ordering: .releasing)
  }

  @inline(__always)
  borrowing func withLock<Result: ~Copyable>(_ body: () throws -> Result) rethrows -> Result {
    lock()
    defer { unlock() }
    return try body()
  }
}
