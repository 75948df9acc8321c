import Synchronization

/// Records every work item of the queues that use it — when it was added, started and ended, on which thread,
/// how, and what it waited for — and draws it: Chrome trace JSON, a dependency graph, an SVG timeline.
///
/// Give a trace to one or more queues when you create them. Every item those queues add is recorded with its
/// name, queue, dependencies (edges to earlier items of the same trace), the time it was added, the thread and
/// time its body started, when it ended and how. Recording is off unless a queue has a trace.
///
/// ```swift
/// let trace = WorkTrace()
/// let queue = WorkQueue(name: "images", maxConcurrent: 4, trace: trace)
/// // ... add work, try await queue.allFinished() ...
/// try trace.write(toFile: "images.trace.json")        // Perfetto, chrome://tracing
/// try trace.writeTimeline(toFile: "images.svg")       // any browser
/// try trace.writeGraph(toFile: "images.dot")          // Graphviz (".mmd": Mermaid)
/// ```
///
/// Recording costs a few clock reads and short lock holds per item, spread over sixteen locks so that threads
/// rarely wait for each other; a queue without a trace pays one `nil` check per hook.
public final class WorkTrace: Sendable {
  private let origin = ContinuousClock.now
  /// Records live in shards chosen by the item's address, so that the thread adding work and the threads ending
  /// it rarely wait for the same lock.
  private let shards: [Locked<Shard>] = (0..<WorkTrace.shardCount).map { _ in Locked(Shard()) }
  private let nextID = Atomic<Int>(1)
  private let nextCompletion = Atomic<Int>(0)
  private static let shardCount = 16

  /// What the trace knows of one item.
  struct Record {
    var id: Int
    var name: String?
    var queue: String
    var enqueued: Duration
    var start: Duration?
    var end: Duration?
    var thread: UInt64 = 0
    var state: WorkState = .pending
    var attempts = 0
    var dependencies: [Int]
    /// The order in which the item completed, once it has.
    var completion = 0
  }

  private struct Shard {
    var records: [Record] = []
    /// The index in `records` of each item by identity. An entry stays valid while its item is alive (every
    /// hook runs while the engine holds the item, and a dependency is held by the caller that adds its dependent);
    /// an address reused by a later item is overwritten when that item is added.
    var indices: [ObjectIdentifier: Int] = [:]

    /// The index of `work`'s record, or of a new one when the trace never saw it added (or forgot it).
    mutating func index(of work: AnyWork, queue: String, now: Duration, trace: WorkTrace) -> Int {
      if let index = indices[ObjectIdentifier(work)], records[index].end == nil { return index }
      let id = trace.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
      records.append(Record(id: id, name: work.name, queue: queue, enqueued: now, dependencies: []))
      indices[ObjectIdentifier(work)] = records.count - 1
      return records.count - 1
    }
  }

  /// Creates an empty trace; its times are measured from this moment.
  public init() {}

  private func shard(_ work: AnyWork) -> Locked<Shard> {
    let address = UInt(bitPattern: ObjectIdentifier(work))
    return shards[Int((address >> 4 ^ address >> 9) % UInt(Self.shardCount))]
  }

  private func allRecords() -> [Record] {
    var all: [Record] = []
    for shard in shards { shard.withLock { all += $0.records } }
    return all
  }

  /// The completed items, in the order they completed.
  public var events: [WorkTraceEvent] {
    allRecords().filter { $0.end != nil }.sorted { $0.completion < $1.completion }.map { Self.event($0, now: .zero) }
  }

  /// Every item recorded so far, completed or not, in the order they were added.
  ///
  /// An unfinished item has its current ``WorkTraceEvent/outcome`` (pending, ready or running) and ends now: its
  /// `end` (and, if it has not started, its `start`) is the time of this call.
  public var items: [WorkTraceEvent] {
    let now = now()
    let records = allRecords().sorted { $0.id < $1.id }
    var states: [Int: WorkState] = [:]
    for record in records { states[record.id] = record.state }
    return records.map { record in
      var event = Self.event(record, now: now)
      if event.outcome == .pending, record.dependencies.allSatisfy({ states[$0] == .finished }) {
        event.outcome = .ready
      }
      return event
    }
  }

  /// Forgets everything recorded and numbers items from 1 again; items still running are recorded afresh when
  /// they end. Call it while the trace's queues are idle.
  public func removeAll() {
    for shard in shards { shard.withLock { $0 = Shard() } }
    nextID.store(1, ordering: .relaxed)
  }

