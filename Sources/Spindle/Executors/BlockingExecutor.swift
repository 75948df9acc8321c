import Synchronization

/// A task executor with its own threads, for synchronous work that blocks.
///
/// Swift's cooperative pool has one thread per core. A synchronous call that sleeps, waits on a lock
/// or does file I/O holds its pool thread for the whole call, and a few of them stall every other task
/// in the process. `BlockingExecutor` owns a fixed number of POSIX threads that take jobs from one
/// FIFO queue (a mutex and a condition variable), so blocking work waits there instead.
///
/// Use it as a task executor preference (SE-0417): nonisolated code in the task, and every child
/// task, runs on these threads.
///
/// ```swift
/// let text = await withTaskExecutorPreference(BlockingExecutor.shared) {
///   readWholeFile(path)  // blocks one BlockingExecutor thread, not a cooperative one
/// }
/// Task(executorPreference: BlockingExecutor.shared) { compress(archive) }
/// ```
///
/// Lifecycle: threads start in `init` and run until ``shutdown()``. After `shutdown()` the threads
/// finish the jobs already queued, then exit; jobs enqueued later are handed to Swift's global
/// concurrent executor, so a task that prefers a shut-down executor still completes (on the
/// cooperative pool) instead of hanging. The threads keep the executor alive until they exit.
// Stored properties are immutable; the job queue in `state` is guarded by its pthread mutex.
public final class BlockingExecutor: TaskExecutor, CustomStringConvertible, @unchecked Sendable {
  /// The executor shared by the whole process, for blocking work that has no dedicated executor.
  ///
  /// It has ``defaultSharedThreadCount`` threads: twice the number of online cores, at least 4 and at
  /// most 64. Blocking work spends most of its time waiting (I/O, sleeps, locks), so more threads than
  /// cores keep the cores busy; at least 4 so that a couple of stalled calls on a small machine do not
  /// hold up the rest; at most 64 to bound memory and context switches when the work is CPU-bound
  /// after all. Its threads start on first use and cannot be shut down.
  public static let shared = BlockingExecutor(name: "spindle.blocking", threadCount: defaultSharedThreadCount)

  /// The number of threads of ``shared``: `min(64, max(4, 2 × available cores))` (the processors this process may
  /// use: see ``WorkQueue/activeProcessorCount``).
  public static var defaultSharedThreadCount: Int {
    min(64, max(4, 2 * availableProcessorCount))
  }

  /// The name given to the executor, for debugging.
  public let name: String

  /// How many threads the executor runs.
  public let threadCount: Int

  private let state: BlockingExecutorState

  /// Creates an executor and starts `threadCount` threads.
  ///
  /// - Parameters:
  ///   - name: a name for debugging (on Apple platforms the threads are named after it).
  ///   - threadCount: how many threads to start; must be at least 1.
  public convenience init(name: String = "spindle.blocking", threadCount: Int) {
    self.init(name: name, threadCount: threadCount, maxSpinners: nil)
  }

  /// Creates an executor whose idle threads spin at most `maxSpinners` at a time (tests), or as many as
  /// `BlockingExecutorState.defaultMaxSpinners(threadCount:)` allows when nil.
  init(name: String, threadCount: Int, maxSpinners: Int?) {
    precondition(
      threadCount >= 1,
      "BlockingExecutor(threadCount:) needs at least 1 thread, got \(threadCount)"
    )
    self.name = name
    self.threadCount = threadCount
    self.state = BlockingExecutorState(
      maxSpinners: maxSpinners ?? BlockingExecutorState.defaultMaxSpinners(threadCount: threadCount))
    for index in 0..<threadCount {
      startThread(index: index)
    }
  }

