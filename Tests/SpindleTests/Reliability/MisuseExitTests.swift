import Dispatch
import Foundation
import Spindle
import Testing

/// Issue 15, item 11: every precondition a user can trip really stops the program, with a message that says what
/// was wrong. Each case runs in a child process (an exit test); the child's standard error is asserted.
///
/// Cases already covered elsewhere (kept there): `preconditionCurrent()` off the queue (QueueAssertionTests), a
/// plain `sync` cycle (DeadlockDetectionTests), `QueueExecutor` off its queue (QueueExecutorTests).
@Suite("Reliability: misuse checks fire")
struct MisuseExitTests {
  static func stderr(_ result: ExitTest.Result?) -> String { text(result?.standardErrorContent) }

  @Test("WorkQueue(maxConcurrent: 0) stops, naming the queue and the value")
  func zeroWidth() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = WorkQueue(name: "zero", maxConcurrent: 0)
    }
    #expect(
      Self.stderr(result).contains("WorkQueue(name: \"zero\", maxConcurrent: 0): maxConcurrent must be at least 1"))
  }

  @Test("waitUntilAllFinished() from a body of the same queue stops instead of waiting for itself")
  func waitForOwnQueue() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let queue = WorkQueue(name: "self-wait", maxConcurrent: 2)
      queue.add(name: "waiter") { queue.waitUntilAllFinished() }
      // The child stops inside the body; this wait only keeps the main thread alive until then.
      sleep(30)
    }
    let output = Self.stderr(result)
    #expect(
      output.contains("WorkQueue 'self-wait': waitUntilAllFinished() called from inside work 'waiter'"))
    #expect(output.contains("would wait for itself and deadlock"))
  }

  @Test("a second call of a callback body's finish is reported and ignored; the first outcome stands")
  func finishTwice() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let queue = WorkQueue(name: "twice")
      let work = queue.addCallback(name: "double") { (finish: WorkFinish<Int>) in
        finish(1)
        finish(2)
      }
      blockUntilFinished(queue)
      exit((try? blockingValue(work)) == 1 ? 0 : 1)
    }
    let output = Self.stderr(result)
    #expect(output.contains("double"), "the report names the work: \(output)")
    #expect(output.contains("twice"), "the report names the queue: \(output)")
  }

  @Test("a barrier sync from inside its own concurrent queue stops with a message instead of hanging")
  func barrierFromInside() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let queue = IDQ(label: "misuse.concurrent", attributes: .concurrent)
      queue.sync { queue.sync(flags: .barrier) {} }
    }
    #expect(Self.stderr(result).contains("misuse.concurrent"))
  }

  @Test("a QueueExecutor on a concurrent queue stops, naming the queue")
  func executorOnConcurrentQueue() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = QueueExecutor(queue: IDQ(label: "misuse.wide", attributes: .concurrent))
    }
    #expect(Self.stderr(result).contains("QueueExecutor needs a serial queue, but 'misuse.wide' is concurrent"))
  }

  @Test("BlockingExecutor: zero threads, and shutting down the shared one, both stop with a message")
  func blockingExecutorMisuse() async {
    let zero = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = BlockingExecutor(threadCount: 0)
    }
    #expect(Self.stderr(zero).contains("BlockingExecutor(threadCount:) needs at least 1 thread, got 0"))
    let shared = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      BlockingExecutor.shared.shutdown()
    }
    #expect(Self.stderr(shared).contains("BlockingExecutor.shared cannot be shut down"))
  }

  @Test("ConcurrentActionExecutor(maxInFlight: 0) stops with the value")
  func zeroInFlight() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = ConcurrentActionExecutor<Int, Int>(maxInFlight: 0) { $0 }
    }
    #expect(Self.stderr(result).contains("maxInFlight must be at least 1, got 0"))
  }

  @Test("AsyncSemaphore(value: -1) stops with the value")
  func negativeSemaphore() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = AsyncSemaphore(value: -1)
    }
    #expect(Self.stderr(result).contains("AsyncSemaphore(value:) needs a non-negative number of permits, got -1"))
  }

  @Test("bounded task groups and concurrent map with maxConcurrent 0 stop with the value")
  func zeroConcurrency() async {
    let group = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      await withBoundedTaskGroup(maxConcurrent: 0, of: Void.self) { _ in }
    }
    #expect(Self.stderr(group).contains("withBoundedTaskGroup needs maxConcurrent >= 1, got 0"))
    let throwing = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      try await withThrowingBoundedTaskGroup(maxConcurrent: 0, of: Void.self) { _ in }
    }
    #expect(Self.stderr(throwing).contains("withThrowingBoundedTaskGroup needs maxConcurrent >= 1, got 0"))
    let map = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = try await [1, 2].concurrentMap(maxConcurrent: 0) { $0 }
    }
    #expect(Self.stderr(map).contains("concurrentMap needs maxConcurrent >= 1, got 0"))
    let forEach = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      try await [1, 2].concurrentForEach(maxConcurrent: 0) { _ in }
    }
    #expect(Self.stderr(forEach).contains("concurrentForEach needs maxConcurrent >= 1, got 0"))
  }

  // Work.wait() on the work whose body is running throws a deadlock error instead of hanging.
  @Test(
    "Work.wait() from its own body throws instead of hanging (child process, 20 s watchdog)")
  func waitOnOwnWork() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 20) {
        report("hung: wait() on its own work never returned")
        exit(42)
      }
      let queue = WorkQueue(name: "own-wait", maxConcurrent: 2)
      queue.suspend()
      let box = WorkBox()
      let work = queue.add(name: "self") { () -> String in
        guard let me = box.work else { return "no handle" }
        do {
          _ = try me.wait()
          return "returned"
        } catch {
          return "threw \(error)"
        }
      }
      box.work = work
      queue.resume()
      let outcome = (try? blockingValue(work)) ?? "failed"
      report("outcome=\(outcome)")
      exit(outcome.hasPrefix("threw") ? 0 : 1)
    }
    #expect(Self.stderr(result).contains("outcome=threw"))
  }

  // A callback body that drops `finish` without calling it fails the work instead of leaving it
  // running forever.
  @Test("a callback whose finish is dropped fails the work")
  func droppedFinish() async {
    let queue = WorkQueue(name: "dropped")
    let work = queue.addCallback(name: "drop") { (_: WorkFinish<Int>) in }
    let ended = await blockingWait(seconds: 60) { deadline in
      while DispatchTime.now() < deadline {
        if work.state.isFinal { return true }
        usleep(1_000)
      }
      return false
    }
    #expect(ended, "the work is still \(work.state)")
    #expect(work.state == .failed)
  }
}

/// Lets a body reach its own handle (set right after `add`, before the body can read it on a suspended queue).
final class WorkBox: @unchecked Sendable {
  // Written once by the test before the queue resumes (the resume orders the write before the body's read).
  var work: Work<String>?
}
