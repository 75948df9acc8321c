import Dispatch

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
/// Guarantees:
/// - **Width.** At most ``maxConcurrent`` bodies run at once (1 makes the queue serial). `async` and callback
///   bodies hold their slot until they complete.
/// - **No hidden ready work.** A ready item is never kept from a free slot: workers keep no private batches,
///   every ready item waits in the queue's one ready list until a slot takes it.
/// - **Order.** Work starts when all its dependencies finished and a slot is free; among ready work the
///   highest ``WorkPriority`` starts first, first in, first out within a priority. At width 1 that is the exact
///   order; at any width, no item starts while an item of higher priority waits unstarted.
/// - **Threads.** Synchronous and callback bodies run on at most ``maxConcurrent`` threads of the queue at once;
///   `async` bodies run in tasks of the shared Swift concurrency pool and take no thread of the queue. Calling
///   a callback's `finish`, from any thread, never starts an extra thread.
/// - **Failure and cancellation flow.** If a dependency fails or is cancelled, its dependents end the same
///   way without running, unless their body takes `Result` inputs (`afterResults:`/`afterAllResults:`), which
///   run and receive the failures. An ordering-only dependency (`dependencies:`) that fails or is cancelled
///   ends its dependent the same way, except for bodies that take `Result` inputs: those run whatever their
///   ordering-only dependencies did.
/// - **Dependencies** are given when work is added, so cycles cannot be built; they may live on other queues.
///
/// Lifetime: unfinished work keeps the queue's engine alive, so dropping the last `WorkQueue` handle lets
/// running and ready work go on, except on a suspended queue: that cancels its pending work (nothing would
/// ever resume it; a barrier behind running work ends, cancelled, once that work has finished). Finished work keeps
/// nothing of its queue.
///
/// Scheduling costs O(1) per item and per dependency edge.
public final class WorkQueue: Sendable {
  let engine: WorkEngine

  /// The name, used in traces and messages.
  public var name: String { engine.name }

  /// The quality of service of the threads that run synchronous and callback bodies.
  public var qos: DispatchQoS.QoSClass { engine.qos }

  /// The trace that records every item of this queue, if one was given.
  public var trace: WorkTrace? { engine.trace }