  private static func event(_ record: Record, now: Duration) -> WorkTraceEvent {
    let end = record.end ?? now
    return WorkTraceEvent(
      id: record.id,
      name: record.name ?? "work",
      queue: record.queue,
      thread: record.thread,
      enqueued: record.enqueued,
      start: record.start ?? end,
      end: end,
      outcome: record.state,
      ran: record.start != nil,
      attempts: record.attempts,
      dependencies: record.dependencies
    )
  }

  // MARK: - Recording by hand

  /// Runs `body` on the calling thread and records it as one item named `name` on `queue`: its start and end,
  /// this thread, and how it ended (finished; failed when it throws; cancelled when it throws a
  /// `CancellationError`).
  ///
  /// For work that does not run on a traced `WorkQueue` — a `DispatchQueue` block, a `concurrentPerform`
  /// iteration, a thread of your own — so that it appears in the same timeline, Chrome trace and graph. Pass
  /// `enqueued`, the moment the work was handed over (before `async`, say), to show its wait for a thread; without
  /// it the item is recorded as added when it started. Recorded items have no dependencies.
  ///
  /// ```swift
  /// let trace = WorkTrace()
  /// let queue = DispatchQueue(label: "resize")
  /// let added = ContinuousClock.now
  /// queue.async {
  ///   trace.record(name: "resize 1", queue: "resize", enqueued: added) { resize(photo) }
  /// }
  /// ```
  ///
  /// - Returns: what `body` returned.
  /// - Throws: what `body` threw, after recording it.
  @discardableResult
  public func record<Result, Failure: Error>(
    name: String,
    queue: String,
    enqueued: ContinuousClock.Instant? = nil,
    _ body: () throws(Failure) -> Result
  ) throws(Failure) -> Result {
    let thread = currentThreadID()
    let start = now()
    let result: Swift.Result<Result, Failure>
    do throws(Failure) {
      result = .success(try body())
    } catch {
      result = .failure(error)
    }
    let end = now()
    let state: WorkState
    switch result {
    case .success: state = .finished
    case .failure(let error): state = error is CancellationError ? .cancelled : .failed
    }
    let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    let completion = nextCompletion.wrappingAdd(1, ordering: .relaxed).oldValue
    let added = enqueued.map { max(.zero, min($0 - origin, start)) } ?? start
    let record = Record(
      id: id, name: name, queue: queue, enqueued: added, start: start, end: end, thread: thread, state: state,
      attempts: 1, dependencies: [], completion: completion)
    shards[id % Self.shardCount].withLock { $0.records.append(record) }
    return try result.get()
  }

  // MARK: - Recording (called by the engine)

  /// The time since the trace began.
  ///
  /// Out of line: inlined into the engine's `AnyWork.run`, the look-up of `ContinuousClock.Instant`'s metadata (a
  /// resilient type) was hoisted to the top of `run` and made for every body, traced or not (about 10 instructions per
  /// item, under callgrind).
  @inline(never)
  func now() -> Duration { ContinuousClock.now - origin }

  /// Records that `work` was added, with its dependencies (those recorded by this trace become edges).
  func recordAdded(_ work: AnyWork, queue: String, dependencies: [AnyWork]) {
    let now = now()
    var edges: [Int] = []
    if !dependencies.isEmpty {
      edges.reserveCapacity(dependencies.count)
      for dependency in dependencies {  // dependencies on untraced queues have no id here
        let id: Int? = shard(dependency).withLock { shard in
          shard.indices[ObjectIdentifier(dependency)].map { shard.records[$0].id }
        }
        if let id { edges.append(id) }
      }
    }
    let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    let record = Record(id: id, name: work.name, queue: queue, enqueued: now, dependencies: edges)
    shard(work).withLock { shard in
      shard.records.append(record)
      shard.indices[ObjectIdentifier(work)] = shard.records.count - 1
    }
  }

  /// Records a synchronous body that started at `start` on `thread` and has just ended.
  func record(_ work: AnyWork, start: Duration, thread: UInt64, termination: Termination) {
    let end = now()
    let queue = work.queueName  // the work has not completed yet: its queue runs it
    let state = Phase(termination).state
    let completion = nextCompletion.wrappingAdd(1, ordering: .relaxed).oldValue
    shard(work).withLock { shard in
      let index = shard.index(of: work, queue: queue, now: start, trace: self)
      if shard.records[index].start == nil { shard.records[index].start = start }
      shard.records[index].thread = thread
      shard.records[index].attempts += 1
      shard.records[index].end = end
      shard.records[index].state = state
      shard.records[index].completion = completion
    }
  }