  /// Queues a job to run on one of the executor's threads (FIFO), or on the global executor after shutdown.
  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    if !state.push(unowned) {
      globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
    }
  }

  /// Stops the executor: queued jobs still run, then the threads exit.
  ///
  /// Returns at once; it does not wait for the threads. Jobs enqueued after this call run on Swift's
  /// global concurrent executor instead, so nothing hangs and nothing is lost. Calling it again does
  /// nothing. ``shared`` cannot be shut down (a precondition failure).
  public func shutdown() {
    precondition(self !== Self.shared, "BlockingExecutor.shared cannot be shut down")
    state.shutdown()
  }

  /// Whether ``shutdown()`` has been called.
  public var isShutdown: Bool { state.isShutdown }

  /// Whether the calling code runs on one of this executor's threads.
  ///
  /// ```swift
  /// precondition(BlockingExecutor.shared.isCurrent, "call me from blocking work only")
  /// ```
  public var isCurrent: Bool {
    currentExecutorKey.value == Unmanaged.passUnretained(state).toOpaque()
  }

  /// The number of threads still running (drops to 0 after ``shutdown()`` once the queue is drained).
  public var liveThreadCount: Int { state.liveThreads }

  /// Jobs waiting for a thread (for tests).
  var queuedJobsForTesting: Int { state.queuedJobs }

  /// Whether every live thread waits for work (for tests).
  var isIdleForTesting: Bool { state.idleThreads == state.liveThreads }

  /// The most threads that may spin at once, waiting for a job, before they sleep.
  var maxSpinnersForTesting: Int { state.maxSpinners }

  /// Threads running a job (or between jobs), neither sleeping nor spinning.
  var runningJobsForTesting: Int { state.busyThreads }

  /// The most threads that have been spinning at once so far.
  var peakSpinnersForTesting: Int { state.peakSpinners }

  /// A short description for logs: the name and the thread count.
  public var description: String { "BlockingExecutor(\(name), threads: \(threadCount))" }

  private func startThread(index: Int) {
    state.threadStarted()
    PlatformThread.start(name: "\(name)-\(index)") { self.runLoop() }
  }

  private func runLoop() {
    let unownedSelf = asUnownedTaskExecutor()
    currentExecutorKey.value = Unmanaged.passUnretained(state).toOpaque()
    while let job = state.pop() {
      job.runSynchronously(on: unownedSelf)
    }
    state.threadExited()
  }

  static var availableProcessorCount: Int { Platform.availableProcessorCount }
}

/// The thread-specific slot whose value on a BlockingExecutor thread is its executor's state.
private let currentExecutorKey = ThreadLocalKey()

/// The job queue of a ``BlockingExecutor``: a ``RingBuffer`` of jobs, a mutex and a condition variable.
///
/// Threads that run out of work spin for up to ``spinDuration`` before they sleep on the condition
/// variable: callers that hop to the executor and back, call after call, then find a thread awake
/// instead of paying a futex wake-up per call. A spinner polls the job count without a system call for
/// its first ``busyPollDuration`` (a caller's next hop usually comes within a few microseconds; a
/// `sched_yield` per poll costs about a microsecond and may hand the core to another process for a whole
/// time slice), then yields the CPU at each poll; on a one-core machine it only yields. A spinner that
/// loses a job to another spinner keeps spinning until its time is up.
///
/// At most ``maxSpinners`` threads spin at once (twice the cores, at least 2, at most the executor's
/// threads) and the others sleep. Measured in `spindle bench executors` on a shared 2-core machine:
/// - every idle thread polling with `sched_yield` only made a lone caller's round trip 58–75 µs, one such
///   spinner 18–57 µs;
/// - two spinners that poll first took `ConcurrentActionExecutor`'s async form from 8 concurrent callers
///   from a median 4.9× `await Task {}.value` to 3.2×, and a lone caller from 11× to 7.3× (ten interleaved
///   runs each);
/// - four (all of the shared executor's threads there) instead of two: from 8 callers a median 1.22×
///   instead of 1.45× in ten interleaved runs (1.12–1.53× against 1.31–1.66×), a lone caller 6.8× instead of
///   9.0×: with two, the third and fourth jobs of a burst each paid a condition-variable wake-up.
///
/// Most of what remains is the hop back: the task is handed to the cooperative pool from a foreign thread,
/// and Dispatch wakes a sleeping worker for it with a futex.
// Every mutable field is read and written only while `mutex` is held; `pending` is an atomic copy
// of `jobs.count` that spinning threads read without the lock.
final class BlockingExecutorState: @unchecked Sendable {
  private let mutex = PlatformMutex()
  private let condition = PlatformCondition()
  private var jobs = RingBuffer<UnownedJob>()
  private var stopped = false
  private var live = 0
  private var idle = 0
  private var spinning = 0
  /// The most threads that were spinning at once (read by tests).
  private var peakSpinning = 0
  private let pending = Atomic<Int>(0)

