#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

// The package's one door to the C library: the only file of the core (outside Work/, which the engine's rebuild
// converts later) that imports Glibc, Musl or Darwin, and the only place that looks symbols up with `dlsym`. Every
// name here is `package`, so SpindleFoundation, TiltShift, the benchmarks and the CLI use the same shim instead of
// repeating the `#if canImport(Glibc) … #elseif canImport(Musl) … #elseif canImport(Darwin)` block.
//
// Contents, by kind:
// - `Platform`: one-call facts and actions (processor count, thread id, yield, standard error, symbols, errno text).
// - `PlatformMutex`, `PlatformCondition`: a pthread mutex and condition variable, which ThreadSanitizer sees.
// - `ThreadLocalKey`: a pthread thread-specific slot holding a raw pointer.
// - `ThreadLocalCell`: one pointer-sized cell per thread, found once, then read and written as plain memory.
// - `PlatformThread`: starts a detached POSIX thread.

/// One-call access to the C library for the whole package: facts about the machine and small system actions.
///
/// ```swift
/// let cores = Platform.onlineProcessorCount
/// Platform.writeToStandardError("something went wrong\n")
/// ```
package enum Platform {
  /// The number of processors online now (at least 1), whether or not this process may run on them: see
  /// ``availableProcessorCount``.
  package static var onlineProcessorCount: Int {
    let count = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    return count > 0 ? count : 1
  }

  /// The number of processors this process can use (at least 1): the online ones, narrowed on Linux by the calling
  /// thread's CPU affinity (`taskset`, a cpuset) and by the CPU quota of the process's control group or of a group
  /// above it (a container's `--cpus`; a fractional quota counts as the next whole processor). What a queue's default width and the bound on
  /// spinning workers are made of: in a container given 2 of a host's 64 processors, 2, not 64.
  ///
  /// The affinity is read at each call; the quota once per process (read from `/proc` and `/sys`).
  package static var availableProcessorCount: Int {
    var count = onlineProcessorCount
    #if os(Linux)
      if let affinity = affinityProcessorCount { count = min(count, affinity) }
      if let quota = cgroupProcessorQuota { count = min(count, quota) }
    #endif
    return max(1, count)
  }

  #if os(Linux)
    private typealias GetAffinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer?) -> Int32
    /// glibc's and musl's `sched_getaffinity`, which Swift's C module does not declare (it needs `_GNU_SOURCE`).
    private static let getAffinity = lookUpFunction("sched_getaffinity", as: GetAffinity.self)

    /// The processors in the calling thread's affinity mask; nil when the call fails.
    private static var affinityProcessorCount: Int? {
      guard let getAffinity else { return nil }
      // 1,024 processors (the size of glibc's `cpu_set_t`); a machine with more answers EINVAL, and the mask is
      // not consulted.
      var mask = [UInt64](repeating: 0, count: 16)
      let result = mask.withUnsafeMutableBytes { getAffinity(0, $0.count, $0.baseAddress) }
      guard result == 0 else { return nil }
      let count = mask.reduce(0) { $0 + $1.nonzeroBitCount }
      return count > 0 ? count : nil
    }

    /// The CPU quota of this process's control group in whole processors (rounded up), or nil when it has none.
    private static let cgroupProcessorQuota: Int? = processorQuota(
      cgroupMembership: readSmallFile("/proc/self/cgroup") ?? "", readFile: readSmallFile)
  #endif

  /// The CPU quota, in whole processors, of the control group that `cgroupMembership` (the text of `/proc/self/cgroup`)
  /// names, reading the files of `/sys/fs/cgroup` through `readFile`: the smallest limit of the group and of each group
  /// above it (a parent's limit binds its children), in the cgroup v2 unified hierarchy (`cpu.max`) if it is mounted
  /// there, else in cgroup v1's `cpu` controller (`cpu.cfs_quota_us` over `cpu.cfs_period_us`); nil when none limits.
  package static func processorQuota(cgroupMembership: String, readFile: (String) -> String?) -> Int? {
    /// The directories from `path` (a group path, `/a/b`) up to the hierarchy's root, under `mount`.
    func directories(under mount: String, from path: String) -> [String] {
      var parts = path.split(separator: "/").map(String.init)
      var result: [String] = []
      while true {
        result.append(parts.isEmpty ? mount : mount + "/" + parts.joined(separator: "/"))
        if parts.isEmpty { return result }
        parts.removeLast()
      }
    }
    func smallest(_ quotas: [Int?]) -> Int? { quotas.compactMap { $0 }.min() }
    if let path = cgroupPath(inProcSelfCgroup: cgroupMembership, controller: nil),
      readFile("/sys/fs/cgroup/cgroup.controllers") != nil
    {
      return smallest(
        directories(under: "/sys/fs/cgroup", from: path).map { directory in
          readFile(directory + "/cpu.max").flatMap { processorQuota(cpuMax: $0) }
        })
    }
    let path = cgroupPath(inProcSelfCgroup: cgroupMembership, controller: "cpu") ?? "/"
    let mounts = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
    for mount in mounts where readFile(mount + "/cpu.cfs_period_us") != nil {
      return smallest(
        directories(under: mount, from: path).map { directory in
          guard let quota = readFile(directory + "/cpu.cfs_quota_us"),
            let period = readFile(directory + "/cpu.cfs_period_us")
          else { return nil }
          return processorQuota(cfsQuota: quota, cfsPeriod: period)
        })
    }
    return nil
  }

  /// The group path of `controller` (nil: the cgroup v2 unified hierarchy, `0::path`) in the text of
  /// `/proc/self/cgroup`, whose lines read `id:controllers:path`; nil when it is not there.
  package static func cgroupPath(inProcSelfCgroup text: String, controller: String?) -> String? {
    for line in text.split(separator: "\n") {
      let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard fields.count == 3 else { continue }
      let matches: Bool
      if let controller {
        matches = fields[1].split(separator: ",").contains { $0 == controller }
      } else {
        matches = fields[0] == "0" && fields[1].isEmpty
      }
      if matches { return fields[2].isEmpty ? "/" : String(fields[2]) }
    }
    return nil
  }

  /// Whole processors (rounded up, at least 1) in a cgroup v2 `cpu.max` (`"150000 100000"`: 1.5 processors, so 2);
  /// nil for no limit (`"max 100000"`) or text that is not a quota.
  package static func processorQuota(cpuMax text: String) -> Int? {
    let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
    guard fields.count >= 2, let quota = Int(fields[0]), let period = Int(fields[1]) else { return nil }
    return wholeProcessors(quota: quota, period: period)
  }

  /// Whole processors (rounded up, at least 1) in a cgroup v1 CFS quota and period (`cpu.cfs_quota_us`,
  /// `cpu.cfs_period_us`); nil for no limit (a quota of -1) or text that is not a number.
  package static func processorQuota(cfsQuota: String, cfsPeriod: String) -> Int? {
    func number(_ text: String) -> Int? { Int(text.filter { $0 != "\n" && $0 != " " }) }
    guard let quota = number(cfsQuota), let period = number(cfsPeriod) else { return nil }
    return wholeProcessors(quota: quota, period: period)
  }

  private static func wholeProcessors(quota: Int, period: Int) -> Int? {
    guard quota > 0, period > 0 else { return nil }
    return max(1, (quota + period - 1) / period)
  }

  /// The text of a small file (at most 4 KiB read), or nil when it cannot be read.
  private static func readSmallFile(_ path: String) -> String? {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes = [UInt8](repeating: 0, count: 4_096)
    var length = 0
    while length < bytes.count {
      let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + length, $0.count - length) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { break }
      length += count
    }
    return String(decoding: bytes[..<length], as: UTF8.self)
  }

  /// An identifier of the calling thread (its `pthread_t`, as a number).
  package static var currentThreadID: UInt64 {
    #if canImport(Glibc)
      return UInt64(pthread_self())
    #else
      return UInt64(UInt(bitPattern: pthread_self()))
    #endif
  }

  /// Asks the kernel to back `length` bytes at `pointer` (2 MiB aligned) with huge pages (`madvise`); a hint that
  /// is ignored where unsupported.
  package static func adviseHugePages(_ pointer: UnsafeMutableRawPointer, length: Int) {
    #if os(Linux)
      _ = madvise(pointer, length, MADV_HUGEPAGE)
    #endif
  }

  /// A cheap, coarse monotonic clock in nanoseconds (`CLOCK_MONOTONIC_COARSE` on Linux: a few nanoseconds to
  /// read, a few milliseconds of resolution), for "running for 2.4 s" in reports, never for measuring.
  @inline(__always)
  package static var coarseUptimeNanoseconds: UInt64 {
    var now = timespec()
    #if os(Linux)
      clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
    #else
      clock_gettime(CLOCK_MONOTONIC, &now)
    #endif
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
  }

  /// Gives up the rest of the calling thread's time slice (`sched_yield`).
  package static func yieldThread() {
    sched_yield()
  }

  /// Writes `text` to standard error unbuffered, retrying short writes; gives up silently if the descriptor fails.
  package static func writeToStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { break }
        offset += written
      }
    }
  }

  /// The calling thread's last C error number (`errno`).
  package static var lastErrorNumber: Int32 { errno }

  /// The system's sentence for a C error number (`strerror`).
  package static func errorDescription(_ code: Int32) -> String {
    String(cString: strerror(code))
  }

  /// The C function named `name` anywhere in the process (`dlsym(RTLD_DEFAULT, name)`), as type `Function`.
  ///
  /// Returns nil when the symbol is not found (a statically linked executable may lack it). `Function` must be the
  /// symbol's real `@convention(c)` type; the caller vouches for it.
  ///
  /// ```swift
  /// typealias Trim = @convention(c) (Int) -> Int32
  /// if let trim = Platform.lookUpFunction("malloc_trim", as: Trim.self) { _ = trim(0) }
  /// ```
  package static func lookUpFunction<Function>(_ name: String, as type: Function.Type) -> Function? {
    #if canImport(Darwin)
      let handle = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
    #else
      let handle: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
    #endif
    guard let symbol = dlsym(handle, name) else { return nil }
    return unsafeBitCast(symbol, to: type)
  }

  /// The sine of `x` radians (the C library's `sin`).
  package static func sine(_ x: Double) -> Double {
    sin(x)
  }

  /// Writes `bytes` to a temporary file next to `path`, then renames it over `path`: readers see the old file or
  /// the whole new one, never half of it, and nothing is left behind when it fails. Returns the `errno` of a
  /// failure, `nil` on success.
  package static func replaceFile(atPath path: String, with bytes: some Collection<UInt8>) -> Int32? {
    let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0o644)
    guard descriptor >= 0 else { return errno }
    let array = Array(bytes)
    var failure: Int32? = array.withUnsafeBufferPointer { buffer in
      var offset = 0
      while offset < buffer.count {
        let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 {
          if errno == EINTR { continue }
          return errno
        }
        offset += written
      }
      return nil
    }
    if close(descriptor) != 0, failure == nil { failure = errno }
    if failure == nil, rename(temporary, path) != 0 { failure = errno }
    if failure != nil { unlink(temporary) }
    return failure
  }
}

