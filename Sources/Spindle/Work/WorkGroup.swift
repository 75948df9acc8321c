import Dispatch

/// A sub-graph of work that acts as one item: its value is what its final item returns, and it is cancelled,
/// timed out and observed as one.
///
/// Build it with ``WorkQueue/group(name:timeout:_:)``: every item added through the group is a member, and so is
/// the item `build` returns. Work added straight to a queue inside `build` is not: add it through the group to have
/// it cancelled, timed out and counted with the others.
///
/// ```swift
/// let album = queue.group(name: "album") { group in                       // Work<[Thumbnail]>
///   let thumbs = photos.map { p in group.add { thumbnail(p) } }
///   return group.add(afterAll: thumbs) { $0 }
/// }
/// album.cancel()   // cancels every thumbnail not yet done
/// ```
public final class WorkGroup: Sendable {
  /// The queue the group's items are added to.
  public let queue: WorkQueue
  private let members = Locked<[AnyWork]>([])
  let tally = GroupTally()

  init(queue: WorkQueue) {
    self.queue = queue
  }

  /// The items of the group so far.
  public var items: [AnyWork] { members.withLock { $0 } }

  /// How many of the group's items have completed (finished, failed or cancelled), of how many it has.
  ///
  /// The same value as ``AnyWork/progress`` of the group's work, which is the one to use outside `build`.
  public var progress: WorkProgress { tally.progress }

  @discardableResult
  func register<Value>(_ work: Work<Value>) -> Work<Value> {
    members.withLock { $0.append(work) }
    tally.added()
    work.whenCompleteErased { [tally] in tally.completed() }
    return work
  }

  /// Adds a member with a synchronous body, as `WorkQueue.add` does.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    retry: WorkRetry? = nil,
    _ body: @escaping @Sendable () throws -> Value
  ) -> Work<Value> {
    register(queue.add(name: name, priority: priority, dependencies: dependencies, retry: retry, body))
  }

  /// Adds a member with an `async` body.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    retry: WorkRetry? = nil,
    _ body: @escaping @Sendable () async throws -> Value
  ) -> Work<Value> {
    register(queue.add(name: name, priority: priority, dependencies: dependencies, retry: retry, body))
  }

  /// Adds a member whose body receives the value of `a`.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    retry: WorkRetry? = nil,
    _ body: @escaping @Sendable (A) throws -> Value
  ) -> Work<Value> {
    register(queue.add(name: name, priority: priority, after: a, dependencies: dependencies, retry: retry, body))
  }

  /// Adds a member whose body receives the values of `parts`, in order.
  @discardableResult
  public func add<Part: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterAll parts: [Work<Part>],
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable ([Part]) throws -> Value
  ) -> Work<Value> {
    register(queue.add(name: name, priority: priority, afterAll: parts, dependencies: dependencies, body))
  }
}

extension WorkQueue {
  /// Builds a group: a sub-graph whose value is what `build`'s final item returns.
  ///
  /// The group's work completes when the final item does, with its outcome. Cancelling it cancels every
  /// member still unfinished; with a `timeout`, if the final item has not completed when it runs out (counted
  /// from now), the members still unfinished are cancelled and the group fails with ``WorkTimeoutError`` naming
  /// it. Observers of the returned work see the group's events. The members are the items added through the
  /// group and the item `build` returns; work added straight to a queue inside `build` is not one.
  ///
  /// ```swift
  /// let album = queue.group(name: "album", timeout: .seconds(30)) { group in
  ///   let thumbs = photos.map { p in group.add { thumbnail(p) } }
  ///   return group.add(afterAll: thumbs) { $0 }
  /// }
  /// ```
  public func group<Value: Sendable>(
    name: String? = nil,
    timeout: Duration? = nil,
    _ build: (WorkGroup) throws -> Work<Value>
  ) rethrows -> Work<Value> {
    if let timeout {
      precondition(timeout > .zero, "WorkQueue.group: timeout must be above zero, got \(timeout)")
    }
    let group = WorkGroup(queue: self)
    let final = try build(group)
    // The final item is usually a member already (added through the group); one added otherwise joins it.
    if !group.items.contains(where: { $0 === final }) { group.register(final) }
    let members = group.items
    group.tally.seal()
    let handle = add(name: name ?? "group", priority: final.priority, afterResults: final) { try $0.get() }
    handle.lock.withLock {
      if handle.extras == nil { handle.extras = WorkExtras(options: WorkOptions()) }
      handle.extras?.cancelAlso = members
      handle.extras?.groupTally = group.tally
    }
    if let timeout {
      // Unstarted at the deadline, the members and the group's work complete without a slot (see `inTimedGroup`).
      for work in members + [handle] {
        work.lock.withLock {
          if work.extras == nil { work.extras = WorkExtras(options: WorkOptions()) }
          work.extras?.inTimedGroup = true
        }
      }
      let queueName = self.name
      // The members' time is what runs out: once the final item has completed (its queue keeps unfinished work alive,
      // so a released one has completed too), the group's work ends with its outcome as soon as it gets a slot.
      DispatchQueue.global().asyncAfter(deadline: .now() + dispatchInterval(timeout)) { [weak handle, weak final] in
        guard let handle, !handle.state.isFinal, let final, !final.state.isFinal else { return }
        handle.fail(with: WorkTimeoutError(work: handle.name, queue: queueName, timeout: timeout))
      }
    }
    return handle
  }
}

