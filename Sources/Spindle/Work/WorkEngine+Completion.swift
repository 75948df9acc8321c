// Completion: retiring items, telling dependents, waking waiters.
extension WorkEngine {
  /// Retires an item a worker completed and returns the worker's next step, in one visit to the lock.
  func completeOnWorker(
    _ item: AnyWork,
    _ completed: inout Completed
  ) -> WorkScheduler<AnyWork, Waiter>.WorkerStep {
    retire(item, &completed, onWorker: true) { state, ready in
      if !state.held.isEmpty { state.holdBack(&ready) }
      return state.scheduler.workerDone(readying: &ready, priority: { $0.priority.rawValue }, mayLinger: !runsOnMain)
    }
  }

  /// Retires an item that completed away from a worker's loop: cancelled, ended by a dependency, or an `async`
  /// or callback body that hands its slot on (`releasingSlot`). See ``Completed/retire(_:releasingSlot:)``.
  func retire(_ item: AnyWork, completed: consuming Completed, releasingSlot: Bool = false) {
    trace?.recordEnd(item, queue: name, termination: completed.termination)
    var completed = completed
    let next = retire(item, &completed, onWorker: false) { state, ready in
      state.queue(&ready)
      return releasingSlot ? state.scheduler.detachedBodyEnded() : nil
    }
    // Work that ended without running (cancelled, or ended by a dependency) releases its body's captures now.
    item.dropStoredBody()
    if let next { startHolding(consume next) }
  }

  /// Retires `item` in one visit to the lock: unregisters it, and asks `decide` to queue the dependents it made ready
  /// on this queue (the list it is given) and say what the slot it held (if any) does next; then does the rest
  /// outside the lock.
  ///
  /// `onWorker`: a worker retires the item it ran, through ``withStateOnRetirement(needsIncoming:readiesNothing:_:)``, which takes the
  /// incoming list only when this retirement needs it (``EngineState/retirementNeedsIncoming(readying:)``).
  @inline(__always)
  private func retire<Next>(
    _ item: AnyWork,
    _ completed: inout Completed,
    onWorker: Bool,
    then decide: (inout EngineState, inout SmallList<AnyWork>) -> Next
  ) -> Next {
    var ready = SmallList<AnyWork>()
    // Nil on the common path: no lists to destroy (one release call) when nothing rare happened.
    var rare: RareRetirement? = nil
    // The engine's reference to itself when this was its last unfinished item; released after everything below (the
    // caller holds the engine for the call in any case).
    var lastReference: Unmanaged<WorkEngine>? = nil
    defer { lastReference?.release() }
    propagate(&completed, ready: &ready, rare: &rare)
    if item.isBarrier { readyFollowers(of: item, into: &ready, rare: &rare) }
    let next: Next
    let starts: SmallList<AnyWork>
    if onWorker {
      (next, starts) = withStateOnRetirement(
        needsIncoming: { $0.retirementNeedsIncoming(readying: ready) }, readiesNothing: ready.isEmpty,
        { retireLocked(item, &$0, &ready, &rare, &lastReference, decide) })
    } else {
      (next, starts) = withState { retireLocked(item, &$0, &ready, &rare, &lastReference, decide) }
    }
    finishRetiring(item, starts: consume starts, completed: completed, rare: rare)
    return next
  }

  /// The critical section of ``retire(_:_:onWorker:then:)``: unregisters `item`, lets `decide` queue `ready` and say
  /// what the slot does next, and takes the starts. (A method, not a local function: a local function that captured
  /// the retirement's lists made the compiler check each access to them at run time, about 580 instructions per
  /// item under callgrind.)
  @inline(__always)
  private func retireLocked<Next>(
    _ item: AnyWork,
    _ state: inout EngineState,
    _ ready: inout SmallList<AnyWork>,
    _ rare: inout RareRetirement?,
    _ lastReference: inout Unmanaged<WorkEngine>?,
    _ decide: (inout EngineState, inout SmallList<AnyWork>) -> Next
  ) -> (Next, SmallList<AnyWork>) {
    state.unregister(item, ready: &ready, rare: &rare, lastReference: &lastReference)
    let next = decide(&state, &ready)
    let starts = state.scheduler.takeStarts()
    if item.isBarrier { barrierHint.store(!state.barriers.isEmpty, ordering: .relaxed) }
    return (next, starts)
  }

