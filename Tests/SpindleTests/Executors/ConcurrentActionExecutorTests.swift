import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite struct ConcurrentActionExecutorTests {
  @Test func actionsRunOnTheSharedBlockingExecutorByDefault() async {
    let sut = ConcurrentActionExecutor<Void, Bool> { BlockingExecutor.shared.isCurrent }
    #expect(sut.executor === BlockingExecutor.shared)
    #expect(await sut.execute())
    let viaCompletion = await withCheckedContinuation { continuation in
      sut.execute { continuation.resume(returning: $0) }
    }
    #expect(viaCompletion)
  }

  @Test func cooperativePoolCanBeChosen() async {
    let sut = ConcurrentActionExecutor<Void, Bool>(executor: globalConcurrentExecutor) {
      BlockingExecutor.shared.isCurrent
    }
    #expect(await sut.execute() == false)
  }

  @Test func ownBlockingExecutorCanBeChosen() async {
    let executor = BlockingExecutor(name: "test.own", threadCount: 1)
    defer { executor.shutdown() }
    let sut = ConcurrentActionExecutor<Int, Bool>(executor: executor) { _ in executor.isCurrent }
    #expect(await sut.execute(0))
  }

  @Test func completionRunsOnTheDispatchOutputQueue() async {
    let queue = DispatchQueue(label: "test.output")
    let key = DispatchSpecificKey<Int>()
    queue.setSpecific(key: key, value: 7)
    let sut = ConcurrentActionExecutor<Int, Int>(outputQueue: queue) { $0 + 1 }
    #expect(sut.outputQueue === queue)
    let (output, marker) = await withCheckedContinuation { continuation in
      sut.execute(1) { continuation.resume(returning: ($0, DispatchQueue.getSpecific(key: key))) }
    }
    #expect(output == 2)
    #expect(marker == 7)
  }

  @Test func completionRunsOnTheIdentifiableOutputQueue() async {
    let queue = IdentifiableDispatchQueue(label: "test.idq.output")
    let sut = ConcurrentActionExecutor<Int, Int>(outputQueue: queue) { $0 * 3 }
    let (output, onQueue) = await withCheckedContinuation { continuation in
      sut.execute(2) { continuation.resume(returning: ($0, IDQ.currentQueueIs(queue))) }
    }
    #expect(output == 6)
    #expect(onQueue)
  }

  @Test func mainActorCompletionIgnoresTheOutputQueue() async {
    let sut = ConcurrentActionExecutor<Void, Int>(outputQueue: DispatchQueue(label: "test.ignored")) { 1 }
    let onMain = await withCheckedContinuation { continuation in
      sut.executeAndDeliverOnMain { _ in
        MainActor.preconditionIsolated()
        continuation.resume(returning: MainQueueProbe.isOnMainQueue)
      }
    }
    #expect(onMain)
  }

  @Test func maxInFlightBoundsConcurrentActions() async {
    let running = Atomic<Int>(0)
    let peak = Atomic<Int>(0)
    let sut = ConcurrentActionExecutor<Int, Int>(maxInFlight: 2) { input in
      let now = running.add(1, ordering: .sequentiallyConsistent).newValue
      _ = peak.max(now, ordering: .sequentiallyConsistent)
      usleep(5_000)
      running.subtract(1, ordering: .sequentiallyConsistent)
      return input
    }
    #expect(sut.maxInFlight == 2)
    let total = await withTaskGroup(of: Int.self) { group in
      for index in 0..<12 {
        if index.isMultiple(of: 2) {
          group.addTask { await sut.execute(index) }
        } else {
          group.addTask { await withCheckedContinuation { c in sut.execute(index) { c.resume(returning: $0) } } }
        }
      }
      return await group.reduce(0, +)
    }
    #expect(total == (0..<12).reduce(0, +))
    #expect(peak.load(ordering: .sequentiallyConsistent) <= 2)
    #expect(peak.load(ordering: .sequentiallyConsistent) >= 1)
    #expect(sut.core.inFlight == 0)
  }

  @Test func maxInFlightBelowOneIsAPreconditionFailure() async {
    await #expect(processExitsWith: .failure) {
      _ = ConcurrentActionExecutor<Int, Int>(maxInFlight: 0) { $0 }
    }
  }

  @Test func cancellingBeforeTheActionStartsSkipsActionAndCompletion() async throws {
    let gate = DispatchSemaphore(value: 0)
    let ran = Locked<[Int]>([])
    let completed = Locked<[Int]>([])
    let sut = ConcurrentActionExecutor<Int, Int>(maxInFlight: 1) { input in
      if input == 1 { gate.wait() }
      ran.withLock { $0.append(input) }
      return input
    }
    let first = sut.execute(1) { output in completed.withLock { $0.append(output) } }
    try await waitUntil { sut.core.inFlight == 1 }
    let second = sut.execute(2) { output in completed.withLock { $0.append(output) } }
    try await waitUntil { sut.core.waiting == 1 }
    second.cancel()
    second.cancel()  // twice is harmless
    #expect(second.isCancelled)
    await second.wait()
    gate.signal()
    await first.wait()
    #expect(ran.withLock { $0 } == [1])
    #expect(completed.withLock { $0 } == [1])
    #expect(sut.core.inFlight == 0)
    #expect(sut.core.waiting == 0)
  }

  @Test func cancellingARunningExecutionIsVisibleToTheAction() async {
    let entered = DispatchSemaphore(value: 0)
    let sut = ConcurrentActionExecutor<Void, Bool> {
      entered.signal()
      return spinUntilCancelled()
    }
    let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
    let execution = sut.execute { continuation.yield($0) }
    await offPool { entered.wait() }
    execution.cancel()
    var iterator = stream.makeAsyncIterator()
    #expect(await iterator.next() == true)
  }

  @Test func callerCancellationReachesTheActionInAsyncForm() async {
    let entered = DispatchSemaphore(value: 0)
    let sut = ConcurrentActionExecutor<Void, Bool> {
      entered.signal()
      return spinUntilCancelled()
    }
    let task = Task { await sut.execute() }
    await offPool { entered.wait() }
    task.cancel()
    #expect(await task.value)
  }

  @Test func asyncFormRunsTheActionEvenWhenCancelledWhileWaitingForASlot() async throws {
    let gate = DispatchSemaphore(value: 0)
    let sut = ConcurrentActionExecutor<Int, Int>(maxInFlight: 1) { input in
      if input == 1 { gate.wait() }
      return input * 10
    }
    let blocker = sut.execute(1) { _ in }
    try await waitUntil { sut.core.inFlight == 1 }
    let waiter = Task { await sut.execute(2) }
    try await waitUntil { sut.core.waiting == 1 }
    waiter.cancel()
    gate.signal()
    #expect(await waiter.value == 20)
    await blocker.wait()
  }

  @Test func cancellationRacesKeepEveryExecutionConsistent() async {
    let count = Stress.size(small: 2_000, large: 50_000)
    let ran = Locked<Set<Int>>([])
    let delivered = Locked<[Int: Int]>([:])
    let sut = ConcurrentActionExecutor<Int, Int>(maxInFlight: 3) { input in
      ran.withLock { _ = $0.insert(input) }
      return input
    }
    var executions: [ActionExecution] = []
    executions.reserveCapacity(count)
    for index in 0..<count {
      executions.append(sut.execute(index) { output in delivered.withLock { $0[output, default: 0] += 1 } })
    }
    // Cancel every third from a concurrent task while the executions start, run and finish.
    let cancelled = Set(stride(from: 0, to: count, by: 3))
    let handles = executions
    await Task.detached {
      for index in cancelled { handles[index].cancel() }
    }.value
    for execution in executions { await execution.wait() }

    let ranSet = ran.withLock { $0 }
    let deliveries = delivered.withLock { $0 }
    #expect(Set(deliveries.keys) == ranSet, "every action that ran delivered, and only those")
    #expect(deliveries.values.allSatisfy { $0 == 1 }, "no completion ran twice")
    let notCancelled = Set(0..<count).subtracting(cancelled)
    #expect(notCancelled.isSubset(of: ranSet), "every execution not cancelled ran")
    #expect(sut.core.inFlight == 0)
    #expect(sut.core.waiting == 0)
  }
}

/// Spins until the current task is cancelled (true), or gives up after 10 s (false) instead of hanging.
func spinUntilCancelled() -> Bool {
  // Generous: when the whole package's tests run in parallel, blocking tests can hold the cooperative pool
  // (two threads on two cores) for many seconds before the cancelling side gets to run.
  let deadline = ContinuousClock.now + .seconds(90)
  while !Task.isCancelled {
    if ContinuousClock.now > deadline { return false }
    usleep(200)
  }
  return true
}
