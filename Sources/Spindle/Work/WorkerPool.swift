/// The threads that run workers of every ``WorkQueue``: a pool that grows only when every thread is busy.
///
/// Why not Dispatch: a worker that hands its slot to a callback body ends, and the `finish` call that later
/// hands the slot on starts a new worker at once. On serial dispatch queues every such start asks
/// Dispatch's overcommitting pool for a thread, and it creates one whenever none is idle at that instant, so a
/// width-2 queue of callbacks grew the process by tens of threads (258, the libdispatch cap, before the rebuild).
/// Here a start goes to a parked thread if there is one, or to a thread that is just finishing (it looks at the
/// job list before it parks); a new thread is made only when every thread runs a job. So the pool has at most
/// as many threads as workers ever ran at once (at most the sum of the widths of the queues), plus one per
/// start that raced a finishing thread; threads idle for `idleTimeout` seconds exit.
// @unchecked Sendable: every field is guarded by `mutex`; `condition` is used with it.
final class WorkerPool: @unchecked Sendable {
  /// A worker to run: its engine and its first item. A tuple, so that the thread can move the item out of it: the
  /// worker must hold the only reference the pool had, or the item (and its value) would live until it stops.
  typealias Job = (engine: WorkEngine, item: AnyWork)

  static let shared = WorkerPool()

  /// How long a thread waits for a job before it exits, in seconds.
  static let idleTimeout = 2

  private let mutex = PlatformMutex()
  private let condition = PlatformCondition()
  // Guarded by `mutex`; dynamic exclusivity checks off, as on `AnyWork`'s locked fields.
  @exclusivity(unchecked) private var jobs = RingBuffer<Job>()
  /// Threads alive.
  @exclusivity(unchecked) private var threads = 0
  /// Threads running a job.
  @exclusivity(unchecked) private var busy = 0
  /// Threads waiting on `condition`.
  @exclusivity(unchecked) private var parked = 0

  private init() {}

  /// Runs `engine.runWorker(item)` on a pool thread, which gets the caller's reference to `item`.
  func start(_ item: consuming AnyWork, on engine: WorkEngine) {
    mutex.lock()
    jobs.append((engine: engine, item: consume item))
    // Threads not running a job (parked, or about to look at the job list) will each take one job.
    let spawn = jobs.count > threads - busy
    if parked > 0 { condition.signal() }
    if spawn { threads += 1 }
    mutex.unlock()
    if spawn { PlatformThread.start(name: "spindle.worker") { self.threadMain() } }
  }

  /// Runs a job's worker; the job's references end here, before the caller takes the pool's lock again: the one to the
  /// engine can be the last (its queue dropped while the worker ran), and the engine's deinit lets go of the queue's
  /// observers, whose captures are user code's (a deinit there that added work took this lock again). The item's
  /// reference moves into the worker.
  @inline(never)
  private static func run(_ engine: consuming WorkEngine, _ item: consuming AnyWork) {
    engine.runWorker(consume item)
  }

  /// The loop of a pool thread: take a job, run it, park when there is none, exit after `idleTimeout`.
  private func threadMain() {
    mutex.lock()
    while true {
      if case (let engine, let item)? = jobs.popFirst() {
        busy += 1
        mutex.unlock()
        Self.run(consume engine, consume item)
        mutex.lock()
        busy -= 1
        continue
      }
      parked += 1
      let signalled = condition.wait(on: mutex, seconds: Self.idleTimeout)
      parked -= 1
      if !signalled && jobs.isEmpty {
        threads -= 1
        mutex.unlock()
        return
      }
    }
  }
}