  /// Counts a completed barrier as resolved for the items that follow it so far, and puts those now ready in `ready`
  /// (in the order they were added), to be queued with the barrier's dependents in the critical section that retires
  /// it: they all became ready when the barrier ended, and start highest priority first, first in first out within a
  /// priority. Made ready one at a time after the retirement, as they were, the first of them started at once (on a
  /// free slot, or by the worker that lingered after the barrier) while a higher-priority one was still waiting to be
  /// told. The barrier stays pending until it retires, marked retiring (`EngineState.retiringBarriers`): work added
  /// from now on does not follow it but is held behind it, and queued at its retirement in the order it was registered
  /// (followed late, such an item was told after the retirement, and its adder's next item could start first). A
  /// barrier added meanwhile waits for it as for any unfinished item (already complete: resolved at once). So nothing
  /// should be on its followers list when it unregisters; `RareRetirement.released` makes ready whatever is.
  @inline(never)
  private func readyFollowers(of barrier: AnyWork, into ready: inout SmallList<AnyWork>, rare: inout RareRetirement?) {
    let followers: [AnyWork] = withState { state in
      guard let index = state.barriers.firstIndex(where: { $0.barrier === barrier }) else { return [] }
      state.retiringBarriers.insert(ObjectIdentifier(barrier))
      var taken: [AnyWork] = []
      swap(&taken, &state.barriers[index].followers)
      return taken
    }
    for follower in followers {
      switch follower.dependencyResolved(on: self) {
      case .waiting: break
      case .local: ready.append(follower)
      case .elsewhere(let engine):
        if rare == nil { rare = RareRetirement() }
        rare!.foreign.append((follower, engine))
      }
    }
  }

  /// What follows a retirement, outside the lock: start work, queue dependents on other queues, run completion
  /// handlers, wake waiters, retire the dependents that ended with the item.
  private func finishRetiring(
    _ item: AnyWork,
    starts: consuming SmallList<AnyWork>,
    completed: borrowing Completed,
    rare: RareRetirement?
  ) {
    start(consume starts)
    emit(.finished(WorkOutcome(completed.termination)), for: item)
    if let rare { Self.releaseFollowers(of: rare) }
    if let key = completed.exclusiveKey { ExclusivityRegistry.shared.release(key, by: item) }
    if let rare { Self.queueForeignDependents(of: rare) }
    completed.handlers.forEachElement { $0() }
    // Handlers registered after the item ended (it looked finished, but the queue still counts it) run now. Emptied
    // by `removeAll` (inline): the list is then known to be empty where it dies, and needs no destroy call (iterated
    // with `forEachElement`, it was destroyed through an outlined call on every item).
    var late = item.markRetired()
    late.removeAll { $0() }
    if let rare, !rare.waiters.isEmpty { Self.wake(rare.waiters) }
    if let rare { Self.retireEndedDependents(of: rare) }
  }

  // The rare parts of `finishRetiring`, out of line: inlined, the type metadata they need (of the waiters'
  // continuations, among others) was looked up on every retirement, three calls per item under callgrind, whether or
  // not there was anything to do.

  /// Makes the followers of a barrier that completed ready.
  @inline(never)
  private static func releaseFollowers(of rare: RareRetirement) {
    for follower in rare.released {
      if let engine = follower.dependencyResolved() { engine.makeReady(follower) }
    }
  }

  /// Queues the dependents made ready on other queues.
  @inline(never)
  private static func queueForeignDependents(of rare: RareRetirement) {
    for (dependent, engine) in rare.foreign { engine.makeReady(dependent) }
  }

  /// Wakes those waiting for the queue to have no unfinished work.
  @inline(never)
  private static func wake(_ waiters: [Waiter]) {
    for waiter in waiters { waiter.resume() }
  }

  /// Retires the dependents that ended with the item (a failed or cancelled dependency).
  @inline(never)
  private static func retireEndedDependents(of rare: RareRetirement) {
    for ended in rare.ended {
      // Each entry's completion is there, once: `propagate` made the entry with it and only this takes it.
      guard let completed = ended.completed.take() else {
        assertionFailure("Spindle: a dependent that ended was retired twice")
        continue
      }
      completed.retire(ended.work)  // its dependents were moved out and told by `propagate`
    }
  }

