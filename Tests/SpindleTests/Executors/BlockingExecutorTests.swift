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

  @Test func jobsRunInFIFOOrderOnASingleThread() async throws {
    let executor = BlockingExecutor(name: "test.fifo", threadCount: 1)
    defer { executor.shutdown() }
    let gate = DispatchSemaphore(value: 0)
    let blocker = Task(executorPreference: executor) { gate.wait() }
    try await waitUntil { executor.queuedJobsForTesting == 0 && !executor.isIdleForTesting }
    let order = Locked<[Int]>([])
    var tasks: [Task<Void, Never>] = []
    for index in 0..<20 {
      tasks.append(Task(executorPreference: executor) { order.withLock { $0.append(index) } })
      try await waitUntil { executor.queuedJobsForTesting == index + 1 }
    }
    gate.signal()
    await blocker.value
    for task in tasks { await task.value }
    #expect(order.withLock { $0 } == Array(0..<20))
  }

  /// Callers hopping to the executor and back, call after call, from several tasks at once, some with pauses long
  /// enough for the spinners to give up and sleep: every hop runs on the executor exactly once, whether a spinner
  /// (of two, racing for each job) or a thread woken from sleep takes it; a lost job would leave `done` short.
  @Test func hopsFromManyCallersRunOnceEachWhetherSpinnersOrSleepersTakeThem() async throws {
    let executor = BlockingExecutor(name: "test.hops", threadCount: 3)
    defer { executor.shutdown() }
    // Sized for a starved cooperative pool (every hop comes back through it): in a full ThreadSanitizer run with
    // every suite at once, 8 × 300 hops outlasted a 60-second bound that they meet in 0.2 s alone.
    let callers = 8
    let hops = 60
    let onExecutor = Locked(0)
    let offExecutor = Locked(0)
    let done = Locked(0)
    for caller in 0..<callers {
      Task.detached {
        for hop in 0..<hops {
          await withTaskExecutorPreference(executor) {
            (executor.isCurrent ? onExecutor : offExecutor).withLock { $0 += 1 }
          }
          // Every 10th hop of every other caller pauses past the 50 µs spin, so sleepers get woken too.
          if caller.isMultiple(of: 2) && hop.isMultiple(of: 10) { try? await Task.sleep(for: .milliseconds(1)) }
        }
        done.withLock { $0 += 1 }
      }
    }
    try await waitUntil(timeout: .seconds(180)) { done.withLock { $0 } == callers }
    #expect(onExecutor.withLock { $0 } == callers * hops)
    #expect(offExecutor.withLock { $0 } == 0)
  }

  /// Spinning is bounded: once the work stops, every thread (spinners included) goes to sleep on the condition
  /// variable instead of polling on.
  @Test func spinnersGoToSleepOnceTheWorkStops() async throws {
    let executor = BlockingExecutor(name: "test.sleep", threadCount: 3)
    defer { executor.shutdown() }
    for index in 0..<200 {
      let ran = await withTaskExecutorPreference(executor) { executor.isCurrent ? index : -1 }
      #expect(ran == index)
    }
    try await waitUntil(timeout: .seconds(20)) { executor.isIdleForTesting }
    #expect(executor.isIdleForTesting)
    #expect(executor.queuedJobsForTesting == 0)
  }

  /// At most `maxSpinners` threads spin at once, however many run out of work together: of eight threads that all
  /// finish a job at the same moment, two may spin and the rest sleep. (The limit is set below the thread count
  /// here, so that the test bounds it on any machine; by default it is twice the cores.)
  @Test func noMoreThreadsSpinThanTheLimit() async throws {
    let cores = BlockingExecutor.availableProcessorCount
    #expect(BlockingExecutorState.defaultMaxSpinners(threadCount: 8) == min(8, max(2, 2 * cores)))
    #expect(BlockingExecutorState.defaultMaxSpinners(threadCount: 1) == 1)
    let executor = BlockingExecutor(name: "test.spinners", threadCount: 8, maxSpinners: 2)
    defer { executor.shutdown() }
    #expect(executor.maxSpinnersForTesting == 2)
    // Bursts of blocked jobs that all end together, so that every thread runs out of work at the same moment.
    for _ in 0..<20 {
      let gate = DispatchSemaphore(value: 0)
      let jobs = (0..<8).map { _ in Task(executorPreference: executor) { gate.wait() } }
      // Nothing queued and eight threads busy: each thread holds one of the jobs (each blocks its thread).
      try await waitUntil { executor.queuedJobsForTesting == 0 && executor.runningJobsForTesting == 8 }
      for _ in 0..<8 { gate.signal() }
      for job in jobs { await job.value }
      try await waitUntil(timeout: .seconds(20)) { executor.isIdleForTesting }
    }
    #expect(executor.peakSpinnersForTesting <= 2)
  }

  @Test func sharedExecutorIsSizedForBlockingWork() {
    let cores = BlockingExecutor.availableProcessorCount
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

  @Test func blockingActionsDoNotStarveUnrelatedTasks() async {
    // Runs in a child process, so that other tests, which can starve the cooperative pool for tens of seconds,
    // cannot hold the unrelated tasks back past the actions' 60 s bound.
    let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
      for failure in await starvationScenario() { print("starvation failure: \(failure)") }
      print("starvation scenario done")
    }
    let output = String(decoding: result?.standardOutputContent ?? [], as: UTF8.self)
    let lines = output.split(separator: "\n")
    #expect(lines.contains("starvation scenario done"))
    let failures = lines.filter { $0.hasPrefix("starvation failure: ") }
    #expect(failures.isEmpty, "\(failures.joined(separator: "; "))")
  }
}

