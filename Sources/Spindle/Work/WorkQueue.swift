import Dispatch

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
  private let dispatchQueue: DispatchQueue
  private let scheduler: PThreadLocked<SchedulerState>

  /// Creates a queue.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - maxConcurrent: The width: how many bodies may run at once. Defaults to the number of active
  ///     processors; 1 makes a serial queue. Must be at least 1.
  ///   - qos: The quality of service of the Dispatch threads that run the bodies.
  public init(
    name: String = "WorkQueue",
    maxConcurrent: Int = WorkQueue.activeProcessorCount,
    qos: DispatchQoS.QoSClass = .default
  ) {
    precondition(
      maxConcurrent >= 1,
      "WorkQueue(name: \"\(name)\", maxConcurrent: \(maxConcurrent)): maxConcurrent must be at least 1"
    )
    self.name = name
    self.maxConcurrent = maxConcurrent
    self.qos = qos
    self.dispatchQueue = DispatchQueue.global(qos: qos)
    self.scheduler = PThreadLocked(SchedulerState())
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
    scheduler.withLock { $0.suspended = true }
  }

  /// Starts ready work again after ``suspend()``, highest priority first. Harmless if not suspended.
  public func resume() {
    let starts: SmallList<AnyWork> = scheduler.withLock { state in
      state.suspended = false
      return state.takeStarts(width: maxConcurrent)
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
      preconditionFailure(
        "WorkQueue '\(name)': waitUntilAllFinished() called from inside the body of work "
          + "'\(current.name ?? "unnamed")' on the same queue; it would wait for itself and deadlock"
      )
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

  /// The number of bodies running now (including `async` and callback bodies not yet complete).
  public var runningCount: Int {
    scheduler.withLock { $0.running }
  }

  /// The number of work items waiting to run: unfinished and not running.
  public var pendingCount: Int {
    scheduler.withLock { Swift.max(0, $0.unfinished - $0.running) }
  }

  // MARK: - Engine

  /// Creates the work item for an `add` call and wires it to its dependencies.
  func makeWork<Value: Sendable>(
    name: String?,
    priority: WorkPriority,
    dependencies: [AnyWork],
    acceptsFailedDependencies: Bool,
    body: Work<Value>.Body
  ) -> Work<Value> {
    let work = Work<Value>(
      queue: self,
      name: name,
      priority: priority,
      dependencyCount: dependencies.count,
      acceptsFailedDependencies: acceptsFailedDependencies,
      body: body
    )
    if dependencies.isEmpty {
      _ = work.dependencyResolved()  // pending → ready; nothing else can see the item yet
      let start: Bool = scheduler.withLock { state in
        state.register(work)
        return state.admit(work, width: maxConcurrent)
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
    let start = scheduler.withLock { $0.admit(item, width: maxConcurrent) }
    if start { startWorker(item) }
  }

  private func startWorker(_ item: AnyWork) {
    dispatchQueue.async { self.runWorker(item) }
  }

  /// A worker holds one slot and runs ready items one after the other until none is left.
  private func runWorker(_ first: AnyWork) {
    var item = first
    while true {
      let next: AnyWork?
      switch item.execute() {
      case .detached:
        return
      case .skipped:
        next = finish(nil, completed: nil, releasingSlot: false, continuing: true)
      case .completed(let completed):
        next = finish(item, completed: completed, releasingSlot: false, continuing: true)
      }
      guard let next else { return }
      item = next
    }
  }

  /// Completes the bookkeeping for an item that ended without a worker continuing after it.
  func retire(_ item: AnyWork, completed: Completed, releasingSlot: Bool = false) {
    _ = finish(item, completed: completed, releasingSlot: releasingSlot, continuing: false)
  }

  /// The one place where completion flows: tells dependents, updates this queue in one lock, starts
  /// workers, then runs handlers and wakes waiters outside the lock.
  ///
  /// - Parameters:
  ///   - item: The completed item of this queue, or `nil` when a worker skipped a stale ready entry.
  ///   - releasingSlot: An `async` or callback body gives back its slot.
  ///   - continuing: The caller is a worker that keeps its slot if more ready work exists.
  /// - Returns: The next item for the calling worker, if `continuing`.
  private func finish(
    _ item: AnyWork?,
    completed: Completed?,
    releasingSlot: Bool,
    continuing: Bool
  ) -> AnyWork? {
    var ready = SmallList<AnyWork>()
    var ended: [(AnyWork, Completed)] = []
    if let completed {
      Self.propagate(completed, ready: &ready, ended: &ended)
    }
    var foreign = SmallList<AnyWork>()
    var local = SmallList<AnyWork>()
    for item in ready {
      if item.queue === self { local.append(item) } else { foreign.append(item) }
    }

    var waiters: [Waiter] = []
    let (next, starts): (AnyWork?, SmallList<AnyWork>) = scheduler.withLock { state in
      if let item, completed != nil { state.unregister(item, waiters: &waiters) }
      for item in local { state.pushReady(item) }
      var next: AnyWork? = nil
      if releasingSlot {
        state.running -= 1
      } else if continuing {
        next = state.suspended ? nil : state.popReady()
        if next == nil { state.running -= 1 }
      }
      return (next, state.takeStarts(width: maxConcurrent))
    }
    for item in starts { startWorker(item) }
    for item in foreign { item.queue.enqueue(item) }
    if let completed {
      for handler in completed.handlers { handler() }
    }
    for waiter in waiters { waiter.resume() }
    // Work ended by this completion: its dependents were told above; its own queue still counts it.
    for (other, var otherCompleted) in ended {
      otherCompleted.dependents = SmallList()
      other.queue.retire(other, completed: otherCompleted)
    }
    return next
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
  var running = 0
  var suspended = false
  var unfinished = 0
  var registryHead: AnyWork?
  var waiters: [Waiter] = []

  /// Takes a slot for `item` if one is free (returns `true`: start it), else queues it.
  mutating func admit(_ item: AnyWork, width: Int) -> Bool {
    if !suspended && running < width && readyCount == 0 {
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
    while running < width, let item = popReady() {
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
