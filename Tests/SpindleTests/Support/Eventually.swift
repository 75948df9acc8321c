import Foundation

/// Polls `condition` until it holds or `seconds` pass, sleeping a millisecond in between.
///
/// For effects that trail the event a test waits for (a release after a Task or a Dispatch block lets go of its
/// closure, a waiter registering with a semaphore). Returns whether the condition held. The default bound is
/// generous because, when every suite of the package runs in parallel, blocking tests can hold the two-thread
/// cooperative pool for many seconds; a correct implementation returns as soon as the condition holds.
func eventually(within seconds: Double = 90, _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + .seconds(seconds)
  while ContinuousClock.now < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return condition()
}

/// Runs a blocking wait (a semaphore, a gate) on a thread of its own and suspends until it returns.
///
/// Never block a task instead (`await offPool { gate.wait() }`): the cooperative pool has one
/// thread per core, and two tests blocking it while waiting for async work that needs it deadlock each other.
func offPool(_ body: @escaping @Sendable () -> Void) async {
  await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    Thread.detachNewThread {
      body()
      continuation.resume()
    }
  }
}