/// A pthread mutex on the heap (adaptive on glibc: it spins briefly before sleeping); ThreadSanitizer sees it.
///
/// A handle, not an owner: the type that creates one calls ``destroy()`` exactly once, in its `deinit`, so the lock
/// costs no object of its own. ``Locked`` is built on it; use it directly only to pair a lock with
/// ``PlatformCondition``.
///
/// ```swift
/// let mutex = PlatformMutex()
/// mutex.withLock { counter += 1 }
/// mutex.destroy()  // in the owner's deinit
/// ```
// @unchecked Sendable: a pthread mutex is made for use from any thread; the pointer never changes.
package struct PlatformMutex: @unchecked Sendable {
  fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>

  /// Creates an unlocked mutex.
  package init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    #if DEBUG
      // Debug builds (the tests): an error-checking mutex, so that a thread taking a mutex it holds already (a deinit
      // that user code runs inside a critical section and that takes the same lock) stops with its stack in
      // ``lock()`` instead of hanging for ever with nothing to show where.
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
    #elseif canImport(Glibc)
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
    #endif
    let status = pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
    precondition(status == 0, "Spindle: pthread_mutex_init failed with \(status)")
  }

  /// Frees the mutex; it must be unlocked and never used again.
  package func destroy() {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }

  /// Takes the mutex, waiting for it if another thread holds it.
  @inline(__always)
  package func lock() {
    let status = pthread_mutex_lock(mutex)
    #if DEBUG
      if status != 0 { Self.lockFailed(status) }
    #else
      _ = status
    #endif
  }

  #if DEBUG
    /// Stops the process: `pthread_mutex_lock` refused (`EDEADLK`: the calling thread holds the mutex already, which a
    /// release build would wait on for ever).
    @inline(never)
    private static func lockFailed(_ status: Int32) -> Never {
      let reason = status == EDEADLK ? "the calling thread holds it already (a deadlock)" : "error \(status)"
      Platform.writeToStandardError("Spindle: taking a mutex failed: \(reason)\n")
      preconditionFailure("Spindle: taking a mutex failed: \(reason)")
    }
  #endif

  /// Releases the mutex; the calling thread must hold it.
  @inline(__always)
  package func unlock() { pthread_mutex_unlock(mutex) }

  /// Runs `body` holding the mutex.
  @inline(__always)
  package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
    lock()
    defer { pthread_mutex_unlock(mutex) }
    return try body()
  }
}

