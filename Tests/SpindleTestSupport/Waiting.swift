import Foundation

/// How many times longer every hang bound of the suites is under a sanitizer: CI's ThreadSanitizer run
/// (`SPINDLE_EXPECT_TSAN=1`) and `Scripts/asan.sh` (`SPINDLE_ASAN=1`), where every access costs 5–15× more and
/// the tests running beside one another hold the two threads of the cooperative pool (which on Linux are also
/// Dispatch's global threads) for longer. A bound only catches a hang: a correct run returns as soon as its
/// condition holds, so a longer bound costs nothing; 60 s bounds were outlasted in loaded TSan runs.
///
/// Reading it also starts the ``StallProbe`` (once per process), since nearly every suite reads it early.
package let hangBoundScale: Double = {
  StallProbe.start()
  return hangBoundScaleWithoutProbe
}()

/// ``hangBoundScale`` without starting the probe (for the probe itself).
let hangBoundScaleWithoutProbe: Double = {
  let environment = ProcessInfo.processInfo.environment
  return environment["SPINDLE_EXPECT_TSAN"] == "1" || environment["SPINDLE_ASAN"] == "1" ? 4 : 1
}()

/// Runs a blocking `body` (a semaphore, a gate, a drain) on a thread of its own and suspends until it returns.
///
/// Never block a task instead (`await offPool { gate.wait() }`): the cooperative pool has one thread per core,
/// and two tests blocking it while waiting for async work that needs it deadlock each other.
@discardableResult
package func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    Thread.detachNewThread { continuation.resume(returning: body()) }
  }
}

/// Polls `condition` from async code until it holds or `seconds` (times ``hangBoundScale``) pass, sleeping a
/// millisecond in between.
///
/// For effects that trail the event a test waits for (a release after a Task or a Dispatch block lets go of its
/// closure, a waiter registering with a semaphore). Returns whether the condition held. The default bound is
/// generous because, when every suite of the package runs in parallel, blocking tests can hold the two-thread
/// cooperative pool for many seconds; a correct implementation returns as soon as the condition holds.
package func eventually(within seconds: Double = 90, _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + .seconds(seconds * hangBoundScale)
  while ContinuousClock.now < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return condition()
}

/// ``eventually(within:_:)-async`` with the shorter bound the Foundation tests use (still a minute: only a hang
/// should reach it).
package func eventuallyAsync(within seconds: Double = 60, _ condition: () -> Bool) async -> Bool {
  await eventually(within: seconds, condition)
}

/// Polls `condition` from synchronous code (a thread that may block), at most `seconds` (a minute by default: on a
/// loaded machine, threads the condition waits for can be held back for many seconds), times ``hangBoundScale``.
///
/// From async code use the `async` overload, which suspends instead of sleeping the thread.
package func eventually(within seconds: Double = 60, _ condition: () -> Bool) -> Bool {
  let deadline = ContinuousClock.now + .seconds(seconds * hangBoundScale)
  while ContinuousClock.now < deadline {
    if condition() { return true }
    usleep(1_000)
  }
  return condition()
}
