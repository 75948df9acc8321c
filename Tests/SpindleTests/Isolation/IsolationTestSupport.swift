import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
