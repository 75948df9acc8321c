import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A scheduler for typed work items with dependencies, a width, priorities and cancellation.
///
/// Add work with `add` (synchronous or `async` bodies) or `addCallback` (callback-style bodies). Each call
/// returns a ``Work`` handle whose value later work can receive:
///
/// ```swift
/// let queue = WorkQueue(name: "images", maxConcurrent: 4)
/// let load = queue.add(name: "load") { try decode(path) }                  // Work<Image>
/// let blur = queue.add(name: "blur", after: load) { image in tiltShift(image) }
/// let save = queue.add(after: blur) { image async throws in try await store(image) }
/// try await save.value
/// ```
///
/// Semantics:
/// - **Width.** At most ``maxConcurrent`` bodies run at once (1 makes the queue serial). `async` and callback
///   bodies hold their slot until they complete.
/// - **Order.** Work starts when all its dependencies finished and a slot is free; among ready work the
///   highest ``WorkPriority`` starts first, first in, first out within a priority.
/// - **Failure and cancellation flow.** If a dependency fails or is cancelled, its dependents end the same
///   way without running, unless their body takes `Result` inputs (`afterResults:`).
/// - **Dependencies** are given when work is added, so cycles cannot be built; they may live on other queues.
/// - **Lifetime.** Pending work keeps the queue alive; dropping the queue or a handle cancels nothing.
///
/// Scheduling costs O(1) per item and per dependency edge.
public final class WorkQueue: Sendable {
  /// The name, used in traces and messages.
  public let name: String

  /// The largest number of bodies that run at once (1: a serial queue).
  public let maxConcurrent: Int

  /// The quality of service of the threads that run synchronous and callback bodies.
  public let qos: DispatchQoS.QoSClass

  let taskPriority: TaskPriority

  /// The trace that records every item of this queue, if one was given.
  public let trace: WorkTrace?
  /// Idle serial dispatch queues that run workers, one worker each at a time (see ``startWorker(_:)``).
  private let lanes = TSanVisibleMutex<[DispatchQueue]>([])
  private let scheduler: Locked<SchedulerState>
  /// A copy of the scheduler's ready count that idle workers poll without taking the lock.
  private let readyHint = Atomic<Int>(0)
  /// A copy of the scheduler's suspended flag that workers poll between items.
  private let suspendedHint = Atomic<Bool>(false)

  /// Creates a queue.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - maxConcurrent: The width: how many bodies may run at once. Defaults to the number of active
  ///     processors; 1 makes a serial queue. Must be at least 1.
  ///   - qos: The quality of service of the Dispatch threads that run the bodies.
  ///   - trace: Records one event per work item (see ``WorkTrace``); `nil` records nothing.
  public init(
    name: String = "WorkQueue",
    maxConcurrent: Int = WorkQueue.activeProcessorCount,
    qos: DispatchQoS.QoSClass = .default,
    trace: WorkTrace? = nil
  ) {
    precondition(
      maxConcurrent >= 1,
      "WorkQueue(name: \"\(name)\", maxConcurrent: \(maxConcurrent)): maxConcurrent must be at least 1"
    )
    self.name = name
    self.maxConcurrent = maxConcurrent
    self.qos = qos
    self.trace = trace
    self.scheduler = Locked(SchedulerState())
    switch qos {
    case .userInteractive, .userInitiated: taskPriority = .high
    case .utility: taskPriority = .utility
    case .background: taskPriority = .background
    default: taskPriority = .medium
    }
  }

  /// The number of processors currently available, the default width of a queue.
  public static var activeProcessorCount: Int {
    Swift.max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
  }

  // MARK: - Control

  /// Stops starting new bodies until ``resume()``; running bodies continue.
  ///
  /// Work can still be added and cancelled while the queue is suspended. Calling it twice is harmless.
  public func suspend() {
    scheduler.withLock { state in
      state.suspended = true
      suspendedHint.store(true, ordering: .relaxed)
    }
  }

  /// Starts ready work again after ``suspend()``, highest priority first. Harmless if not suspended.
  public func resume() {
    let starts: SmallList<AnyWork> = scheduler.withLock { state in
      state.suspended = false
      suspendedHint.store(false, ordering: .relaxed)
      let starts = state.takeStarts(width: maxConcurrent)
      readyHint.store(state.readyCount, ordering: .relaxed)
      return starts
    }
    for item in starts { startWorker(item) }
  }

