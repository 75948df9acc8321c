import Dispatch
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite struct BlockingExecutorTests {
  @Test func tasksPreferringTheExecutorRunOnItsThreads() async {
    let executor = BlockingExecutor(name: "test.threads", threadCount: 2)
    defer { executor.shutdown() }
    let onExecutor = await Task(executorPreference: executor) { executor.isCurrent }.value
    let scoped = await withTaskExecutorPreference(executor) { executor.isCurrent }
    #expect(onExecutor)
    #expect(scoped)
    #expect(!executor.isCurrent)
    #expect(!BlockingExecutor.shared.isCurrent)
  }

  @Test func runsManyJobsBeyondTheInitialQueueCapacity() async {
    let executor = BlockingExecutor(name: "test.many", threadCount: 1)
    defer { executor.shutdown() }
    let total = await withTaskGroup(of: Int.self) { group in
      for index in 0..<500 {
        group.addTask(executorPreference: executor) { executor.isCurrent ? index : -1_000_000 }
      }
      return await group.reduce(0, +)
    }
    #expect(total == (0..<500).reduce(0, +))
  }

  @Test func sharedExecutorIsSizedForBlockingWork() {
    let cores = BlockingExecutor.onlineProcessorCount
    #expect(BlockingExecutor.defaultSharedThreadCount == min(64, max(4, 2 * cores)))
    #expect(BlockingExecutor.shared.threadCount == BlockingExecutor.defaultSharedThreadCount)
    #expect(!BlockingExecutor.shared.isShutdown)
  }

  @Test func shutdownDrainsQueuedJobsThenStopsTheThreads() async throws {
    let executor = BlockingExecutor(name: "test.drain", threadCount: 1)
    let gate = DispatchSemaphore(value: 0)
    let first = Task(executorPreference: executor) { gate.wait() }
    try await waitUntil { executor.queuedJobsForTesting == 0 && !executor.isIdleForTesting }
    let second = Task(executorPreference: executor) { executor.isCurrent }
    try await waitUntil { executor.queuedJobsForTesting == 1 }
    executor.shutdown()
    #expect(executor.isShutdown)
    gate.signal()
    await first.value
    #expect(await second.value, "a job queued before shutdown runs on the executor")
    try await waitUntil { executor.liveThreadCount == 0 }
    #expect(executor.liveThreadCount == 0)
  }

  @Test func jobsEnqueuedAfterShutdownStillRunElsewhere() async throws {
    let executor = BlockingExecutor(name: "test.after", threadCount: 2)
    executor.shutdown()
    executor.shutdown()  // a second call does nothing
    try await waitUntil { executor.liveThreadCount == 0 }
    let ranOnExecutor = await Task(executorPreference: executor) { executor.isCurrent }.value
    #expect(!ranOnExecutor)
  }

  @Test func threadCountBelowOneIsAPreconditionFailure() async {
    await #expect(processExitsWith: .failure) {
      _ = BlockingExecutor(name: "bad", threadCount: 0)
    }
  }

  @Test func sharedExecutorCannotBeShutDown() async {
    await #expect(processExitsWith: .failure) {
      BlockingExecutor.shared.shutdown()
    }
  }

  @Test func blockingActionsDoNotStarveUnrelatedTasks() async throws {
    // More blocking actions than cores, each sleeping 3 s, on a BlockingExecutor: meanwhile unrelated
    // async tasks at the actions' priority (the seed's .high) must finish promptly. Had the actions run
    // on the cooperative pool (the seed), they would hold every pool thread of that priority for 3 s.
    let cores = BlockingExecutor.onlineProcessorCount
    let actions = cores + 2
    let executor = BlockingExecutor(name: "test.starve", threadCount: actions)
    defer { executor.shutdown() }
    let started = Atomic<Int>(0)
    let finished = Atomic<Int>(0)
    let sut = ConcurrentActionExecutor<Void, Bool>(executor: executor) {
      started.add(1, ordering: .relaxed)
      sleep(3)
      finished.add(1, ordering: .relaxed)
      return executor.isCurrent
    }
    let executions = (0..<actions).map { _ in sut.execute { #expect($0) } }
    try await waitUntil { started.load(ordering: .relaxed) == actions }

    let clock = ContinuousClock()
    let begin = clock.now
    var sum = 0
    for index in 0..<(cores * 4) {
      sum += await Task.detached(priority: .high) { index }.value
    }
    let elapsed = clock.now - begin
    #expect(sum == (0..<(cores * 4)).reduce(0, +))
    #expect(elapsed < .seconds(2), "unrelated tasks took \(elapsed) while blocking actions ran")
    #expect(finished.load(ordering: .relaxed) < actions, "the unrelated work overlapped the blocking actions")
    for execution in executions { await execution.wait() }
    #expect(finished.load(ordering: .relaxed) == actions)
  }
}

/// Polls `condition` every 5 ms; fails (instead of hanging) after `timeout`.
func waitUntil(
  timeout: Duration = .seconds(10),
  sourceLocation: SourceLocation = #_sourceLocation,
  _ condition: () -> Bool
) async throws {
  let deadline = ContinuousClock.now + timeout
  while !condition() {
    if ContinuousClock.now > deadline {
      Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
      throw CancellationError()
    }
    try await Task.sleep(for: .milliseconds(5))
  }
}
