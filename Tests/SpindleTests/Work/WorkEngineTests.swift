import Dispatch
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Regression tests for every broken promise the engine rebuild fixed, and for its new guarantees.
@Suite("WorkQueue engine")
struct WorkEngineTests {
  // A CI run lost Ctrl-\ during `spindle demo`: the program ignored SIGQUIT to watch it with a DispatchSource,
  // and the kernel gave the signal to a worker thread made earlier, where "ignored" discarded it. Blocking too much
  // broke something else: the Swift crash reporter could not suspend workers (SIGPROF) to print their stacks.
  @Test("worker and executor threads block process signals, not faults, SIGPIPE or the crash reporter's SIGPROF")
  func workerThreadsBlockSignals() async throws {
    /// Whether this thread blocks (quit, interrupt, terminate) and whether it leaves open (fault, profiling, pipe).
    struct Mask: Sendable, CustomStringConvertible {
      var quit, interrupt, terminate, fault, profiling, pipe: Bool
      var processSignalsBlocked: Bool { quit && interrupt && terminate }
      /// A fault must still stop the program; the crash reporter suspends threads with SIGPROF to print their
      /// stacks (a worker blocking it is missing from the report); SIGPIPE belongs to the writing thread.
      var crashAndProfilingSignalsOpen: Bool { !fault && !profiling && !pipe }
      var description: String {
        "quit \(quit) interrupt \(interrupt) terminate \(terminate) fault \(fault) prof \(profiling) pipe \(pipe)"
      }
    }
    @Sendable func here() -> Mask {
      var mask = sigset_t()
      pthread_sigmask(SIG_BLOCK, nil, &mask)
      func blocked(_ signal: Int32) -> Bool { sigismember(&mask, signal) == 1 }
      return Mask(
        quit: blocked(SIGQUIT), interrupt: blocked(SIGINT), terminate: blocked(SIGTERM),
        fault: blocked(SIGSEGV), profiling: blocked(SIGPROF), pipe: blocked(SIGPIPE))
    }
    // A thread started from one that blocks every signal still leaves the crash reporter's open; one started from
    // a thread that takes every signal (as a program's main thread does) still blocks the process signals.
    for parentBlocksAll in [false, true] {
      let fromParent = TSanVisibleMutex<Mask?>(nil)
      let started = DispatchSemaphore(value: 0)
      PlatformThread.start(name: "parent") {
        var parentMask = sigset_t()
        if parentBlocksAll { sigfillset(&parentMask) } else { sigemptyset(&parentMask) }
        pthread_sigmask(SIG_SETMASK, &parentMask, nil)
        PlatformThread.start(name: "child") {
          fromParent.withLock { $0 = here() }
          started.signal()
        }
      }
      #expect(await offPool { started.wait(timeout: .now() + 30) } == .success)
      let child = try #require(fromParent.withLock { $0 })
      #expect(
        child.processSignalsBlocked && child.crashAndProfilingSignalsOpen,
        "parent blocks all \(parentBlocksAll): \(child)")
    }
    let queue = WorkQueue(name: "signals", maxConcurrent: 2)
    let onWorker = try await queue.add { here() }.value
    #expect(onWorker.processSignalsBlocked, "a worker thread takes process signals: \(onWorker)")
    #expect(onWorker.crashAndProfilingSignalsOpen, "a worker hides from faults or the crash reporter: \(onWorker)")
    let executor = BlockingExecutor(name: "signals", threadCount: 1)
    defer { executor.shutdown() }
    let onExecutor = await Task(executorPreference: executor) { here() }.value
    #expect(onExecutor.processSignalsBlocked && onExecutor.crashAndProfilingSignalsOpen, "\(onExecutor)")
  }

  // MARK: - No hidden ready work

  @Test("width 2: a body waiting for a signal from the next ready item is woken (the item is not hidden)")
  func waiterAndSignallerAtWidthTwo() async throws {
    let queue = WorkQueue(name: "pair", maxConcurrent: 2)
    queue.suspend()
    let signal = DispatchSemaphore(value: 0)
    let waiter = queue.add(name: "B") { signal.wait(timeout: .now() + 10) == .success }
    queue.add(name: "D") { signal.signal() }
    queue.resume()
    #expect(try await waiter.value, "B never saw D's signal: D was kept from the free slot")
  }

  @Test("64 waiter/signaller pairs at width 2: every waiter sees its signal")
  func sixtyFourPairs() async throws {
    let queue = WorkQueue(name: "pairs", maxConcurrent: 2)
    queue.suspend()
    var waiters: [Work<Bool>] = []
    for index in 0..<64 {
      let signal = DispatchSemaphore(value: 0)
      waiters.append(queue.add(name: "waiter \(index)") { signal.wait(timeout: .now() + 5) == .success })
      queue.add(name: "signaller \(index)") { signal.signal() }
    }
    queue.resume()
    var woken = 0
    for waiter in waiters where try await waiter.value { woken += 1 }
    #expect(woken == 64)
  }

  @Test("wait() from a body for a ready item of the same queue returns while a slot is free")
  func waitForReadyDependentWithFreeSlot() async throws {
    let queue = WorkQueue(name: "wait-ready", maxConcurrent: 2)
    queue.suspend()
    let a = queue.add(name: "a") { 20 }
    let c = queue.add(name: "c", after: a) { $0 + 1 }
    let waiter = queue.add(name: "waiter", priority: .veryHigh) { try c.wait() * 2 }
    queue.resume()
    #expect(try await waiter.value == 42)
  }

  // MARK: - Priority

  @Test("width 1: a veryHigh item added after 28 veryLow ones runs before all of them that had not started")
  func veryHighOvertakesAtWidthOne() async throws {
    let queue = WorkQueue(name: "priority-1", maxConcurrent: 1)
    let order = Locked<[String]>([])
    let gate = Gate()
    queue.add(name: "blocker") { gate.wait() }
    for index in 0..<28 {
      queue.add(name: "low \(index)", priority: .veryLow) { order.withLock { $0.append("L") } }
    }
    queue.add(name: "high", priority: .veryHigh) { order.withLock { $0.append("H") } }
    gate.open()
    try await queue.allFinished()
    #expect(order.withLock { $0 }.first == "H")
    #expect(order.withLock { $0 }.count == 29)
  }

  @Test("at width 1 the start order is exactly priority, then first in, first out", arguments: [1, 2, 3])
  func exactOrderAtWidthOne(seed: UInt64) async throws {
    var rng = SeededGenerator(seed: seed)
    let queue = WorkQueue(name: "exact", maxConcurrent: 1)
    queue.suspend()
    let order = Locked<[Int]>([])
    var expected: [(priority: Int, index: Int)] = []
    for index in 0..<300 {
      let priority = WorkPriority.allCases.randomElement(using: &rng)!
      expected.append((priority.rawValue, index))
      queue.add(priority: priority) { order.withLock { $0.append(index) } }
    }
    queue.resume()
    try await queue.allFinished()
    let sorted = expected.sorted { ($0.priority, -$0.index) > ($1.priority, -$1.index) }.map(\.index)
    #expect(order.withLock { $0 } == sorted)
  }

  @Test("at width 2, no item starts while an item of higher priority waits unstarted")
  func globalPriorityAtWidthTwo() async throws {
    let queue = WorkQueue(name: "priority-2", maxConcurrent: 2)
    queue.suspend()
    let starts = Locked<[Int]>([])
    for index in 0..<200 {
      let priority = WorkPriority.allCases[index % 5]
      queue.add(priority: priority) { starts.withLock { $0.append(priority.rawValue) } }
    }
    queue.resume()
    try await queue.allFinished()
    // Everything was ready at resume: starts come in non-increasing priority, allowing only the reordering of
    // two bodies that started at the same moment on the two slots (their appends may swap).
    let recorded = starts.withLock { $0 }
    var inversions = 0
    for index in 1..<recorded.count where recorded[index] > recorded[index - 1] { inversions += 1 }
    #expect(recorded.count == 200)
    #expect(inversions <= 4, "priority order broken \(inversions) times: \(recorded)")
  }

  // MARK: - Waiting honours the waiter's cancellation

  @Test("awaiting value in a cancelled task throws CancellationError at once; the work goes on")
  func cancelledValueAwaiter() async throws {
    let queue = WorkQueue(name: "await-cancel", maxConcurrent: 1)
    let gate = Gate()
    let started = Gate()
    let slow = queue.add(name: "slow") {
      started.open()
      gate.wait()
      return 7
    }
    let awaiting = Task { try await slow.value }
    await offPool { started.wait() }
    try await Task.sleep(for: .milliseconds(20))
    awaiting.cancel()
    await #expect(throws: CancellationError.self) { try await awaiting.value }
    #expect(slow.state == .running)
    gate.open()
    #expect(try await slow.value == 7)
  }

  @Test("awaiting allFinished in a cancelled task throws CancellationError at once")
  func cancelledAllFinishedAwaiter() async throws {
    let queue = WorkQueue(name: "all-cancel", maxConcurrent: 1)
    let gate = Gate()
    let slow = queue.add(name: "slow") { gate.wait() }
    let awaiting = Task { try await queue.allFinished() }
    try await Task.sleep(for: .milliseconds(20))
    awaiting.cancel()
    await #expect(throws: CancellationError.self) { try await awaiting.value }
    gate.open()
    try await slow.value
    try await queue.allFinished()
    #expect(queue.unfinishedCount == 0)
  }

  // MARK: - Lifetime

  @Test("finished work keeps no queue alive")
  func finishedWorkDropsItsQueue() async throws {
    weak var weakQueue: WorkQueue?
    let work: Work<Int> = {
      let queue = WorkQueue(name: "short-lived")
      weakQueue = queue
      return queue.add { 1 }
    }()
    #expect(try await work.value == 1)
    #expect(await eventually { weakQueue == nil })
  }

  @Test("a suspended queue whose last handle is gone cancels its pending work and releases its captures")
  func droppedSuspendedQueueCancelsPendingWork() async throws {
    final class Capture: Sendable {}
    weak var weakCapture: Capture?
    let work: Work<Int> = {
      let queue = WorkQueue(name: "forgotten")
      queue.suspend()
      let capture = Capture()
      weakCapture = capture
      return queue.add {
        _ = capture
        return 1
      }
    }()
    await #expect(throws: CancellationError.self) { try await work.value }
    #expect(work.state == .cancelled)
    #expect(await eventually { weakCapture == nil })
  }

  // MARK: - Callback bodies

  @Test("a finish dropped without being called fails the work with an error naming it")
  func droppedFinish() async throws {
    let queue = WorkQueue(name: "callbacks")
    let now = queue.addCallback(name: "forgets") { (_: WorkFinish<Int>) in }
    let later = queue.addCallback(name: "forgets later") { (finish: WorkFinish<Int>) in
      DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { _ = finish }
    }
    for work in [now, later] {
      do {
        _ = try await work.value
        Issue.record("a dropped finish must fail the work")
      } catch let error as WorkFinishDroppedError {
        #expect(error.queue == "callbacks")
        #expect(error.description.contains(work.name!))
      }
    }
    try await queue.allFinished()
    #expect(queue.runningCount == 0)
  }

  @Test("finish.onCancel and WorkContext.onCancel run once, when the running work is cancelled")
  func cancelHooks() async throws {
    let queue = WorkQueue(name: "hooks", maxConcurrent: 2)
    let calls = Atomic<Int>(0)
    let started = Gate()
    let call = queue.addCallback(name: "call") { (finish: WorkFinish<Int>) in
      finish.onCancel {
        calls.add(1, ordering: .relaxed)
        finish(CancellationError())
      }
      started.open()
    }
    let stop = Gate()
    let sync = queue.add(name: "sync") { () -> Int in
      WorkContext.current?.onCancel {
        calls.add(1, ordering: .relaxed)
        stop.open()
      }
      started.open()
      stop.wait()
      try WorkContext.current?.checkCancellation()
      return 1
    }
    await offPool {
      started.wait()
      started.wait()
    }
    call.cancel()
    call.cancel()
    sync.cancel()
    sync.cancel()
    await #expect(throws: CancellationError.self) { try await call.value }
    await #expect(throws: CancellationError.self) { try await sync.value }
    #expect(calls.load(ordering: .relaxed) == 2)
    // A hook registered on work that already completed is never called.
    let done = queue.add { 1 }
    _ = try await done.value
    queue.add { WorkContext.current?.onCancel { calls.add(100, ordering: .relaxed) } }
    try await queue.allFinished()
    #expect(calls.load(ordering: .relaxed) == 2)
  }

  @Test("a callback that calls finish before returning completes on the same thread (no hop)")
  func inlineFinishStaysOnTheWorker() async throws {
    let queue = WorkQueue(name: "inline", maxConcurrent: 1)
    queue.suspend()
    let threads = Locked<Set<UInt64>>([])
    var last: Work<Int>?
    for index in 0..<500 {
      last = queue.addCallback { (finish: WorkFinish<Int>) in
        threads.withLock { _ = $0.insert(currentThreadID()) }
        finish(index)
      }
    }
    queue.resume()
    #expect(try await last!.value == 499)
    #expect(threads.withLock { $0.count } == 1)
  }

  // MARK: - Misuse that would deadlock

  @Test("wait() for the body's own work throws WorkDeadlockError")
  func waitForItself() async throws {
    let queue = WorkQueue(name: "self", maxConcurrent: 2)
    let box = Locked<Work<Int>?>(nil)
    let gate = Gate()
    let work = queue.add(name: "me") { () -> Int in
      gate.wait()
      return try box.withLock { $0 }!.wait() + 1
    }
    box.withLock { $0 = work }
    gate.open()
    do {
      _ = try await work.value
      Issue.record("waiting for itself must throw")
    } catch let error as WorkDeadlockError {
      #expect(error.description.contains("its own work"))
    }
  }

  @Test("wait() from a serial queue's body for its unstarted work throws instead of hanging")
  func waitOnSerialQueue() async throws {
    let queue = WorkQueue(name: "serial", maxConcurrent: 1)
    queue.suspend()
    let later = queue.add(name: "later") { 2 }
    let first = queue.add(name: "first", priority: .veryHigh) { try later.wait() + 1 }
    queue.resume()
    do {
      _ = try await first.value
      Issue.record("must throw")
    } catch let error as WorkDeadlockError {
      #expect(error.queue == "serial")
      #expect(error.work == "later")
      #expect(error.waiter == "first")
    }
    #expect(try await later.value == 2)
  }

  @Test("wait() when every slot would block on unstarted work of the queue throws for the last one")
  func everySlotBlocked() async throws {
    let queue = WorkQueue(name: "all-blocked", maxConcurrent: 2)
    queue.suspend()
    let target = queue.add(name: "target", priority: .veryLow) { 5 }
    let w1 = queue.add(name: "w1") { () -> Int in (try? target.wait()) ?? -1 }
    let w2 = queue.add(name: "w2") { () -> Int in (try? target.wait()) ?? -1 }
    queue.resume()
    let results = [try await w1.value, try await w2.value].sorted()
    // One waiter throws (-1) and frees its slot, so the target runs and the other waiter gets 5.
    #expect(results == [-1, 5])
  }

  @Test("waitUntilAllFinished from a task started by a callback body stops with a message")
  func waitFromCallbackTask() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let queue = WorkQueue(name: "cb-wait", maxConcurrent: 2)
      queue.addCallback(name: "cb") { (finish: WorkFinish<Void>) in
        Task {
          waitForAll(queue)
          finish(())
        }
      }
      try? await Task.sleep(for: .seconds(30))
    }
    let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(message.contains("WorkQueue 'cb-wait': waitUntilAllFinished() called from inside work 'cb'"))
  }

  // MARK: - Typed dependencies of any number

  @Test("after: takes any number of typed dependencies; afterAll and afterAllResults take arrays")
  func parameterPacksAndFanIn() async throws {
    let queue = WorkQueue(name: "packs")
    let a = queue.add { 1 }
    let b = queue.add { "two" }
    let c = queue.add { 3.0 }
    let d = queue.add { [4] }
    let e2 = queue.add { true }
    let e = queue.add(after: a, b, c, d, e2) { a, b, c, d, e in "\(a) \(b) \(c) \(d) \(e)" }
    #expect(try await e.value == "1 two 3.0 [4] true")
    let asyncPair = queue.add(after: a, c) { a, c async in Double(a) + c }
    #expect(try await asyncPair.value == 4)
    let parts = (1...100).map { value in queue.add { value } }
    let total = queue.add(afterAll: parts) { (values: [Int]) in values.reduce(0, +) }
    #expect(try await total.value == 5050)
    let empty = queue.add(afterAll: [Work<Int>]()) { $0.count }
    #expect(try await empty.value == 0)
    let failing: Work<Int> = queue.add { throw TestError(code: 9) }
    let mixed = queue.add(afterAllResults: [parts[0], failing]) { results in
      results.map { (try? $0.get()) ?? -1 }
    }
    #expect(try await mixed.value == [1, -1])
    let ended = queue.add(afterAll: [parts[1], failing]) { $0.count }
    await #expect(throws: TestError(code: 9)) { try await ended.value }
    let results = queue.add(afterResults: failing, b) { x, y in "\((try? x.get()) ?? 0) \(try y.get())" }
    #expect(try await results.value == "0 two")
  }

  // MARK: - Width at run time

  @Test("maxConcurrent can be raised and lowered while bodies run; lowering lets them finish")
  func settableWidth() async throws {
    let queue = WorkQueue(name: "resize", maxConcurrent: 1)
    let running = Atomic<Int>(0)
    let high = Atomic<Int>(0)
    let gate = Gate()
    for _ in 0..<4 {
      queue.add {
        let now = running.add(1, ordering: .relaxed).newValue
        high.max(now, ordering: .relaxed)
        gate.wait()
        running.subtract(1, ordering: .relaxed)
      }
    }
    queue.maxConcurrent = 3
    #expect(await eventually { running.load(ordering: .relaxed) == 3 })
    queue.maxConcurrent = 1
    #expect(queue.maxConcurrent == 1)
    gate.open(3)
    #expect(await eventually { queue.unfinishedCount == 1 })
    high.store(0, ordering: .relaxed)
    gate.open()
    try await queue.allFinished()
    #expect(high.load(ordering: .relaxed) <= 1)
  }
}
