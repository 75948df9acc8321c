import Dispatch

extension WorkQueue {
  // MARK: - Batches and barriers

  /// Adds work atomically: nothing added inside `body` (or anything else on this queue) starts before `body`
  /// returns, so priorities order the whole batch.
  ///
  /// ```swift
  /// queue.batch { for p in photos { queue.add(priority: p.isVisible ? .high : .low) { process(p) } } }
  /// ```
  ///
  /// Batches nest; running bodies go on meanwhile.
  @discardableResult
  public func batch<Result>(_ body: () throws -> Result) rethrows -> Result {
    engine.withState { $0.scheduler.hold() }
    defer {
      let starts = engine.withState { $0.scheduler.release() }
      engine.start(consume starts)
    }
    return try body()
  }

  /// Adds a barrier: work that runs after everything added before it completed (however it ended) and
  /// before anything added after it starts, like `OperationQueue.addBarrierBlock`.
  ///
  /// ```swift
  /// for file in files { queue.add { try write(file) } }
  /// let gate = queue.addBarrier { snapshot() }              // sees every write done
  /// queue.add { try compact() }                              // starts after the snapshot
  /// ```
  ///
  /// Work added later starts after the barrier whatever the barrier's own outcome: cancelling a barrier skips
  /// its body (it ends cancelled), but it still completes only after the work added before it. Adding a barrier from a body of the same queue would make it wait for itself: that stops the
  /// program with a message.
  @discardableResult
  public func addBarrier(name: String? = nil, _ body: @escaping @Sendable () throws -> Void) -> Work<Void> {
    if let current = WorkContext.currentWork, current.currentEngine === engine {
      let message =
        "WorkQueue '\(self.name)': addBarrier called from inside work '\(current.name ?? "unnamed")' of the same "
        + "queue; the barrier would wait for the body that adds it and deadlock"
      WorkQueue.standardErrorMisuseHandler(message)
      preconditionFailure(message)
    }
    let type = Work<Void>.self
    let barrier = type.init(
      engine: engine,
      name: name ?? "barrier",
      priority: .veryHigh,
      dependencyCount: 0,
      acceptsFailedDependencies: true,
      dependencies: .none,
      extras: nil,
      body: .sync { [type] work in
        type.runSync(work) {
          if work.isCancellationRequested { throw CancellationError() }
          try body()
        }
      }
    )
    barrier.isBarrier = true
    // What the barrier waits for, and its place among the pending barriers, in one critical section: taken in two, a
    // barrier added by another thread in between could land before this one in the list yet follow it, and two
    // threads adding barriers while a third cancelled them made cycles of barriers that never ended.
    let (before, followsBarrier) = engine.withState { state in
      let before = state.unfinishedItems()
      // The previous pending barrier is waited for: as a dependency once it is registered, as a barrier to follow
      // (released when it completes) while its own `addBarrier` has yet to admit it.
      var follows = false
      if let last = state.barriers.indices.last {
        let previous = state.barriers[last].barrier
        if !before.contains(where: { $0 === previous }) {
          barrier.remaining.wrappingAdd(1, ordering: .relaxed)
          state.barriers[last].followers.append(barrier)
          follows = true
        }
      }
      barrier.remaining.wrappingAdd(before.count, ordering: .relaxed)
      barrier.dependencyList = DependencyList(first: nil, more: before)
      state.barriers.append((barrier, []))
      engine.barrierHint.store(true, ordering: .relaxed)
      return (before, follows)
    }
    engine.admit(barrier, first: nil, dependencies: before, followsBarrier: followsBarrier)
    return barrier
  }

  // MARK: - Observing

  /// Calls `handler` with every event of every item of this queue until the returned observation is
  /// cancelled or released.
  ///
  /// ```swift
  /// let logging = queue.observe { event in print(event) }   // 'resize' on 'images': started (attempt 1)
  /// ```
  ///
  /// Handlers run on the thread where the event happens (or, while an earlier event of the same item is being
  /// delivered on another thread, on that one, right after it), outside the queue's locks; keep them short. Each
  /// item's events come one at a time and in order (see ``WorkEvent``).
  public func observe(_ handler: @escaping @Sendable (WorkEvent) -> Void) -> WorkObservation {
    engine.observe(handler)
  }