  /// Creates a queue.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - maxConcurrent: The width: how many bodies may run at once. Defaults to the processors this process can
  ///     use (``activeProcessorCount``: CPU affinity and a container's CPU quota count); 1 makes a serial queue.
  ///     Must be at least 1.
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
    engine = WorkEngine(name: name, width: maxConcurrent, qos: qos, trace: trace)
  }

  /// A queue whose workers run on the main queue (see ``MainWorkQueue``).
  init(mainQueueNamed name: String) {
    engine = WorkEngine(name: name, width: 1, qos: .userInteractive, trace: nil, runsOnMain: true)
  }

  deinit {
    // Nothing can resume a suspended queue once its last handle is gone: cancel what it holds, so its items,
    // their captures and their awaiters do not wait forever. Then resume it: a cancelled barrier behind running work
    // still has to start (skipping its body) once that work has finished, or it would wait for ever (found in
    // review); nothing else is left to start, and nothing can be added any more.
    if engine.withState({ $0.scheduler.isSuspended }) {
      engine.cancelAll()
      engine.resume()
    }
  }

  /// The number of processors currently available to this process, the default width of a queue.
  ///
  /// The online processors, narrowed on Linux by the calling thread's CPU affinity (`taskset`, cpusets) and by the CPU
  /// quota of the process's control group (a container started with `--cpus 1.5` counts 2), as Foundation's
  /// `ProcessInfo.activeProcessorCount` and swift-nio's `System.coreCount` do: a queue in a container given 2 of a
  /// host's 64 processors runs 2 bodies at once by default, not 64.
  ///
  /// ```swift
  /// let decoders = WorkQueue(name: "decode", maxConcurrent: WorkQueue.activeProcessorCount)
  /// ```
  public static var activeProcessorCount: Int {
    Platform.availableProcessorCount
  }

  /// The width: the largest number of bodies that run at once (1: a serial queue). Settable at any time.
  ///
  /// Raising it starts ready work at once. Lowering it never interrupts a body: running bodies finish, and no
  /// new one starts until fewer than the new width run.
  ///
  /// ```swift
  /// queue.maxConcurrent = 1   // drain one at a time from now on
  /// ```
  public var maxConcurrent: Int {
    get { engine.withState { $0.scheduler.width } }
    set {
      precondition(
        newValue >= 1,
        "WorkQueue '\(name)': maxConcurrent must be at least 1, got \(newValue)"
      )
      engine.setWidth(newValue)
    }
  }

  // MARK: - Control

  /// Stops starting new bodies until ``resume()``; running bodies continue.
  ///
  /// Work can still be added and cancelled while the queue is suspended. Calling it twice is harmless.
  public func suspend() {
    engine.suspend()
  }

  /// Starts ready work again after ``suspend()``, highest priority first. Harmless if not suspended.
  public func resume() {
    engine.resume()
  }

  /// Whether the queue is suspended.
  public var isSuspended: Bool {
    engine.withState { $0.scheduler.isSuspended }
  }

  /// Cancels every unfinished work item of this queue, as ``AnyWork/cancel()`` does for each.
  ///
  /// Pending and ready work completes at once as cancelled (and so do its dependents, on any queue);
  /// running bodies are asked to stop. A barrier with unfinished work before it ends once that work has finished,
  /// cancelled, without running its body (on a suspended queue, once it is resumed). Work added afterwards is not
  /// affected.
  public func cancelAll() {
    engine.cancelAll()
  }

  /// Blocks the calling thread until every work item added to the queue is complete.
  ///
  /// Returns at once if nothing is unfinished. Work added while waiting is waited for too. A suspended
  /// queue with pending work makes it wait until ``resume()``. Calling it where it would wait for itself — from
  /// a body of the same queue, from a task started by a callback body of the queue while that work is
  /// unfinished, or from a body of another queue while this queue holds work that can only complete after the body's
  /// work (a dependent of it, directly or through other work, or work that needs a slot or an exclusivity key the
  /// body holds; see ``allFinished()``) — stops the program with a message instead of hanging.
  ///
  /// While it blocks, the calling thread frees the queue's finished items when the queue's workers ask it to (only
  /// their memory: nothing a body, a value or an observer holds), so that the workers spend their time on bodies; a
  /// profile of a waiting thread can show `free` on its stack. ``Work/wait()`` does the same.
  @available(*, noasync, message: "use 'try await queue.allFinished()' in async code")
  public func waitUntilAllFinished() {
    if let current = WorkContext.currentWork, current.currentEngine === engine {
      let message =
        "WorkQueue '\(name)': waitUntilAllFinished() called from inside work "
        + "'\(current.name ?? "unnamed")' of the same queue (its body, or a task it started) while that work is "
        + "unfinished; it would wait for itself and deadlock"
      WorkQueue.standardErrorMisuseHandler(message)  // also in optimized builds, which drop the trap's message
      preconditionFailure(message)
    }
    if let current = WorkEngine.holdingWaiter() {
      let (record, behind) = WorkEngine.beginQueueWait(of: current, for: engine)
      guard let behind else {
        defer { record?.end() }
        engine.waitUntilAllFinished()
        return
      }
      let message =
        "WorkQueue '\(name)': waitUntilAllFinished() called from inside work '\(current.name ?? "unnamed")' of "
        + "WorkQueue '\(current.queueName)', while work '\(behind.name ?? "unnamed")' of this queue can only complete "
        + "after that work (it depends on it, directly or through other work, follows a barrier that does, its "
        + "body waits for it, or it needs a slot or an exclusivity key that the waiting body holds); it would wait "
        + "for itself and deadlock"
      WorkQueue.standardErrorMisuseHandler(message)
      preconditionFailure(message)
    }
    engine.waitUntilAllFinished()
  }

  /// Waits until every work item added to the queue is complete.
  ///
  /// Returns at once if nothing is unfinished. If the awaiting task is cancelled, it stops waiting at once and
  /// throws `CancellationError`; the work is not cancelled (call ``cancelAll()`` for that). Awaited by an `async`
  /// body of this queue (its own task), it throws ``WorkDeadlockError`` at once: it would wait for the body's own work.
  /// So it does when awaited by an `async` body of another queue while this queue holds work that can only complete
  /// after the body's work: a dependent of it (directly or through other work), work after a barrier that is one,
  /// work whose body waits for it, work in line for an exclusivity key it holds, or unstarted work of a queue whose
  /// every slot is held by the body or by bodies waiting behind it (the body's own serial queue, say), and what
  /// depends on any of these. A dependent that a failing sibling dependency would end first counts too, as for
  /// ``Work/wait()``, and so does unstarted work that a failing dependency of its own would end without a slot. The
  /// widths are those of the moment: a wait that a later raise of ``maxConcurrent`` would have let end is refused.
  /// Not behind the body: an `async` body with a `timeout:` (its wait ends at its deadline), and unstarted work of a
  /// group with a timeout (it completes at the deadline without a slot). The wait is recorded for the checks that
  /// follow: a body of this queue that then waits for the awaiting body's work (``Work/wait()``, ``Work/value``), or
  /// awaits the awaiting body's queue, is refused. Not seen: work of this queue that waits for the body only through
  /// other work of this queue.
  public func allFinished() async throws {
    if let current = WorkEngine.holdingWaiter() {
      if current.currentEngine === engine {
        // A cancelled task's await ends at once (as below): it never hangs.
        try Task.checkCancellation()
        throw WorkDeadlockError(
          work: current.name, waiter: current.name, queue: name,
          reason: "allFinished() was awaited by a body of the same queue, and it waits for this body's own work too")
      }
      let (record, behind) = WorkEngine.beginQueueWait(of: current, for: engine)
      if let behind {
        try Task.checkCancellation()
        throw WorkDeadlockError(
          work: behind.name, waiter: current.name, queue: name,
          reason: "allFinished() waits for this work, which can only complete after the awaiting body's work (it "
            + "depends on it, directly or through other work, follows a barrier that does, its body waits for it, or "
            + "it needs a slot or an exclusivity key that the awaiting body holds)")
      }
      defer { record?.end() }
      try await engine.allFinished()
      return
    }
    try await engine.allFinished()
  }

  /// The number of work items added and not yet complete (pending, ready or running).
  public var unfinishedCount: Int {
    engine.withState { $0.scheduler.unfinished }
  }

  /// The number of slots in use: bodies running now (including `async` and callback bodies not yet complete),
  /// plus workers between two items or watching for more work for a moment. Never above ``maxConcurrent``
  /// (unless it was just lowered while bodies ran), never above ``unfinishedCount``, and 0 once every item is
  /// complete.
  public var runningCount: Int {
    engine.withState { Swift.min($0.scheduler.slots - $0.scheduler.idle, $0.scheduler.unfinished) }
  }

  /// The number of work items waiting to run: unfinished and not running.
  public var pendingCount: Int {
    engine.withState { state in
      Swift.max(0, state.scheduler.unfinished - (state.scheduler.slots - state.scheduler.idle))
    }
  }

  // MARK: - Adding

  /// Creates the work item for an `add` call and wires it to its dependencies.
  ///
  /// `type` is `Work<Value>.self`, looked up once by the caller, which also captures it in `body`. `first` is a
  /// typed dependency passed on its own, so that a one-dependency `add(after:)` builds no array. `type` may be a
  /// subclass that keeps the typed body of plain work (`WorkSync`, `WorkCallback`, `WorkAfter`), which `prepare`
  /// stores before the work is admitted; `body` then only calls it.
  @usableFromInline
  func makeWork<Value: Sendable>(
    _ type: Work<Value>.Type,
    name: consuming String?,
    priority: WorkPriority,
    first: AnyWork? = nil,
    dependencies: [AnyWork],
    acceptsFailedDependencies: Bool,
    extras: consuming WorkExtras? = nil,
    body: consuming ErasedBody,
    valueSource: AnyWork? = nil,
    prepare: (Work<Value>) -> Void = { _ in }
  ) -> Work<Value> {
    // Everything the item keeps is moved into it (`consume`), not copied: each copy was a retain here and a release
    // when the parameter died, on every item.
    let delay = extras?.options.delay
    let dependencyCount = (first == nil ? 0 : 1) + dependencies.count + (delay == nil ? 0 : 1)
    let freesOnlyMemory = _isPOD(Value.self) && extras == nil
    // Frees the items workers handed back (see `WorkEngine.handBack`), once they are a batch, before this thread
    // allocates the next one.
    engine.releaseHandedBackForAdding()
    let work = type.init(
      engine: engine,
      name: consume name,
      priority: priority,
      dependencyCount: dependencyCount,
      acceptsFailedDependencies: acceptsFailedDependencies,
      // A value source that is the one dependency is held once, by `valueSource`.
      dependencies: valueSource != nil && valueSource === first && dependencies.isEmpty
        ? .valueSource : DependencyList(first: first, more: dependencies),
      extras: consume extras,
      body: consume body
    )
    if freesOnlyMemory { work.freesOnlyMemory = true }
    if let valueSource { work.valueSource = valueSource }
    prepare(work)
    if let trace = engine.trace {
      trace.recordAdded(
        work, queue: engine.name, dependencies: DependencyList(first: first, more: dependencies).array(valueSource: nil)
      )
    }
    engine.admit(work, first: first, dependencies: dependencies)
    if let delay { WorkEngine.makeReady(work, after: delay) }
    return work
  }
}