  /// How long an out-of-work thread spins before it sleeps.
  static let spinDuration: Duration = .microseconds(50)
  /// How long a spinner polls without yielding the CPU, at the start of its spin (multi-core machines only).
  static let busyPollDuration: Duration = .microseconds(5)
  /// The most threads spinning at once: twice the cores (spinners soon yield, so more spinners than
  /// cores is fine), at least 2, never more than the executor's threads.
  let maxSpinners: Int
  /// Whether spinners poll without yielding at first: pointless with one core, where the thread that
  /// would hand over the next job cannot run while the spinner holds the core.
  static let busyPollAllowed = Platform.availableProcessorCount > 1

  init(maxSpinners: Int) {
    self.maxSpinners = maxSpinners
  }

  /// Twice the cores, at least 2, at most `threadCount`. Measured on 2 cores only (see above); on a large machine
  /// this lets many threads spin for up to ``spinDuration`` after a burst, most of that time yielding the CPU.
  static func defaultMaxSpinners(threadCount: Int) -> Int {
    min(threadCount, max(2, 2 * Platform.availableProcessorCount))
  }

  deinit {
    condition.destroy()
    mutex.destroy()
  }

  private func withLock<T>(_ body: () -> T) -> T {
    mutex.withLock(body)
  }

  /// Appends a job; false if the executor is shut down (the caller must run the job elsewhere).
  func push(_ job: UnownedJob) -> Bool {
    let (accepted, wake) = withLock { () -> (Bool, Bool) in
      if stopped { return (false, false) }
      jobs.append(job)
      pending.store(jobs.count, ordering: .relaxed)
      return (true, idle > 0 && jobs.count > spinning)
    }
    if wake { condition.signal() }
    return accepted
  }

  /// Waits for the next job; nil once the executor is shut down and the queue is empty.
  func pop() -> UnownedJob? {
    withLock {
      // Spin (while fewer than `maxSpinners` do) until a job comes or the spin time is up; a job that another
      // thread took first sends this one back to spinning, not to sleep, while its time lasts.
      var spinDeadline: ContinuousClock.Instant?
      while jobs.isEmpty && !stopped && spinning < maxSpinners {
        let clock = ContinuousClock()
        let deadline = spinDeadline ?? clock.now.advanced(by: Self.spinDuration)
        spinDeadline = deadline
        spinning += 1
        if spinning > peakSpinning { peakSpinning = spinning }
        mutex.unlock()
        let sawJob = spinUntilPending(deadline: deadline, clock: clock)
        mutex.lock()
        spinning -= 1
        if !sawJob { break }
      }
      while jobs.isEmpty && !stopped {
        idle += 1
        condition.wait(on: mutex)
        idle -= 1
      }
      guard let job = jobs.popFirst() else { return nil }
      pending.store(jobs.count, ordering: .relaxed)
      return job
    }
  }

  /// Polls the job count until it is non-zero (true) or `deadline` passes (false): without a system call for
  /// the first ``busyPollDuration``, then yielding the CPU at each poll.
  private func spinUntilPending(deadline: ContinuousClock.Instant, clock: ContinuousClock) -> Bool {
    if Self.busyPollAllowed {
      let busyUntil = min(deadline, clock.now.advanced(by: Self.busyPollDuration))
      var polls = 0
      while pending.load(ordering: .relaxed) == 0 {
        polls &+= 1
        // Reading the clock costs more than a poll: look at it every 64 polls (well under a microsecond).
        if polls & 63 == 0 && clock.now >= busyUntil { break }
      }
    }
    while pending.load(ordering: .relaxed) == 0 {
      if clock.now >= deadline { return false }
      Platform.yieldThread()
    }
    return true
  }

  func shutdown() {
    withLock { stopped = true }
    condition.broadcast()
  }

  var isShutdown: Bool { withLock { stopped } }
  var liveThreads: Int { withLock { live } }
  var idleThreads: Int { withLock { idle } }
  var queuedJobs: Int { withLock { jobs.count } }
  var peakSpinners: Int { withLock { peakSpinning } }
  /// Threads neither sleeping nor spinning: running a job, or about to look for one.
  var busyThreads: Int { withLock { live - idle - spinning } }

  func threadStarted() { withLock { live += 1 } }
  func threadExited() { withLock { live -= 1 } }
}