extension AnyWork {
  /// Fails unfinished work at once (a group's timeout): pending or ready work completes with `error`; running
  /// work is asked to stop. Members named in `cancelAlso` are cancelled.
  func fail(with error: any Error) {
    let completed: Completed? = lock.withLock {
      switch phase {
      case .pending, .ready: completeLocked(.failed(error))
      default: nil
      }
    }
    cancelMembers()
    if let completed { completed.retire(self) }
  }

  /// Cancels the members of a group handle, newest first (as `WorkQueue.cancelAll()`): oldest first, cancelling a
  /// member made a later one that takes its result (`afterResults:`) ready, and it ran before it was cancelled.
  func cancelMembers() {
    let members: [AnyWork] = lock.withLock {
      defer { extras?.cancelAlso = [] }
      return extras?.cancelAlso ?? []
    }
    for member in members.reversed() { member.cancel() }
  }
}

/// A group's progress: its members counted as they are added and as they complete, told to whoever streams it.
final class GroupTally: Sendable {
  private struct State {
    var progress = WorkProgress(completed: 0, total: 0)
    /// Set when `build` returned: from then on, all members completed means the group's progress is final.
    var sealed = false
    var streams: [Int: AsyncStream<WorkProgress>.Continuation] = [:]
    var nextID = 0
    var isFinal: Bool { sealed && progress.completed == progress.total }
  }

  private let state = Locked(State())

  var progress: WorkProgress { state.withLock { $0.progress } }

  func added() {
    state.withLock { $0.progress.total += 1 }
  }

  func completed() {
    update { $0.progress.completed += 1 }
  }

  func seal() {
    update { $0.sealed = true }
  }

  /// Applies `change`, then tells every stream the new value (and ends them when the progress is final).
  private func update(_ change: (inout State) -> Void) {
    let (value, streams, final) = state.withLock { state in
      change(&state)
      let streams = Array(state.streams.values)
      if state.isFinal { state.streams = [:] }
      return (state.progress, streams, state.isFinal)
    }
    for stream in streams {
      stream.yield(value)
      if final { stream.finish() }
    }
  }

  /// The progress now and after every change, ending once every member has completed.
  func updates() -> AsyncStream<WorkProgress> {
    let (stream, continuation) = AsyncStream.makeStream(of: WorkProgress.self, bufferingPolicy: .bufferingNewest(1))
    let registered: Int? = state.withLock { state in
      continuation.yield(state.progress)
      if state.isFinal { return nil }
      let id = state.nextID
      state.nextID += 1
      state.streams[id] = continuation
      return id
    }
    guard let id = registered else {
      continuation.finish()
      return stream
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
    }
    return stream
  }
}

extension AnyWork {
  /// How much of this work is done, counted as the queue counts: for a group's work (``WorkQueue/group(name:timeout:_:)``),
  /// its members completed of its members; for any other work, 0 of 1 until it completes, then 1 of 1.
  ///
  /// ```swift
  /// let album = queue.group(name: "album") { group in … }
  /// print(album.progress.fractionCompleted)        // 0.25: a quarter of the thumbnails are done
  /// ```
  public var progress: WorkProgress {
    let (tally, done): (GroupTally?, Bool) = lock.withLock { (extras?.groupTally, phase.isFinal) }
    if let tally { return tally.progress }
    return WorkProgress(completed: done ? 1 : 0, total: 1)
  }

  /// ``progress`` now and after every change, as an `AsyncStream` that ends when the work (every member, for a
  /// group) has completed.
  ///
  /// ```swift
  /// for await p in album.progressUpdates { bar.show(p.completed, of: p.total) }
  /// ```
  public var progressUpdates: AsyncStream<WorkProgress> {
    if let tally = lock.withLock({ extras?.groupTally }) { return tally.updates() }
    let (stream, continuation) = AsyncStream.makeStream(of: WorkProgress.self, bufferingPolicy: .bufferingNewest(2))
    continuation.yield(WorkProgress(completed: 0, total: 1))
    whenCompleteErased {
      continuation.yield(WorkProgress(completed: 1, total: 1))
      continuation.finish()
    }
    return stream
  }
}