  /// Tells the dependents of a completed item: those now ready go to `ready` when they run on this engine, to
  /// `rare.foreign` with their engine otherwise; those that end too (a failed or cancelled dependency) go to
  /// `rare.ended` and are followed iteratively, so long chains cannot overflow the stack.
  ///
  /// The completed item's dependents are moved out of `completed` (which is left with none) into `ready`: a copy
  /// was a retain and a release of each dependent, on a line of memory that the thread adding the next item of a
  /// chain was writing at the same time (`perf`: about 5 % of a live chain's samples were that retain).
  func propagate(
    _ completed: inout Completed,
    ready: inout SmallList<AnyWork>,
    rare: inout RareRetirement?
  ) {
    func tell(_ dependent: consuming AnyWork, _ success: Bool, _ termination: borrowing Termination) {
      if success || dependent.acceptsFailedDependencies {
        switch dependent.dependencyResolved(on: self) {
        case .waiting: break
        case .local: ready.append(consume dependent)
        case .elsewhere(let engine):
          if rare == nil { rare = RareRetirement() }
          rare!.foreign.append((consume dependent, engine))
        }
      } else if let endedCompleted = dependent.completeWithoutRunning(copy termination) {
        if rare == nil { rare = RareRetirement() }
        rare!.ended.append(EndedDependent(work: consume dependent, completed: consume endedCompleted))
      }
    }
    let success = completed.termination.isSuccess
    // Moved out (`consume`): passed on as the closure's parameter, each dependent was retained for the call and
    // released after it (`perf`: 4 % of a chain's samples, the line the adding thread was writing). `removeAll`, not
    // `popFirst` in a loop, which moves the rest up each time (quadratic in a wide fan-out).
    completed.dependents.removeAll { (dependent: consuming AnyWork) in
      tell(consume dependent, success, completed.termination)
    }
    var index = 0
    while let count = rare?.ended.count, index < count {
      // The entry (a class) is read out and its dependents moved out of its completion: `tell` appends to `ended`
      // (the rare path of dependents that end without running), and a copy of the array kept across `tell` would make
      // each append copy the whole array. Moved, the list is told once and is empty when the dependent retires.
      let entry = rare!.ended[index]
      var dependents = SmallList<AnyWork>()
      swap(&dependents, &entry.completed!.dependents)
      let termination = entry.completed!.termination
      dependents.removeAll { (dependent: consuming AnyWork) in
        tell(consume dependent, termination.isSuccess, termination)
      }
      index += 1
    }
  }
}

/// What a retirement rarely has: dependents ready on other queues, dependents that ended without running (a
/// failed or cancelled dependency), the followers of a barrier that completed, and the waiters to wake when the
/// queue's last unfinished item retired.
///
/// A class, so that the retirement's `RareRetirement?` is one reference, nil on the common path: destroying it is one
/// release call. As a struct of three lists, destroying the optional went through `Optional`'s generic value witness
/// (the compiler outlines large types' destruction), about 60 instructions of every retirement under callgrind.
/// Created, filled and read by the one thread that retires an item.
final class RareRetirement {
  var foreign = SmallList<(AnyWork, WorkEngine)>()
  var ended: [EndedDependent] = []
  var released: [AnyWork] = []
  var waiters: [Waiter] = []
}

/// A dependent that ended with the item that retired (a failed or cancelled dependency), with its completion: a class,
/// as an array cannot hold the noncopyable ``Completed``. Made and read by the one thread that retires the item.
final class EndedDependent {
  let work: AnyWork
  /// Taken when the dependent is retired.
  var completed: Completed?

  init(work: AnyWork, completed: consuming Completed) {
    self.work = work
    self.completed = consume completed
  }
}

extension EngineState {
  /// Whether a worker's retirement must take the engine's incoming list before it retires its item and queues the
  /// dependents in `ready` (see `WorkEngine.withStateOnRetirement`): when one of them is not registered yet, when the
  /// item is the last unfinished one counted (so that the count cannot reach zero, waking those who wait for the
  /// queue to end, while added work is still on the list), and when a barrier is pending, items are held behind one, or
  /// progress is observed (those read the order and the count of everything added).
  func retirementNeedsIncoming(readying ready: borrowing SmallList<AnyWork>) -> Bool {
    if scheduler.unfinished <= 1 || !barriers.isEmpty || !held.isEmpty || observers.hasProgress { return true }
    var unregistered = false
    ready.forEachElement { dependent in
      if !dependent.isRegistered { unregistered = true }
    }
    return unregistered
  }
}
