import Dispatch
import Synchronization

// Workers: who runs bodies, on which thread.
//
// - A synchronous or callback body runs on a worker: a loop on a thread of the `WorkerPool`, so width N really
//   runs N blocking bodies at once, and blocked bodies never hold threads of the shared pool that Swift
//   concurrency needs. A worker holds one slot; it runs items until none is ready, then lingers a moment and
//   gives its slot back. There is at most one worker per slot, so a queue's bodies run on at most
//   `maxConcurrent` threads at once, and the pool makes a thread only when all of its threads are busy.
// - An `async` body runs in a task of its own, started directly by whichever thread gives it a slot (the adding
//   thread, a worker, or the task of the `async` body that ended before it): no lane, no thread hop.
// - A callback body that calls `finish` before it returns is completed by its worker, which goes on with the
//   next item; one that calls `finish` later hands its slot on from the thread that calls it.
extension WorkEngine {
  /// How many times a worker with nothing to run checks for new ready work before it gives its slot back.
  static let lingerSpins = 256

  /// How many of those checks come one after another before each further check yields the thread.
  static let pureSpins = 16

  /// How many workers of all queues may linger (spin and yield while watching for ready work) at once: one per
  /// processor. A worker that finds them all taken looks a few more times, yielding its thread twice, and gives
  /// its slot back.
  ///
  /// Lingering saves a sleep and a wake-up when work arrives a moment later, which only pays while the spinning
  /// thread has a core to itself. Without this bound every idle worker of every queue lingered: in the package's
  /// test run, with hundreds of queues alive at once, a thread dump caught 194 workers yielding in `linger` on two
  /// cores, and the cooperative pool ran no job for 15–30 s at the start of each run (the stall probe's reports).
  static let maxLingering = Platform.availableProcessorCount

  /// Workers lingering now, in the whole process (at most ``maxLingering``).
  static let lingering = Atomic<Int>(0)

  /// The most workers seen lingering at once in this process, for tests of ``maxLingering``.
  package static let lingeringHighWater = Atomic<Int>(0)

  /// Starts items the scheduler gave slots to.
  ///
  /// Consumes the list, and each item moves on to its worker: the starting thread keeps no reference that could
  /// outlive the item's run, so once the item and its dependents have finished, its value is released on time
  /// even while this thread is still on its way out (a late release here once kept a dependency's value alive
  /// past its dependent's completion handlers).
  @inline(__always)
  func start(_ items: consuming SmallList<AnyWork>) {
    // Most calls (every retirement) have nothing to start: answered inline.
    guard !items.isEmpty else { return }
    startAll(consume items)
  }

  @inline(never)
  private func startAll(_ items: consuming SmallList<AnyWork>) {
    while let item = items.popFirst() { startHolding(consume item) }
  }

  /// Starts `item`, for which a slot is already taken: a worker for a synchronous or callback body, or its
  /// task, started from this thread, for an `async` body.
  func startHolding(_ first: consuming AnyWork) {
    var item = consume first
    while item.isAsync {
      // An `async` body only starts here: nothing is handed back (its worker, or task, lets go of what it used).
      var unused = HandBackBatch()
      // The cell goes unused (an `async` body runs in its task); looked up anyway, so that the worker's hot path needs
      // no optional (about 10 instructions per item): at worst it makes this thread's 8-byte cell early.
      var noToken: FinishToken? = nil  // an `async` body uses none
      let execution = item.execute(on: self, handingBackInto: &unused, cell: workCell.cell, spareToken: &noToken)
      flushHandBack(&unused)  // empty today (only a synchronous `add(after:)` body lets go of a value source)
      switch consume execution {
      case .detached:
        return
      case .completed(let completed):
        // A condition ended it without running: the slot goes on to the next item.
        retire(item, completed: completed, releasingSlot: true)
        return
      case .retry:
        preconditionFailure("Spindle: an async body cannot end before its task starts")
      // Cancelled while it waited, or waiting for its exclusivity key: the slot goes to the next ready item. (Two
      // labels: `Execution` is not copyable, and a label of several patterns cannot match one.)
      case .skipped:
        guard let next = withState({ $0.scheduler.detachedBodyEnded() }) else { return }
        item = next
      case .parked:
        guard let next = withState({ $0.scheduler.detachedBodyEnded() }) else { return }
        item = next
      }
    }
    startWorker(consume item)
  }

  /// Runs a worker for `item` on a thread of the worker pool; the worker gets the caller's reference.
  func startWorker(_ item: consuming AnyWork) {
    if runsOnMain {
      // Through a box the block empties, so that the block (released only after it returns) does not keep the first
      // item alive while the worker runs on.
      let box = Locked<AnyWork?>(consume item)
      DispatchQueue.main.async { self.runWorker(box.withLock { $0.take()! }) }
    } else {
      WorkerPool.shared.start(consume item, on: self)
    }
  }

