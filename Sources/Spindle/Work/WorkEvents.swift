import Synchronization

/// Something that happened to a work item, for observers, logs and metrics.
///
/// ```swift
/// queue.observe { event in log("\(event)") }          // every item of the queue
/// album.observe { event in print(event.kind) }         // one item
/// for await event in queue.events { metrics.record(event) }
/// ```
///
/// An item's events reach the observers one at a time, in the order of what they report: ``Kind/added``; for each
/// attempt ``Kind/willStart(attempt:)`` and ``Kind/started(attempt:)`` (then ``Kind/retrying(attempt:error:)`` when it
/// failed and is tried again); at most one ``Kind/cancelRequested(reason:)``, only for running work, after
/// `started`; and ``Kind/finished(_:)`` last. Work cancelled before it started gets no `cancelRequested`: it completes
/// at once, and its `finished` event says it was cancelled. Exclusive work starts only once it holds its key: while it
/// waits in the key's line it is pending, and has had no start event.
///
/// Each event is delivered on the thread where it happens, unless another thread is still delivering an earlier event
/// of the same item: then that thread delivers it, right after. So a `cancel()` that comes while the worker delivers
/// `willStart` and `started` returns at once, and the worker delivers its `cancelRequested` next; and when the work
/// completes while the cancelling thread delivers `cancelRequested`, that thread delivers `finished` too, which can
/// then come after the work's value is available and its completion handlers ran.
public struct WorkEvent: Sendable, CustomStringConvertible {
  /// What happened.
  public enum Kind: Sendable {
    /// The work was added to its queue.
    case added
    /// Its body is about to start (attempt `attempt`, 1 without retries).
    case willStart(attempt: Int)
    /// Its body started.
    case started(attempt: Int)
    /// An attempt failed with `error`; attempt `attempt` follows after the retry policy's wait.
    case retrying(attempt: Int, error: any Error)
    /// Running work was asked to stop (with the reason given to ``AnyWork/cancel(reason:)``, if any): once, after
    /// `started` and before `finished`, however the cancel and the work's start and end race.
    case cancelRequested(reason: String?)
    /// The work completed.
    case finished(WorkOutcome)
  }

  /// What happened.
  public var kind: Kind
  /// The name of the work, if it had one.
  public var work: String?
  /// The name of its queue.
  public var queue: String
  /// When it happened.
  public var time: ContinuousClock.Instant

  public var description: String {
    let subject = "'\(work ?? "unnamed")' on '\(queue)'"
    switch kind {
    case .added: return "\(subject): added"
    case .willStart(let attempt): return "\(subject): will start (attempt \(attempt))"
    case .started(let attempt): return "\(subject): started (attempt \(attempt))"
    case .retrying(let attempt, let error): return "\(subject): retrying (attempt \(attempt)) after \(error)"
    case .cancelRequested(let reason): return "\(subject): cancel requested\(reason.map { ": \($0)" } ?? "")"
    case .finished(let outcome): return "\(subject): \(outcome)"
    }
  }
}

/// How a work item ended.
public enum WorkOutcome: Sendable, CustomStringConvertible {
  /// The body returned a value.
  case finished
  /// The body (or a dependency) failed with `error`.
  case failed(any Error)
  /// The work was cancelled (or skipped by its condition), with the reason if one was given.
  case cancelled(reason: String?)

  init(_ termination: Termination) {
    switch termination {
    case .finished: self = .finished
    case .cancelled: self = .cancelled(reason: nil)
    case .failed(let error as WorkCancellationError): self = .cancelled(reason: error.reason)
    case .failed(let error): self = .failed(error)
    }
  }

  public var description: String {
    switch self {
    case .finished: "finished"
    case .failed(let error): "failed: \(error)"
    case .cancelled(let reason): "cancelled\(reason.map { ": \($0)" } ?? "")"
    }
  }
}

/// How much of a queue's current burst of work is done: items completed of items added since the queue was
/// last idle.
///
/// ```swift
/// let p = queue.progress
/// print("\(p.completed) of \(p.total)")
/// ```
public struct WorkProgress: Sendable, Hashable {
  /// Items completed (finished, failed or cancelled).
  public var completed: Int
  /// Items added.
  public var total: Int
  /// Progress of `completed` items of `total`.
  ///
  /// ```swift
  /// let half = WorkProgress(completed: 5, total: 10)   // half.fractionCompleted == 0.5
  /// ```
  public init(completed: Int, total: Int) {
    self.completed = completed
    self.total = total
  }

  /// `completed / total`, 1 when nothing was added.
  public var fractionCompleted: Double { total == 0 ? 1 : Double(completed) / Double(total) }
}

/// A registration of an observer; ``cancel()`` it to stop observing (it also stops when released).
public final class WorkObservation: Sendable {
  private let stop: Locked<(@Sendable () -> Void)?>