  /// Whether the queue is suspended.
  public var isSuspended: Bool {
    scheduler.withLock { $0.suspended }
  }

  /// Cancels every unfinished work item of this queue, as ``AnyWork/cancel()`` does for each.
  ///
  /// Pending and ready work completes at once as cancelled (and so do its dependents, on any queue);
  /// running bodies are asked to stop. Work added afterwards is not affected.
  public func cancelAll() {
    let items: [AnyWork] = scheduler.withLock { state in
      state.clearReady()
      return state.unfinishedItems()
    }
    for item in items { item.cancel() }
  }

  /// Blocks the calling thread until every work item added to the queue is complete.
  ///
  /// Returns at once if nothing is unfinished. Work added while waiting is waited for too. A suspended
  /// queue with pending work makes it wait until ``resume()``. Calling it from inside a body of the same
  /// queue would wait for itself forever: it stops the program with a message instead.
  @available(*, noasync, message: "use 'await queue.allFinished()' in async code")
  public func waitUntilAllFinished() {
    if let current = WorkContext.currentWork, current.queue === self {
      let message =
        "WorkQueue '\(name)': waitUntilAllFinished() called from inside the body of work "
        + "'\(current.name ?? "unnamed")' on the same queue; it would wait for itself and deadlock"
      WorkQueue.standardErrorMisuseHandler(message)  // also in optimized builds, which drop the trap's message
      preconditionFailure(message)
    }
    let semaphore: DispatchSemaphore? = scheduler.withLock { state in
      guard state.unfinished > 0 else { return nil }
      let semaphore = DispatchSemaphore(value: 0)
      state.waiters.append(.semaphore(semaphore))
      return semaphore
    }
    semaphore?.wait()
  }

