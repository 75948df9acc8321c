import Dispatch

/// A sub-graph of work that acts as one item: its value is what its final item returns, and it is cancelled,
/// timed out and observed as one.
///
/// Build it with ``WorkQueue/group(name:timeout:_:)``: every item added through the group (or added on any
/// queue by the building closure, on its thread) is a member.
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

  init(queue: WorkQueue) {
    self.queue = queue
  }

  /// The items of the group so far.
  public var items: [AnyWork] { members.withLock { $0 } }

  @discardableResult
  func register<Value>(_ work: Work<Value>) -> Work<Value> {
    members.withLock { $0.append(work) }
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
  /// member still unfinished; with a `timeout`, the members still unfinished when it runs out (counted from
  /// now) are cancelled and the group fails with ``WorkTimeoutError`` naming it. Observers of the returned
  /// work see the group's events.
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
    let final = group.register(try build(group))
    let members = group.items
    let handle = add(name: name ?? "group", priority: final.priority, afterResults: final) { try $0.get() }
    handle.lock.withLock {
      if handle.extras == nil { handle.extras = WorkExtras(options: WorkOptions()) }
      handle.extras?.cancelAlso = members
    }
    if let timeout {
      let queueName = self.name
      DispatchQueue.global().asyncAfter(deadline: .now() + dispatchInterval(timeout)) { [weak handle] in
        guard let handle, !handle.state.isFinal else { return }
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
    if let completed { completed.engine?.retire(self, completed: completed) }
  }

  /// Cancels the members of a group handle.
  func cancelMembers() {
    let members: [AnyWork] = lock.withLock {
      defer { extras?.cancelAlso = [] }
      return extras?.cancelAlso ?? []
    }
    for member in members { member.cancel() }
  }
}
