import Synchronization

/// Something that happened to a work item, for observers, logs and metrics.
///
/// ```swift
/// queue.observe { event in log("\(event)") }          // every item of the queue
/// album.observe { event in print(event.kind) }         // one item
/// for await event in queue.events { metrics.record(event) }
/// ```
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
    /// Running work was asked to stop (with the reason given to ``AnyWork/cancel(reason:)``, if any).
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

  mutating func remove(_ id: Int) {
    handlers[id] = nil
    progress[id] = nil
    streamEndings[id] = nil
    hasProgress = !progress.isEmpty
  }

  /// What ends every stream of the queue's events and progress, leaving no observers: for the queue's end.
  mutating func takeEndings() -> [@Sendable () -> Void] {
    var endings = Array(streamEndings.values)
    for continuation in progress.values { endings.append { continuation.finish() } }
    self = QueueObservers()
    return endings
  }
}

extension WorkEngine {
  /// Tells the queue's and the item's observers about `kind`; a relaxed load when nobody observes.
  @inline(__always)
  func emit(_ kind: @autoclosure () -> WorkEvent.Kind, for item: AnyWork) {
    guard isObserved.load(ordering: .relaxed) else { return }
    emitSlow(kind(), for: item)
  }

  private func emitSlow(_ kind: WorkEvent.Kind, for item: AnyWork) {
    let event = WorkEvent(kind: kind, work: item.name, queue: name, time: .now)
    let handlers = withState { Array($0.observers.handlers.values) }
    for handler in handlers { handler(event) }
    for handler in item.observerList() { handler(event) }
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
    withState { state in
      state.observers.remove(id)
      isObserved.store(!state.observers.isEmpty || state.itemObservers > 0, ordering: .relaxed)
    }
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
