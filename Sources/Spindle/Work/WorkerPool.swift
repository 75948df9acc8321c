#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

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
final class WorkerPool: @unchecked Sendable {
  // @unchecked Sendable: every field is guarded by `mutex`; `condition` is used with it.
  struct Job {
    let engine: WorkEngine
    let item: AnyWork
  }

  static let shared = WorkerPool()

  /// How long a thread waits for a job before it exits, in seconds.
  static let idleTimeout = 2

  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let condition: UnsafeMutablePointer<pthread_cond_t>
  private var jobs = RingBuffer<Job>()
  /// Threads alive.
  private var threads = 0
  /// Threads running a job.
  private var busy = 0
  /// Threads waiting on `condition`.
  private var parked = 0

  private init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    pthread_mutex_init(mutex, nil)
    condition = .allocate(capacity: 1)
    condition.initialize(to: pthread_cond_t())
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    #if !canImport(Darwin)
      pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    #endif
    pthread_cond_init(condition, &attributes)
    pthread_condattr_destroy(&attributes)
  }

  /// Runs `engine.runWorker(item)` on a pool thread.
  func start(_ item: AnyWork, on engine: WorkEngine) {
    pthread_mutex_lock(mutex)
    jobs.append(Job(engine: engine, item: item))
    // Threads not running a job (parked, or about to look at the job list) will each take one job.
    let spawn = jobs.count > threads - busy
    if parked > 0 { pthread_cond_signal(condition) }
    if spawn { threads += 1 }
    pthread_mutex_unlock(mutex)
    if spawn { spawnThread() }
  }

  private func spawnThread() {
    var thread = pthread_t()
    #if canImport(Darwin)
      var optionalThread: pthread_t?
    #endif
    let context = Unmanaged.passRetained(self).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    #if canImport(Darwin)
      let status = pthread_create(&optionalThread, &attributes, workerPoolThreadMain, context)
      _ = thread
    #else
      let status = pthread_create(&thread, &attributes, workerPoolThreadMain, context)
    #endif
    pthread_attr_destroy(&attributes)
    precondition(status == 0, "Spindle: could not create a worker thread (pthread_create: \(status))")
  }

  /// The loop of a pool thread: take a job, run it, park when there is none, exit after `idleTimeout`.
  fileprivate func threadMain() {
    pthread_mutex_lock(mutex)
    while true {
      if let job = jobs.popFirst() {
        busy += 1
        pthread_mutex_unlock(mutex)
        job.engine.runWorker(job.item)
        pthread_mutex_lock(mutex)
        busy -= 1
        continue
      }
      var deadline = timespec()
      #if canImport(Darwin)
        clock_gettime(CLOCK_REALTIME, &deadline)
      #else
        clock_gettime(CLOCK_MONOTONIC, &deadline)
      #endif
      deadline.tv_sec += Self.idleTimeout
      parked += 1
      let status = pthread_cond_timedwait(condition, mutex, &deadline)
      parked -= 1
      if status == ETIMEDOUT && jobs.isEmpty {
        threads -= 1
        pthread_mutex_unlock(mutex)
        return
      }
    }
  }
}

#if canImport(Darwin)
  private func workerPoolThreadMain(_ context: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
    Unmanaged<WorkerPool>.fromOpaque(context).takeRetainedValue().threadMain()
    return nil
  }
#else
  private func workerPoolThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<WorkerPool>.fromOpaque(context!).takeRetainedValue().threadMain()
    return nil
  }
#endif