  /// A worker: holds one slot and runs ready items, highest priority first, until none is left.
  ///
  /// Each completion visits the lock once: it retires the item, queues the dependents it made ready and takes
  /// the next item, so no ready item ever waits in a worker's private list.
  func runWorker(_ first: consuming AnyWork) {
    // Each item moves out of `upcoming` (`take`) into a constant of the loop: calling a method on a `var` copied
    // (retained and released) the item for the call. `consume`: the worker holds the only reference its starter had,
    // so a finished item is not kept alive (with its value) until the worker stops.
    var upcoming: AnyWork? = consume first
    // What this worker hands back (see `handBack`) gathers in `batch`; all of it is freed at the latest when it stops.
    var batch = HandBackBatch()
    // This thread's cell for `WorkContext`, found once: each body is then bound with plain stores.
    let cell = workCell.cell
    // A callback body's `finish` token that nothing else kept, for the next callback body (see `FinishToken`).
    var spareToken: FinishToken? = nil
    defer {
      flushHandBack(&batch)
      releaseHandedBackOnStopping()
    }
    while let item = upcoming.take() {
      let step: WorkScheduler<AnyWork, Waiter>.WorkerStep
      // Gathered items join the list before a body that may run long when nothing else is queued (a backlog flushes
      // every few items anyway): the `add` that finds a batch's worth on the list, a waiting thread or the worker that
      // reaches the limit then frees them, as it would without the batch.
      if batch.count > 0 && readyHint.load(ordering: .relaxed) == 0 { flushHandBack(&batch) }
      // `consume`: the outcome and the step move into their cases' bindings instead of being copied (a retain and a
      // release of each reference in them).
      let execution = item.execute(on: self, handingBackInto: &batch, cell: cell, spareToken: &spareToken)
      switch consume execution {
      case .completed(var completed):
        let mayHandBack = item.freesOnlyMemory && completed.termination.isSuccess
        step = completeOnWorker(item, &completed)
        if mayHandBack {
          // Moved, not copied, into an optional that `handBack` can empty.
          var finished: AnyWork? = consume item
          handBack(&finished, into: &batch)
        }
      case .skipped:
        step = withState { $0.scheduler.workerDone(mayLinger: !runsOnMain) }
      case .parked:
        step = withState { $0.scheduler.workerDone(mayLinger: !runsOnMain) }
      case .retry(let wait):
        step = withState { $0.scheduler.workerDone(mayLinger: !runsOnMain) }
        retryLater(item, after: wait, releasingSlot: false)
      case .detached:
        return  // the `async` or callback body holds the slot now
      }
      switch consume step {
      case .run(let next):
        upcoming = next
      case .linger:
        flushHandBack(&batch)  // nothing to run: the adding thread may free them meanwhile
        upcoming = linger()
      case .exit:
        return
      }
    }
  }

  /// Makes `item` (pending again after a failed attempt) ready after `wait`; with `releasingSlot`, first hands
  /// on the slot its `async` or callback body held.
  func retryLater(_ item: AnyWork, after wait: Duration, releasingSlot: Bool) {
    if releasingSlot {
      let next: AnyWork? = withState { $0.scheduler.detachedBodyEnded() }
      if let next { startHolding(consume next) }
    }
    Self.makeReady(item, after: wait)
  }

  /// Resolves the extra dependency of delayed or retried work after `wait`, holding no slot and no thread.
  static func makeReady(_ item: AnyWork, after wait: Duration) {
    guard wait > .zero else {
      if let engine = item.dependencyResolved() { engine.makeReady(item) }
      return
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + dispatchInterval(wait)) {
      if let engine = item.dependencyResolved() { engine.makeReady(item) }
    }
  }

  /// Watches the ready count for a moment; returns the next item, or `nil` when the slot was given back.
  private func linger() -> AnyWork? {
    let lingering = Self.lingering.wrappingAdd(1, ordering: .relaxed).newValue
    // Past the bound, a worker still looks a few times (two yields: the adding thread may be about to add, and
    // a worker that gives its slot back just before makes the next `add` start another), then goes.
    var spins = Self.pureSpins + 2
    if lingering <= Self.maxLingering {
      spins = Self.lingerSpins
      Self.lingeringHighWater.max(lingering, ordering: .relaxed)
    }
    for spin in 0..<spins {
      if readyHint.load(ordering: .relaxed) > 0 || pausedHint.load(ordering: .relaxed) || hasIncoming { break }
      if spin >= Self.pureSpins { Platform.yieldThread() }
    }
    Self.lingering.wrappingSubtract(1, ordering: .relaxed)
    let (step, starts) = withState { state in
      let step = state.scheduler.lingerEnded()
      let starts = state.scheduler.takeStarts()
      return (step, starts)
    }
    start(consume starts)
    if case .run(let next) = step { return next }
    return nil
  }
}