/// A pthread condition variable, used with one ``PlatformMutex``; a handle whose owner calls ``destroy()`` once.
///
/// ```swift
/// mutex.lock()
/// while queue.isEmpty { condition.wait(on: mutex) }
/// mutex.unlock()
/// ```
// @unchecked Sendable: a pthread condition is made for use from any thread; the pointer never changes.
package struct PlatformCondition: @unchecked Sendable {
  private let condition: UnsafeMutablePointer<pthread_cond_t>

  /// Creates a condition variable.
  package init() {
    condition = .allocate(capacity: 1)
    condition.initialize(to: pthread_cond_t())
    let status = pthread_cond_init(condition, nil)
    precondition(status == 0, "Spindle: pthread_cond_init failed with \(status)")
  }

  /// Frees the condition variable; no thread may wait on it any more.
  package func destroy() {
    pthread_cond_destroy(condition)
    condition.deinitialize(count: 1)
    condition.deallocate()
  }

  /// Releases `mutex` (which the caller holds), sleeps until signalled (or spuriously), and takes it back.
  package func wait(on mutex: PlatformMutex) { pthread_cond_wait(condition, mutex.mutex) }

  /// Like ``wait(on:)``, but gives up after `seconds`; returns `false` when it timed out.
  package func wait(on mutex: PlatformMutex, seconds: Int) -> Bool {
    var deadline = timespec()
    clock_gettime(CLOCK_REALTIME, &deadline)
    deadline.tv_sec += seconds
    return pthread_cond_timedwait(condition, mutex.mutex, &deadline) != ETIMEDOUT
  }

  /// Wakes one waiting thread, if any.
  package func signal() { pthread_cond_signal(condition) }

  /// Wakes every waiting thread.
  package func broadcast() { pthread_cond_broadcast(condition) }
}