  /// The events of every item of this queue from now on, as an `AsyncStream`.
  ///
  /// It ends when you stop iterating, or once the queue is gone: its last handle released and its work over. It does
  /// not keep the queue alive.
  ///
  /// ```swift
  /// for await event in queue.events { log(event) }   // ends with the queue
  /// ```
  public var events: AsyncStream<WorkEvent> {
    engine.eventStream()
  }

  /// How much of the current burst of work is done: completed of added, since the queue was last idle.
  public var progress: WorkProgress {
    engine.withState { $0.progress }
  }

  /// The queue's progress now and after every change, as an `AsyncStream` (newest value kept).
  ///
  /// It ends when you stop iterating, or once the queue is gone: its last handle released and its work over. It does
  /// not keep the queue alive.
  ///
  /// ```swift
  /// for await p in queue.progressUpdates { bar.show(p.completed, of: p.total) }
  /// ```
  public var progressUpdates: AsyncStream<WorkProgress> {
    engine.progressUpdates()
  }
}

extension WorkQueue: CustomDebugStringConvertible {
  /// A report for a stuck queue: its width and state, what runs (and since when: its latest attempt's start,
  /// to a few milliseconds), what is ready, and what each pending item waits for.
  ///
  /// ```swift
  /// print(String(reflecting: queue))
  /// // WorkQueue 'net': width 2, 1 running, 0 ready, 2 unfinished
  /// //   running 'page' (normal), for 12.4 s
  /// //   pending 'render' (normal), waits for 'page'
  /// ```
  public var debugDescription: String {
    let (items, scheduler, barrierOf) = engine.withState { state in
      (state.unfinishedItems(), state.scheduler, state.pendingBarrierOfEachWaitingItem())
    }
    var lines = [
      "WorkQueue '\(name)': width \(scheduler.width), \(scheduler.slots - scheduler.idle) running, "
        + "\(scheduler.readyCount) ready, \(scheduler.unfinished) unfinished"
        + (scheduler.isSuspended ? ", suspended" : "") + (scheduler.holds > 0 ? ", in a batch" : "")
    ]
    let now = Platform.coarseUptimeNanoseconds
    for item in items {
      let (phase, dependencies, startedAt) = item.lock.withLock {
        (item.phase.state, item.dependencyArrayLocked(), item.startedAt)
      }
      var waiting = dependencies.filter { !$0.state.isFinal }
      if !phase.isFinal && phase != .running, let barrier = barrierOf[ObjectIdentifier(item)],
        !barrier.state.isFinal, !waiting.contains(where: { $0 === barrier })
      {
        waiting.append(barrier)
      }
      let waitingFor = waiting.map { $0.name ?? "unnamed" }
      var line = "  \(phase) '\(item.name ?? "unnamed")' (\(item.priority))"
      if phase == .running {
        let tenths = (now &- min(now, startedAt)) / 100_000_000
        line += ", for \(tenths / 10).\(tenths % 10) s"
      }
      if phase == .pending {
        if let key = item.lock.withLock({ item.extras?.options.exclusive }) {
          line += ", exclusive '\(key)'"
        }
        if !waitingFor.isEmpty { line += ", waits for \(waitingFor.map { "'\($0)'" }.joined(separator: ", "))" }
      } else if phase == .ready && !waitingFor.isEmpty {
        // Held behind a barrier added while it was added (ready, but not in the ready count).
        line += ", waits for \(waitingFor.map { "'\($0)'" }.joined(separator: ", "))"
      }
      if item.attempts > 1 { line += ", attempt \(item.attempts)" }
      lines.append(line)
    }
    return lines.joined(separator: "\n")
  }
}