  init(stop: @escaping @Sendable () -> Void) {
    self.stop = Locked(stop)
  }

  /// Stops the observation; calling it twice is harmless.
  public func cancel() {
    let stop = self.stop.withLock { stop in
      defer { stop = nil }
      return stop
    }
    stop?()
  }

  deinit { cancel() }
}

/// The observers of a queue; touched under the engine's lock, called outside it.
struct QueueObservers {
  private var nextID = 0
  private(set) var handlers: [Int: @Sendable (WorkEvent) -> Void] = [:]
  private(set) var progress: [Int: AsyncStream<WorkProgress>.Continuation] = [:]
  /// How to end each stream of `handlers` (``WorkQueue/events``), when the queue ends.
  private var streamEndings: [Int: @Sendable () -> Void] = [:]
  /// Whether `progress` has continuations, kept beside it: every item's registration and retirement asks, and
  /// `progress.isEmpty` looked up the dictionary's type metadata (its element type comes from a resilient module)
  /// twice per item, under callgrind.
  private(set) var hasProgress = false

  var isEmpty: Bool { handlers.isEmpty && progress.isEmpty }

  /// Adds `handler`; `ending`, if given, ends the stream it feeds when the queue ends (``takeEndings()``).
  mutating func add(
    _ handler: @escaping @Sendable (WorkEvent) -> Void, ending: (@Sendable () -> Void)? = nil
  ) -> Int {
    nextID += 1
    handlers[nextID] = handler
    if let ending { streamEndings[nextID] = ending }
    return nextID
  }

  mutating func addProgress(_ continuation: AsyncStream<WorkProgress>.Continuation) -> Int {
    nextID += 1
    progress[nextID] = continuation
    hasProgress = true
    return nextID
  }

  /// Removes the observer `id`; returns what it held (a handler, a stream's continuation and ending), for the caller
  /// to let go of after the engine's lock: a handler's captures are user code's, and may hold the last reference to
  /// the queue, whose deinit takes the lock.
  mutating func remove(_ id: Int) -> Removed {
    let removed = Removed(
      handler: handlers.removeValue(forKey: id), progress: progress.removeValue(forKey: id),
      ending: streamEndings.removeValue(forKey: id))
    hasProgress = !progress.isEmpty
    return removed
  }

  /// What ``remove(_:)`` took out, released where the caller drops it.
  struct Removed {
    let handler: (@Sendable (WorkEvent) -> Void)?
    let progress: AsyncStream<WorkProgress>.Continuation?
    let ending: (@Sendable () -> Void)?
  }

  /// What ends every stream of the queue's events and progress, leaving no observers: for the queue's end.
  /// The handlers go with the endings (each ending holds its stream's continuation), for the caller to let go of after
  /// the lock.
  mutating func takeEndings() -> (endings: [@Sendable () -> Void], handlers: [@Sendable (WorkEvent) -> Void]) {
    var endings = Array(streamEndings.values)
    for continuation in progress.values { endings.append { continuation.finish() } }
    let handlers = Array(self.handlers.values)
    self = QueueObservers()
    return (endings, handlers)
  }
}

// The order of an item's events. Each event is delivered outside every lock (handlers are user code), by the thread
// where it happens, which may be another one for each event of the same item: the worker delivers `willStart` and
// `started`, the thread that calls `cancel()` delivers `cancelRequested`, whichever thread retires the work delivers
// `finished`. Delivered freely, a cancel's event could overtake the start events (the worker let go of the item's lock
// before delivering them), and a cancel's could come after `finished` (the body ended while the cancelling thread was
// about to deliver it). So one thread at a time delivers an item's events (`AnyWork.deliveringEvents`, under the
// item's lock): a thread that has an event while another delivers leaves it to that thread (in `WorkExtras`), which
// delivers it next. The worker and `cancel()` take their turn, or leave their event, under the same lock acquisition
// that changes the item's phase (to running; cancel requested), so the events keep the order of the changes. All of
// it is behind `isObserved`: nothing changes for a queue that nobody observes.

extension WorkEngine {
  /// Tells the queue's and the item's observers about `kind` (see above for the order); a relaxed load when nobody
  /// observes.
  @inline(__always)
  func emit(_ kind: @autoclosure () -> WorkEvent.Kind, for item: AnyWork) {
    guard isObserved.load(ordering: .relaxed) else { return }
    emitSlow(kind(), for: item)
  }

  private func emitSlow(_ kind: WorkEvent.Kind, for item: AnyWork) {
    guard item.lock.withLock({ item.claimEventDeliveryLocked(kind) }) else { return }
    deliver(kind, for: item)
    deliverHeldEvents(of: item)
  }

