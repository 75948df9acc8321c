/// Polls `condition` until it holds or `seconds` pass, sleeping a millisecond in between.
///
/// For effects that trail the event a test waits for (a release after a Task or a Dispatch block lets go of its
/// closure, a waiter registering with a semaphore). Returns whether the condition held.
func eventually(within seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + .seconds(seconds)
  while ContinuousClock.now < deadline {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return condition()
}
