import Synchronization

/// A counter safe to bump from any thread, that also tracks how many bodies run at once.
///
/// ```swift
/// let ran = Counter()
/// DispatchQueue.concurrentPerform(iterations: 8) { _ in ran.tracking { ran.increment() } }
/// #expect(ran.value == 8)
/// ```
package final class Counter: Sendable {
  private let count = Atomic<Int>(0)
  private let peak = Atomic<Int>(0)
  private let running = Atomic<Int>(0)

  package init() {}

  /// The count so far.
  package var value: Int { count.load(ordering: .sequentiallyConsistent) }

  /// The most bodies ``tracking(_:)`` saw running at once.
  package var peakConcurrency: Int { peak.load(ordering: .sequentiallyConsistent) }

  /// Adds one; returns the new count.
  @discardableResult
  package func increment() -> Int { count.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue }

  /// Adds `amount`.
  package func add(_ amount: Int) { count.wrappingAdd(amount, ordering: .sequentiallyConsistent) }

  /// Runs `body` while tracking how many bodies run at once (see ``peakConcurrency``).
  package func tracking<T>(_ body: () throws -> T) rethrows -> T {
    let now = running.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
    var seen = peak.load(ordering: .sequentiallyConsistent)
    while now > seen {
      let (exchanged, original) = peak.compareExchange(
        expected: seen, desired: now, ordering: .sequentiallyConsistent)
      if exchanged { break }
      seen = original
    }
    defer { running.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
    return try body()
  }
}