/// A thread-specific slot (a pthread key) holding one raw pointer per thread, nil until set.
///
/// Keys are a scarce process resource: make one per purpose, in a `static let`, never per object.
///
/// ```swift
/// static let current = ThreadLocalKey()
/// current.value = UnsafeMutableRawPointer(frame)
/// ```
@frozen @usableFromInline
// Unchecked Sendable: a pthread key is an immutable number; each thread reads and writes only its own slot.
package struct ThreadLocalKey: @unchecked Sendable {
  @usableFromInline let key: pthread_key_t

  /// Creates a key; stops the program if the process has run out of keys.
  package init() {
    var key = pthread_key_t()
    let status = pthread_key_create(&key, nil)
    precondition(status == 0, "Spindle: pthread_key_create failed with status \(status)")
    self.key = key
  }

  /// The calling thread's pointer in this slot.
  @inlinable
  package var value: UnsafeMutableRawPointer? {
    @inline(__always) get { pthread_getspecific(key) }
    @inline(__always) nonmutating set { pthread_setspecific(key, newValue) }
  }
}

/// One pointer-sized cell per thread, made the first time a thread asks for it and freed when that thread exits.
///
/// ``ThreadLocalKey`` stores each value with `pthread_setspecific` (about 35 instructions in glibc); here the cell's
/// address is looked up once, and what is set and restored many times after that is a plain store. For code that
/// binds a value around each of many calls on the same thread, like the worker that binds each body's work item.
///
/// ```swift
/// static let running = ThreadLocalCell()
/// let cell = running.cell            // once per thread, or per loop
/// let saved = cell.pointee
/// cell.pointee = UnsafeMutableRawPointer(item)
/// defer { cell.pointee = saved }
/// ```
// @unchecked Sendable: a pthread key is an immutable number; each thread reads and writes only its own cell.
package struct ThreadLocalCell: @unchecked Sendable {
  let key: pthread_key_t

  /// Creates a key whose cells are freed at thread exit; stops the program if the process has run out of keys.
  package init() {
    var key = pthread_key_t()
    #if canImport(Darwin)
      let status = pthread_key_create(&key) { cell in cell.deallocate() }
    #else
      let status = pthread_key_create(&key) { cell in cell?.deallocate() }
    #endif
    precondition(status == 0, "Spindle: pthread_key_create failed with status \(status)")
    self.key = key
  }

  /// The calling thread's cell, made now (holding nil) if the thread has none. Stable for the thread's life.
  package var cell: UnsafeMutablePointer<UnsafeMutableRawPointer?> {
    if let existing = pthread_getspecific(key) {
      return existing.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    }
    let cell = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
    cell.initialize(to: nil)
    let status = pthread_setspecific(key, cell)
    precondition(status == 0, "Spindle: pthread_setspecific failed with status \(status)")
    return cell
  }

  /// What the calling thread's cell holds; nil when the thread has no cell yet (no cell is made to read it).
  package var value: UnsafeMutableRawPointer? {
    pthread_getspecific(key)?.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee
  }
}