/// More blocking actions than cores, each blocked until the unrelated tasks are done, on a BlockingExecutor:
/// meanwhile unrelated async tasks at the actions' priority (the seed's .high) must run to the end. Had the actions
/// run on the cooperative pool (the seed), they would hold every pool thread of that priority, and the unrelated
/// tasks could only run once the actions gave up waiting (after 60 s).
///
/// No clock: the actions block on a semaphore the scenario signals only after the unrelated tasks have finished, so
/// a loaded machine (a sanitizer, other processes) makes it slower, never wrong. It used to let the actions sleep
/// 3 s and require the unrelated tasks within 2 s, which a loaded CI machine can miss.
///
/// Returns what went wrong (empty when all is well).
func starvationScenario() async -> [String] {
  var failures: [String] = []
  let cores = BlockingExecutor.availableProcessorCount
  let actions = cores + 2
  let executor = BlockingExecutor(name: "test.starve", threadCount: actions)
  defer { executor.shutdown() }
  let started = Atomic<Int>(0)
  let finished = Atomic<Int>(0)
  let gaveUp = Atomic<Int>(0)
  let onExecutor = Atomic<Int>(0)
  let release = DispatchSemaphore(value: 0)
  let sut = ConcurrentActionExecutor<Void, Void>(executor: executor) {
    started.add(1, ordering: .relaxed)
    if executor.isCurrent { onExecutor.add(1, ordering: .relaxed) }
    if release.wait(timeout: .now() + 60) == .timedOut { gaveUp.add(1, ordering: .relaxed) }
    finished.add(1, ordering: .relaxed)
  }
  let executions = (0..<actions).map { _ in sut.execute {} }
  let deadline = ContinuousClock.now + .seconds(60)
  while started.load(ordering: .relaxed) < actions && ContinuousClock.now < deadline {
    try? await Task.sleep(for: .milliseconds(5))
  }

  let clock = ContinuousClock()
  let begin = clock.now
  var sum = 0
  for index in 0..<(cores * 4) {
    sum += await Task.detached(priority: .high) { index }.value
  }
  let elapsed = clock.now - begin
  let finishedMeanwhile = finished.load(ordering: .relaxed)
  for _ in 0..<actions { release.signal() }
  for execution in executions { await execution.wait() }

  if started.load(ordering: .relaxed) != actions { failures.append("only some actions started") }
  if sum != (0..<(cores * 4)).reduce(0, +) { failures.append("wrong sum \(sum)") }
  if finishedMeanwhile != 0 {
    failures.append("\(finishedMeanwhile) actions gave up waiting before the unrelated tasks ended (\(elapsed))")
  }
  if gaveUp.load(ordering: .relaxed) != 0 { failures.append("\(gaveUp.load(ordering: .relaxed)) actions gave up") }
  if onExecutor.load(ordering: .relaxed) != actions { failures.append("actions ran off the BlockingExecutor") }
  if finished.load(ordering: .relaxed) != actions { failures.append("not every action finished") }
  return failures
}

/// Polls `condition` every 5 ms; fails (instead of hanging) after `timeout`.
///
/// The bound is generous: under `SPINDLE_STRESS=1` every suite runs large in parallel, and a task that must run
/// for the condition to hold can wait tens of seconds for one of the two cooperative threads (seen: 10 s was short).
func waitUntil(
  timeout: Duration = .seconds(60),
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