  /// Delivers one event of `item` to the queue's observers and the item's; `time` is when it happened (now, unless
  /// another thread left it). Call only on the thread whose turn it is to deliver the item's events.
  func deliver(_ kind: WorkEvent.Kind, at time: ContinuousClock.Instant = .now, for item: AnyWork) {
    let event = WorkEvent(kind: kind, work: item.name, queue: name, time: time)
    let handlers = withState { Array($0.observers.handlers.values) }
    for handler in handlers { handler(event) }
    for handler in item.observerList() { handler(event) }
  }

  /// Delivers the events of `item` that other threads left to this one while it delivered, then gives up the turn.
  func deliverHeldEvents(of item: AnyWork) {
    while true {
      let held = item.lock.withLock { item.takeHeldEventsLocked() }
      if held.isEmpty { return }
      for (kind, time) in held { deliver(kind, at: time, for: item) }
    }
  }

  /// Registers a queue observer.
  func observe(_ handler: @escaping @Sendable (WorkEvent) -> Void) -> WorkObservation {
    let id = withState { state in
      let id = state.observers.add(handler)
      isObserved.store(true, ordering: .relaxed)
      return id
    }
    // Weak: an observation kept by its caller must not keep the queue's engine (and with it the queue's streams)
    // alive; once the engine is gone there is nothing to remove.
    return WorkObservation { [weak self] in self?.removeObserver(id) }
  }

  /// A stream of the queue's events from now on; it ends when its consumer stops, or with the engine (see `deinit`).
  func eventStream() -> AsyncStream<WorkEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: WorkEvent.self)
    let id = withState { state in
      let id = state.observers.add({ event in continuation.yield(event) }, ending: { continuation.finish() })
      isObserved.store(true, ordering: .relaxed)
      return id
    }
    continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
    return stream
  }

  func removeObserver(_ id: Int) {
    // Released here, after the lock: the handler may hold the last reference to the queue, whose deinit takes the
    // lock (inside it, the thread waited for ever on the lock it held).
    let removed = withState { state in
      let removed = state.observers.remove(id)
      isObserved.store(!state.observers.isEmpty || state.itemObservers > 0, ordering: .relaxed)
      return removed
    }
    _ = consume removed
  }

  /// A stream of the queue's progress, starting with its progress now.
  func progressUpdates() -> AsyncStream<WorkProgress> {
    let (stream, continuation) = AsyncStream.makeStream(of: WorkProgress.self, bufferingPolicy: .bufferingNewest(1))
    let id = withState { state in
      let id = state.observers.addProgress(continuation)
      continuation.yield(state.progress)
      isObserved.store(true, ordering: .relaxed)
      return id
    }
    continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
    return stream
  }
}

extension AnyWork {
  func observerList() -> [@Sendable (WorkEvent) -> Void] {
    lock.withLock { extras?.observers ?? [] }
  }

  /// Takes the turn to deliver this item's events (`true`: the caller delivers `kind`, then
  /// `WorkEngine.deliverHeldEvents(of:)`), or leaves `kind` to the thread that has it (`false`), which delivers it after
  /// the events before it. Call with `lock` held, where the change the event reports is made, and only while the queue
  /// is observed.
  final func claimEventDeliveryLocked(_ kind: @autoclosure () -> WorkEvent.Kind) -> Bool {
    guard deliveringEvents else {
      deliveringEvents = true
      return true
    }
    if extras == nil { extras = WorkExtras(options: WorkOptions()) }
    extras.unsafelyUnwrapped.heldEvents.append((kind(), .now))
    return false
  }

  /// The events left to the thread that delivers this item's events; none gives up its turn. Call with `lock` held.
  final func takeHeldEventsLocked() -> [(WorkEvent.Kind, ContinuousClock.Instant)] {
    guard let extras, !extras.heldEvents.isEmpty else {
      deliveringEvents = false
      return []
    }
    var held: [(WorkEvent.Kind, ContinuousClock.Instant)] = []
    swap(&held, &extras.heldEvents)
    return held
  }

  /// Calls `handler` with this item's events from now on (``WorkEvent``): will start, started, retrying,
  /// cancel requested, finished.
  ///
  /// ```swift
  /// upload.observe { event in print(event) }   // 'upload' on 'net': started (attempt 1) …
  /// ```
  public func observe(_ handler: @escaping @Sendable (WorkEvent) -> Void) {
    let owner: WorkEngine? = lock.withLock {
      if extras == nil { extras = WorkExtras(options: WorkOptions()) }
      extras?.observers.append(handler)
      return engine?.takeUnretainedValue()
    }
    // The queue now looks up observers for each event (it stays so: items are cheap to ask).
    owner?.withState { state in
      state.itemObservers += 1
      owner?.isObserved.store(true, ordering: .relaxed)
    }
  }
}