  /// Waits until every work item added to the queue is complete.
  ///
  /// Returns at once if nothing is unfinished. Cancelling the awaiting task does not cancel the work.
  public func allFinished() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let now: Bool = scheduler.withLock { state in
        guard state.unfinished > 0 else { return true }
        state.waiters.append(.continuation(continuation))
        return false
      }
      if now { continuation.resume() }
    }
  }

  /// The number of work items added and not yet complete (pending, ready or running).
  public var unfinishedCount: Int {
    scheduler.withLock { $0.unfinished }
  }

  /// The number of slots in use: bodies running now (including `async` and callback bodies not yet complete),
  /// plus workers between two items of a batch. Never above ``maxConcurrent``, never above
  /// ``unfinishedCount``, and 0 once every item is complete.
  ///
  /// Workers are counted by slot, not by body, so that the hot path pays for no per-item counter; a worker
  /// that just finished its last item can hold its slot a moment longer, hence the bound by the unfinished count.
  public var runningCount: Int {
    scheduler.withLock { Swift.min($0.running, $0.unfinished) }
  }

  /// The number of work items waiting to run: unfinished and not running.
  public var pendingCount: Int {
    scheduler.withLock { Swift.max(0, $0.unfinished - $0.running) }
  }

  // MARK: - Engine

  /// Creates the work item for an `add` call and wires it to its dependencies.
  ///
  /// `type` is `Work<Value>.self`, looked up once by the caller, which also captures it in `body`.
  func makeWork<Value: Sendable>(
    _ type: Work<Value>.Type,
    name: String?,
    priority: WorkPriority,
    dependencies: [AnyWork],
    acceptsFailedDependencies: Bool,
    body: ErasedBody
  ) -> Work<Value> {
    let work = type.init(
      queue: self,
      name: name,
      priority: priority,
      dependencyCount: dependencies.count,
      acceptsFailedDependencies: acceptsFailedDependencies,
      body: body
    )
    trace?.recordAdded(work, dependencies: dependencies)
    if dependencies.isEmpty {
      _ = work.dependencyResolved()  // pending → ready; nothing else can see the item yet
      let start: Bool = scheduler.withLock { state in
        state.register(work)
        let start = state.admit(work, width: maxConcurrent)
        readyHint.store(state.readyCount, ordering: .relaxed)
        return start
      }
      if start { startWorker(work) }
      return work
    }
    scheduler.withLock { $0.register(work) }
    for dependency in dependencies {
      guard let termination = dependency.addDependent(work) else { continue }
      if termination.isSuccess || acceptsFailedDependencies {
        _ = work.remaining.subtract(1, ordering: .acquiringAndReleasing)
      } else if let completed = work.completeWithoutRunning(termination) {
        retire(work, completed: completed)
        return work
      }
    }
    if work.dependencyResolved() { enqueue(work) }
    return work
  }

  /// Runs `item` (ready) when a slot is free, or queues it by priority.
  func enqueue(_ item: AnyWork) {
    let start = scheduler.withLock { state in
      let start = state.admit(item, width: maxConcurrent)
      readyHint.store(state.readyCount, ordering: .relaxed)
      return start
    }
    if start { startWorker(item) }
  }

  /// Runs a worker on a serial dispatch queue of its own ("lane"), taken from a pool and given back after.
  ///
  /// Serial queues get threads from Dispatch's overcommitting pool, so a queue of width N really runs N bodies
  /// at once even when they block (file I/O, a semaphore, `sleep`), and blocked bodies never hold threads of
  /// the shared global pool that Swift concurrency and other Dispatch work need. The scheduler's slots still
  /// bound how many workers run, so a queue never uses more than about `maxConcurrent` threads.
  private func startWorker(_ item: AnyWork) {
    let lane =
      lanes.withLock { $0.popLast() }
      ?? DispatchQueue(label: "\(name).worker", qos: DispatchQoS(qosClass: qos, relativePriority: 0))
    lane.async {
      self.runWorker(item)
      self.lanes.withLock { $0.append(lane) }
    }
  }

  /// The most ready items a worker takes from the scheduler at once (and the most completed items it
  /// retires at once): one lock round trip per batch instead of per item.
  private static let batchLimit = 32

  /// How many times an idle worker checks for new ready work before it gives its slot back.
  private static let lingerSpins = 256

  /// A worker holds one slot of the queue and runs ready items until none is left.
  ///
  /// It visits the scheduler lock once per batch: to retire the items it completed, queue the dependents
  /// they made ready, and take the next ready items (highest priority first). When nothing is ready it
  /// lingers for a moment before giving its slot back, which is cheaper than waking a thread per item.
  private func runWorker(_ first: AnyWork) {
    var worker = WorkerState()
    worker.batch.append(first)
    while true {
      if let item = nextLocalItem(&worker) {
        if run(item, &worker) { continue }
        // An async or callback body took over the slot.
        _ = synchronize(&worker, mode: .handOff)
        return
      }
      switch synchronize(&worker, mode: .keepIfIdle) {
      case .refilled:
        continue
      case .released:
        return
      case .idle:
        for spin in 0..<Self.lingerSpins {
          if readyHint.load(ordering: .relaxed) > 0 || suspendedHint.load(ordering: .relaxed) { break }
          if spin >= 16 { sched_yield() }
        }
        if case .refilled = synchronize(&worker, mode: .releaseIfIdle) { continue }
        return
      }
    }
  }

  /// The next item a worker can run without taking the lock, or `nil` when it should synchronize first.
  private func nextLocalItem(_ worker: inout WorkerState) -> AnyWork? {
    if worker.retired.count >= Self.batchLimit || worker.readied.count > 1 {
      return nil
    }
    if suspendedHint.load(ordering: .relaxed) { return nil }
    if let item = worker.batch.popFirst() { return item }
    // A chain: the one dependent just made ready runs next, if nothing else waits.
    if worker.readied.count == 1 && readyHint.load(ordering: .relaxed) == 0 {
      return worker.readied.removeLast()
    }
    return nil
  }

  /// Runs one item on a worker; `false` when its body is `async` or callback-style and now holds the slot.
  private func run(_ item: AnyWork, _ worker: inout WorkerState) -> Bool {
    switch item.execute() {
    case .detached:
      return false
    case .skipped:
      return true
    case .completed(let completed):
      var ready = SmallList<AnyWork>()
      var ended: [(AnyWork, Completed)] = []
      Self.propagate(completed, ready: &ready, ended: &ended)
      for dependent in ready {
        if dependent.queue === self {
          worker.readied.append(dependent)
        } else {
          dependent.queue.enqueue(dependent)
        }
      }
      worker.retired.append(item)
      for handler in completed.handlers { handler() }
      retireEnded(ended)
      return true
    }
  }

  /// What a worker asks of `synchronize`.
  private enum SynchronizeMode {
    /// Refill the batch; with nothing ready keep the slot (the worker lingers).
    case keepIfIdle
    /// Refill the batch; with nothing ready give the slot back.
    case releaseIfIdle
    /// Flush and stop: the slot now belongs to an `async` or callback body.
    case handOff
  }

  private enum SynchronizeOutcome {
    case refilled
    case idle
    case released
  }

  /// Flushes a worker's retired and readied items, returns its unstarted items to the front of the ready
  /// queue, and takes a new batch, all under one lock; then starts helpers and wakes waiters.
  private func synchronize(_ worker: inout WorkerState, mode: SynchronizeMode) -> SynchronizeOutcome {
    var waiters: [Waiter] = []
    let (outcome, starts): (SynchronizeOutcome, SmallList<AnyWork>) = scheduler.withLock { state in
      for item in worker.retired { state.unregister(item, waiters: &waiters) }
      for item in worker.readied { state.pushReady(item) }
      while let item = worker.batch.popLast() { state.pushReadyFront(item) }
      if case .releaseIfIdle = mode {
        // Back from lingering: take the slot again (the sum never exceeded the width).
        state.lingering -= 1
        state.running += 1
      }
      let outcome: SynchronizeOutcome
      if case .handOff = mode {
        outcome = .released
      } else if state.suspended {
        state.running -= 1
        outcome = .released
      } else {
        let limit = Swift.max(1, Swift.min(Self.batchLimit, state.readyCount / maxConcurrent))
        while worker.batch.count < limit, let item = state.popReady() { worker.batch.append(item) }
        if !worker.batch.isEmpty {
          outcome = .refilled
        } else if case .releaseIfIdle = mode {
          state.running -= 1
          outcome = .released
        } else {
          state.running -= 1
          state.lingering += 1
          outcome = .idle
        }
      }
      let starts = state.takeStarts(width: maxConcurrent)
      readyHint.store(state.readyCount, ordering: .relaxed)
      return (outcome, starts)
    }
    worker.retired.removeAll(keepingCapacity: true)
    worker.readied.removeAll(keepingCapacity: true)
    for item in starts { startWorker(item) }
    for waiter in waiters { waiter.resume() }
    return outcome
  }

  /// Completes the bookkeeping for an item that completed outside a worker's loop: cancelled, ended by a
  /// dependency, or an `async` or callback body that gives its slot back (`releasingSlot`).
  func retire(_ item: AnyWork, completed: Completed, releasingSlot: Bool = false) {
    trace?.recordEnd(item, termination: completed.termination)
    var ready = SmallList<AnyWork>()
    var ended: [(AnyWork, Completed)] = []
    Self.propagate(completed, ready: &ready, ended: &ended)
    var foreign = SmallList<AnyWork>()
    var waiters: [Waiter] = []
    let starts: SmallList<AnyWork> = scheduler.withLock { state in
      state.unregister(item, waiters: &waiters)
      for dependent in ready {
        if dependent.queue === self { state.pushReady(dependent) } else { foreign.append(dependent) }
      }
      if releasingSlot { state.running -= 1 }
      let starts = state.takeStarts(width: maxConcurrent)
      readyHint.store(state.readyCount, ordering: .relaxed)
      return starts
    }
    for start in starts { startWorker(start) }
    for dependent in foreign { dependent.queue.enqueue(dependent) }
    for handler in completed.handlers { handler() }
    for waiter in waiters { waiter.resume() }
    retireEnded(ended)
  }

  /// Retires work that a completion ended (a failed or cancelled dependency), each on its own queue.
  /// Their dependents were already told by `propagate`.
  private func retireEnded(_ ended: [(AnyWork, Completed)]) {
    for (other, var otherCompleted) in ended {
      otherCompleted.dependents = SmallList()
      other.queue.retire(other, completed: otherCompleted)
    }
  }

  /// Tells the dependents of a completed item; those that end too (a failed or cancelled dependency) are
  /// followed iteratively, so long chains cannot overflow the stack.
  private static func propagate(
    _ completed: Completed,
    ready: inout SmallList<AnyWork>,
    ended: inout [(AnyWork, Completed)]
  ) {
    var dependents = completed.dependents
    var termination = completed.termination
    var index = 0
    while true {
      for dependent in dependents {
        if termination.isSuccess || dependent.acceptsFailedDependencies {
          if dependent.dependencyResolved() { ready.append(dependent) }
        } else if let endedCompleted = dependent.completeWithoutRunning(termination) {
          ended.append((dependent, endedCompleted))
        }
      }
      guard index < ended.count else { return }
      dependents = ended[index].1.dependents
      termination = ended[index].1.termination
      index += 1
    }
  }
}