/// Starts detached POSIX threads, for executors that own their threads.
package enum PlatformThread {
  /// Starts a detached thread named `name` (on Apple platforms) that runs `body` and exits.
  ///
  /// The thread blocks the asynchronous signals that Dispatch's own worker threads block: a process signal
  /// (SIGINT, SIGQUIT, …) goes to a thread of the program, never to a Spindle worker, so a program's signal handler
  /// never interrupts a work item. SIGPROF and SIGPIPE stay open, as on Dispatch's threads: the
  /// Swift runtime's crash reporter suspends every thread with SIGPROF to print its stack (a worker that blocked it
  /// would be missing from the report), and profilers sample with it. Stops the program if the system cannot create
  /// a thread.
  ///
  /// ```swift
  /// PlatformThread.start(name: "worker-0") { runLoop() }
  /// ```
  /// The signals a started thread leaves unblocked: the synchronous ones a fault raises, SIGPIPE (raised on the
  /// writing thread), and SIGPROF (the crash reporter's and profilers' way to stop a thread).
  package static let openOnWorkers: [Int32] = [
    SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS, SIGPIPE, SIGPROF,
  ]

  package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
    let argument = Unmanaged.passRetained(ThreadStart(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    #if canImport(Glibc)
      var thread = pthread_t()
    #else
      var thread: pthread_t? = nil
    #endif
    // The new thread inherits the mask in force at pthread_create: block everything but the synchronous signals
    // (a fault must still stop the program) and those in `openOnWorkers`, create, and restore this thread's mask.
    var blocked = sigset_t()
    var previous = sigset_t()
    sigfillset(&blocked)
    for open in openOnWorkers { sigdelset(&blocked, open) }
    pthread_sigmask(SIG_SETMASK, &blocked, &previous)
    let result = pthread_create(&thread, &attributes, threadMain, argument)
    pthread_sigmask(SIG_SETMASK, &previous, nil)
    precondition(result == 0, "Spindle could not start a thread (pthread_create error \(result))")
  }
}

/// What a new thread runs; immutable, handed to exactly one thread.
private final class ThreadStart: Sendable {
  let name: String
  let body: @Sendable () -> Void
  init(name: String, body: @escaping @Sendable () -> Void) {
    self.name = name
    self.body = body
  }
}

#if canImport(Darwin)
  private func threadMain(_ argument: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
    runThread(argument)
    return nil
  }
#else
  private func threadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    runThread(argument!)
    return nil
  }
#endif

private func runThread(_ argument: UnsafeMutableRawPointer) {
  let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
  #if canImport(Darwin)
    _ = pthread_setname_np(start.name)
  #endif
  start.body()
}