  /// Records the start of an `async` or callback body (each start counts as an attempt).
  func recordStart(_ work: AnyWork) {
    let start = now()
    let queue = work.queueName  // as in `record`
    let thread = currentThreadID()
    shard(work).withLock { shard in
      let index = shard.index(of: work, queue: queue, now: start, trace: self)
      if shard.records[index].start == nil { shard.records[index].start = start }
      shard.records[index].thread = thread
      shard.records[index].attempts += 1
      shard.records[index].state = .running
    }
  }

  /// Records the end of an `async` or callback body started with `recordStart`, or of work that never ran, on the
  /// queue named `queue` (the work may have completed: it no longer knows its queue).
  func recordEnd(_ work: AnyWork, queue: String, termination: Termination) {
    let end = now()
    let state = Phase(termination).state
    let completion = nextCompletion.wrappingAdd(1, ordering: .relaxed).oldValue
    let thread = currentThreadID()
    shard(work).withLock { shard in
      let index = shard.index(of: work, queue: queue, now: end, trace: self)
      if shard.records[index].start == nil { shard.records[index].thread = thread }
      shard.records[index].end = end
      shard.records[index].state = state
      shard.records[index].completion = completion
    }
  }

  // MARK: - Files

  /// Writes ``chromeTraceJSON()`` to the file at `path`, replacing it atomically.
  ///
  /// - Throws: ``WorkTraceError`` naming the path and the system's reason when the file cannot be written.
  public func write(toFile path: String) throws(WorkTraceError) {
    try writeTextAtomically(chromeTraceJSON(), to: path)
  }
}

/// One work item as a ``WorkTrace`` saw it.
///
/// Times are measured from the creation of the trace. ``waited`` is the time from being added to starting
/// (waiting for dependencies, then for a free slot), ``duration`` the time the body ran.
public struct WorkTraceEvent: Sendable, Hashable {
  /// The item's number in its trace: 1, 2, … in the order items were added.
  public var id: Int
  /// The work item's name (`"work"` when it has none).
  public var name: String
  /// The name of the queue that ran (or ended) it.
  public var queue: String
  /// An identifier of the thread the body started on (for work that never ran: the thread that ended it).
  public var thread: UInt64
  /// When the item was added to its queue.
  public var enqueued: Duration
  /// When the body started (for work that never ran: when it ended).
  public var start: Duration
  /// When the work completed (for unfinished work: when the snapshot was taken).
  public var end: Duration
  /// How it ended — ``WorkState/finished``, ``WorkState/failed`` or ``WorkState/cancelled`` — or, for unfinished
  /// work, where it stands.
  public var outcome: WorkState
  /// Whether the body started (`false`: cancelled or ended by a dependency before it started, or still waiting).
  public var ran: Bool
  /// How many times the body started (0 for work that never ran).
  public var attempts: Int
  /// The ids of the dependencies recorded by the same trace.
  public var dependencies: [Int]

  /// Creates an event, for example to draw a timeline of work recorded elsewhere.
  ///
  /// ```swift
  /// let event = WorkTraceEvent(
  ///   id: 1, name: "decode", queue: "codec", thread: 1,
  ///   enqueued: .zero, start: .milliseconds(2), end: .milliseconds(9), outcome: .finished)
  /// ```
  public init(
    id: Int,
    name: String,
    queue: String,
    thread: UInt64,
    enqueued: Duration,
    start: Duration,
    end: Duration,
    outcome: WorkState,
    ran: Bool = true,
    attempts: Int? = nil,
    dependencies: [Int] = []
  ) {
    self.id = id
    self.name = name
    self.queue = queue
    self.thread = thread
    self.enqueued = enqueued
    self.start = start
    self.end = end
    self.outcome = outcome
    self.ran = ran
    self.attempts = attempts ?? (ran ? 1 : 0)
    self.dependencies = dependencies
  }

  /// The time from being added to starting (to ending, for work that never ran).
  public var waited: Duration { start - enqueued }

  /// The time the body ran (zero for work that never ran).
  public var duration: Duration { ran ? end - start : .zero }

  /// Whether the item has completed (finished, failed or cancelled).
  public var isComplete: Bool {
    switch outcome {
    case .finished, .failed, .cancelled: true
    case .pending, .ready, .running: false
    }
  }
}

/// A trace, timeline or graph file could not be written.
public struct WorkTraceError: Error, CustomStringConvertible {
  /// The path that could not be written.
  public var path: String
  /// The `errno` value the system reported.
  public var code: Int32

  /// A one-line message naming the path and the system's reason.
  public var description: String {
    "cannot write '\(path)': \(Platform.errorDescription(code))"
  }
}

/// An identifier of the calling thread.
func currentThreadID() -> UInt64 {
  Platform.currentThreadID
}