/// The scheduler's state, guarded by the queue's lock.
struct SchedulerState {
  var ready: [RingBuffer<AnyWork>] = Array(repeating: RingBuffer(), count: WorkPriority.allCases.count)
  /// Entries in `ready`, including stale ones (cancelled while waiting; workers skip them).
  var readyCount = 0
  /// Workers running items (between items too), holding a slot each.
  var running = 0
  /// Idle workers that still hold a slot for a moment and will take ready items if any arrive.
  var lingering = 0
  var suspended = false
  var unfinished = 0
  var registryHead: AnyWork?
  var waiters: [Waiter] = []

  /// Takes a slot for `item` if one is free (returns `true`: start it), else queues it.
  mutating func admit(_ item: AnyWork, width: Int) -> Bool {
    if !suspended && running + lingering < width && readyCount == 0 {
      running += 1
      return true
    }
    pushReady(item)
    return false
  }

  mutating func pushReady(_ item: AnyWork) {
    ready[item.priority.rawValue].append(item)
    readyCount += 1
  }

  /// Puts back an item a worker took but did not start, ahead of the items of its priority.
  mutating func pushReadyFront(_ item: AnyWork) {
    ready[item.priority.rawValue].prepend(item)
    readyCount += 1
  }

  mutating func popReady() -> AnyWork? {
    guard readyCount > 0 else { return nil }
    var priority = ready.count - 1
    while priority >= 0 {
      if let item = ready[priority].popFirst() {
        readyCount -= 1
        return item
      }
      priority -= 1
    }
    return nil
  }

