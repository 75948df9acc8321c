import Dispatch

/// A gate a body blocks on until the test opens it; every wait is bounded, so a bug cannot hang the suite.
///
/// ```swift
/// let gate = Gate()
/// queue.add { gate.wait() }
/// gate.open()
/// ```
package final class Gate: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)

  package init() {}

  /// Lets `count` waits through (one each).
  package func open(_ count: Int = 1) {
    for _ in 0..<count { semaphore.signal() }
  }

  /// Blocks until opened, at most `seconds` (a minute: a test that opens it after an `await` can be held back for
  /// tens of seconds by a starved cooperative pool); returns false when it timed out. Call it off the cooperative pool
  /// (from a Dispatch block, a thread, or `await offPool { gate.wait() }`). Under a sanitizer the bound is
  /// ``hangBoundScale`` times longer.
  @discardableResult
  package func wait(seconds: Double = 60) -> Bool {
    semaphore.wait(timeout: .now() + seconds * hangBoundScale) == .success
  }
}
