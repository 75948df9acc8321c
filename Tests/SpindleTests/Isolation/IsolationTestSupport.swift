import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Scales a stress size: the bounded default in CI, ten times more with `SPINDLE_STRESS=1`.
func stressSize(_ base: Int) -> Int {
  guard let value = getenv("SPINDLE_STRESS"), String(cString: value) == "1" else { return base }
  return base * 10
}

/// Counts concurrent occupants of a region and remembers the most seen at once.
final class ConcurrencyGauge: Sendable {
  private let current = Atomic<Int>(0)
  private let highWater = Atomic<Int>(0)

  var maximum: Int { highWater.load(ordering: .acquiring) }

  func enter() {
    let now = current.add(1, ordering: .acquiringAndReleasing).newValue
    var seen = highWater.load(ordering: .relaxed)
    while now > seen {
      let (exchanged, original) = highWater.compareExchange(
        expected: seen,
        desired: now,
        ordering: .acquiringAndReleasing
      )
      if exchanged { break }
      seen = original
    }
  }

  func leave() {
    current.subtract(1, ordering: .acquiringAndReleasing)
  }
}

/// A shared atomic counter that escaping closures can capture.
final class Counter: Sendable {
  private let count = Atomic<Int>(0)

  var value: Int { count.load(ordering: .acquiring) }

  func add(_ amount: Int) {
    count.add(amount, ordering: .acquiringAndReleasing)
  }
}