  /// Takes slots for as many ready items as the width allows; the caller starts a worker for each.
  mutating func takeStarts(width: Int) -> SmallList<AnyWork> {
    var starts = SmallList<AnyWork>()
    guard !suspended else { return starts }
    while running + lingering < width, let item = popReady() {
      running += 1
      starts.append(item)
    }
    return starts
  }

  mutating func clearReady() {
    for priority in ready.indices { _ = ready[priority].removeAll() }
    readyCount = 0
  }

  mutating func register(_ item: AnyWork) {
    unfinished += 1
    item.registryNext = registryHead
    registryHead?.registryPrevious = item
    registryHead = item
  }

  mutating func unregister(_ item: AnyWork, waiters woken: inout [Waiter]) {
    unfinished -= 1
    let next = item.registryNext
    let previous = item.registryPrevious
    if let previous {
      previous.registryNext = next
    } else {
      registryHead = next
    }
    next?.registryPrevious = previous
    item.registryNext = nil
    item.registryPrevious = nil
    if unfinished == 0 && !waiters.isEmpty {
      swap(&woken, &waiters)
    }
  }

  func unfinishedItems() -> [AnyWork] {
    var items: [AnyWork] = []
    items.reserveCapacity(unfinished)
    var cursor = registryHead
    while let item = cursor {
      items.append(item)
      cursor = item.registryNext
    }
    return items
  }
}

/// What a worker keeps between visits to the scheduler lock.
private struct WorkerState {
  /// Ready items taken from the scheduler, not yet started (in priority order).
  var batch = RingBuffer<AnyWork>()
  /// Items this worker completed that the queue still counts as unfinished.
  var retired: [AnyWork] = []
  /// Dependents on this queue that this worker's items made ready, not yet queued.
  var readied: [AnyWork] = []
}

/// Someone waiting for a queue to have no unfinished work.
enum Waiter: Sendable {
  case semaphore(DispatchSemaphore)
  case continuation(CheckedContinuation<Void, Never>)

  func resume() {
    switch self {
    case .semaphore(let semaphore): semaphore.signal()
    case .continuation(let continuation): continuation.resume()
    }
  }
}
