import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// An `async` body's task handle (`AnyWork.runningTask`) belongs to the attempt that runs. The thread that starts an
/// attempt's task stores its handle a moment after making it; a body that fails at once can be retried, and its next
/// attempt started with a handle of its own, in that moment. Found in a ThreadSanitizer run of the whole suite, where
/// `ReviewSession25Tests.aSecondAttemptsAwaitOfItsOwnWorkIsRefused` waited for 240 s: the first attempt's late store
/// replaced the second attempt's handle, so the wait check no longer knew the second attempt's task as the body's (its
/// await of its own work waited for ever), and `cancel()` would have cancelled the ended task.
@Suite struct RetryTaskHandleTests {
  @Test func anEndedAttemptsLateHandleDoesNotReplaceTheRunningAttempts() async {
    let name = "retry-handle.\(UInt64.random(in: 0...UInt64.max))"
    let queue = WorkQueue(name: "retry-handle", maxConcurrent: 2)
    let me = ReviewSession24Tests.Box<Work<String>>()
    let hookDone = Atomic<Bool>(false)
    // Holds the first attempt's starting thread between making its task and storing its handle, until the second
    // attempt runs with its own handle stored.
    AnyWork.taskStartHookForTesting.withLock {
      $0 = { work, attempt in
        guard work.name == name, attempt == 1 else { return }
        _ = eventually { work.attempts == 2 && work.runningTaskForTesting != nil }
        hookDone.store(true, ordering: .sequentiallyConsistent)
      }
    }
    defer { AnyWork.taskStartHookForTesting.withLock { $0 = nil } }
    queue.suspend()
    me.set(
      queue.add(name: name, retry: .fixed(maxAttempts: 2)) { () async throws -> String in
        if me.get.attempts == 1 { throw ReviewSession25Tests.Boom() }
        // After the first attempt's thread went on to its store (a moment after the hook returned).
        _ = await eventually { hookDone.load(ordering: .sequentiallyConsistent) }
        try? await Task.sleep(for: .milliseconds(50))
        return me.get.isBodyTask ? "the body's task" : "another task"
      })
    // Resumed off the pool: the starting thread is held in the hook.
    await offPool { queue.resume() }
    let value = try? await me.get.value
    #expect(value == "the body's task", "the second attempt's task handle was replaced: \(value ?? "no value")")
  }
}
