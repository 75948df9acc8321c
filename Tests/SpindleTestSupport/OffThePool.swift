import Spindle
import Testing

/// The threads that ``Trait/offThePool`` runs tests on: two, one per core of the CI machine, so that at most two
/// CPU-bound tests run at once there while the cooperative pool stays free for everything else.
package let offThePoolExecutor = BlockingExecutor(name: "tests.off-pool", threadCount: 2)

/// Runs each test of a suite (or one test) on threads of its own instead of the cooperative pool.
///
/// Swift Testing runs synchronous test functions on the cooperative pool, which has one thread per core. A test that
/// computes for a long time (a filter over hundreds of images, which ThreadSanitizer makes 10–50× slower) holds its
/// pool thread the whole time; two of them hold the whole pool, and every async body of every other test waits.
/// CI's ThreadSanitizer run failed that way: width and memory tests whose async bodies could not start for two
/// minutes timed out. With this trait the test body runs on a `BlockingExecutor` (a task executor preference), so
/// the test keeps its task, its task-locals and its issue reporting, but not a pool thread.
///
/// Child tasks the test starts inherit the preference and share its two threads; an unstructured `Task {}` does
/// not. Use it for CPU-bound tests, not for tests whose child tasks block waiting for one another.
package struct OffThePoolTrait: TestTrait, SuiteTrait, TestScoping {
  package var isRecursive: Bool { true }

  package func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    guard testCase != nil else { return try await function() }
    try await withTaskExecutorPreference(offThePoolExecutor) { try await function() }
  }
}

extension Trait where Self == OffThePoolTrait {
  /// Runs each test on threads of its own instead of the cooperative pool: for CPU-bound tests (see
  /// ``OffThePoolTrait``).
  package static var offThePool: Self { OffThePoolTrait() }
}
