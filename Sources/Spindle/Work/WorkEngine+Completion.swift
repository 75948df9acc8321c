// Completion: retiring items, telling dependents, waking waiters.
extension WorkEngine {
  /// Retires an item a worker completed and returns the worker's next step, in one visit to the lock.
  func completeOnWorker(
    _ item: AnyWork,
    _ completed: Completed
  ) -> WorkScheduler<AnyWork, Waiter>.WorkerStep {
    retire(item, completed) { $0.scheduler.workerDone(mayLinger: !runsOnMain) }
  }

  /// Retires an item that completed away from a worker's loop: cancelled, ended by a dependency, or an `async`
  /// or callback body that hands its slot on (`releasingSlot`).
  func retire(_ item: AnyWork, completed: Completed, releasingSlot: Bool = false) {
    trace?.recordEnd(item, termination: completed.termination)
    let next = retire(item, completed) { releasingSlot ? $0.scheduler.detachedBodyEnded() : nil }
    // Work that ended without running (cancelled, or ended by a dependency) releases its body's captures now.
    item.dropStoredBody()
    if let next { startHolding(next) }
  }

  /// Retires `item` in one visit to the lock: unregisters it, queues the dependents it made ready on this queue,
  /// and asks `decide` what the slot it held (if any) does next; then does the rest outside the lock.
  @inline(__always)
  private func retire<Next>(
    _ item: AnyWork,
    _ completed: Completed,
    then decide: (inout EngineState) -> Next
  ) -> Next {
    var ready = SmallList<(AnyWork, WorkEngine)>()
    var ended: [(AnyWork, Completed)] = []
    Self.propagate(completed, ready: &ready, ended: &ended)
    var foreign = SmallList<(AnyWork, WorkEngine)>()
    var released: [AnyWork] = []
    let (next, starts, waiters) = state.withLock { state in
      let waiters = state.unregister(item, released: &released)
      for (dependent, engine) in ready {
        if engine === self {
          state.scheduler.push(dependent, priority: dependent.priority.rawValue)
        } else {
          foreign.append((dependent, engine))
        }
      }
      let next = decide(&state)
      let starts = state.scheduler.takeStarts()
      if !released.isEmpty { barrierHint.store(!state.barriers.isEmpty, ordering: .relaxed) }
      publishHints(state)
      return (next, starts, waiters)
    }
    finishRetiring(
      item,
      starts: starts,
      foreign: foreign,
      completed: completed,
      waiters: waiters,
      ended: ended,
      released: released
    )
    return next
  }

  /// What follows a retirement, outside the lock: start work, queue dependents on other queues, run completion
  /// handlers, wake waiters, retire the dependents that ended with the item.
  private func finishRetiring(
    _ item: AnyWork,
    starts: SmallList<AnyWork>,
    foreign: SmallList<(AnyWork, WorkEngine)>,
    completed: Completed,
    waiters: [Waiter],
    ended: [(AnyWork, Completed)],
    released: [AnyWork]
  ) {
    start(starts)
    emit(.finished(WorkOutcome(completed.termination)), for: item)
    for follower in released {
      if let engine = follower.dependencyResolved() { engine.makeReady(follower) }
    }
    if let key = completed.exclusiveKey { ExclusivityRegistry.shared.release(key, by: item) }
    for (dependent, engine) in foreign { engine.makeReady(dependent) }
    for handler in completed.handlers { handler() }
    // Handlers registered after the item ended (it looked finished, but the queue still counted it) run now.
    item.markRetired().forEachElement { $0() }
    for waiter in waiters { waiter.resume() }
    for (other, var otherCompleted) in ended {
      otherCompleted.dependents = SmallList()  // `propagate` already told them
      otherCompleted.engine?.retire(other, completed: otherCompleted)
    }
  }

  /// Tells the dependents of a completed item; those that end too (a failed or cancelled dependency) are
  /// followed iteratively, so long chains cannot overflow the stack.
  static func propagate(
    _ completed: Completed,
    ready: inout SmallList<(AnyWork, WorkEngine)>,
    ended: inout [(AnyWork, Completed)]
  ) {
    var dependents = completed.dependents
    var termination = completed.termination
    var index = 0
    while true {
      for dependent in dependents {
        if termination.isSuccess || dependent.acceptsFailedDependencies {
          if let engine = dependent.dependencyResolved() { ready.append((dependent, engine)) }
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
