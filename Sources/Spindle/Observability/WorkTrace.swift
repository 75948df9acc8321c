/// Records one event per work item of the queues that use it, and writes them as Chrome trace-event JSON.
///
/// Give a trace to one or more queues when you create them; every item those queues complete adds an event
/// with its name, queue, thread, start, end and outcome. Work that ends without running (cancelled, or
/// ended by a failed dependency) adds an instant event. Open the JSON in Perfetto (ui.perfetto.dev) or
/// `chrome://tracing`.
///
/// ```swift
/// let trace = WorkTrace()
/// let queue = WorkQueue(name: "images", maxConcurrent: 4, trace: trace)
/// // ... add work, try await queue.allFinished() ...
/// try trace.write(toFile: "images.trace.json")
/// ```
///
/// Recording costs a clock read and a short lock per item; a queue without a trace pays nothing.
public final class WorkTrace: Sendable {
  private let origin = ContinuousClock.now
  private let storage = Locked(Storage())

  private struct Storage {
    var events: [WorkTraceEvent] = []
    /// Start of `async` and callback bodies that have not completed yet.
    var running: [ObjectIdentifier: (start: Duration, thread: UInt64)] = [:]
  }

  /// Creates an empty trace; times of its events are measured from this moment.
  public init() {}

  /// The events recorded so far, in the order the work completed.
  public var events: [WorkTraceEvent] {
    storage.withLock { $0.events }
  }

  /// Removes every recorded event.
  public func removeAll() {
    storage.withLock { $0.events.removeAll() }
  }

  // MARK: - Recording (called by the engine)

  func now() -> Duration { ContinuousClock.now - origin }

  func record(_ work: AnyWork, start: Duration, thread: UInt64, termination: Termination) {
    let event = WorkTraceEvent(
      name: work.name ?? "work",
      queue: work.queueName,
      thread: thread,
      start: start,
      end: now(),
      outcome: Phase(termination).state,
      ran: true
    )
    storage.withLock { $0.events.append(event) }
  }

  func recordStart(_ work: AnyWork) {
    let start = (now(), currentThreadID())
    storage.withLock { $0.running[ObjectIdentifier(work)] = start }
  }

  /// Records the end of an `async` or callback body started with `recordStart`, or work that never ran.
  func recordEnd(_ work: AnyWork, termination: Termination) {
    let end = now()
    storage.withLock { storage in
      let started = storage.running.removeValue(forKey: ObjectIdentifier(work))
      storage.events.append(
        WorkTraceEvent(
          name: work.name ?? "work",
          queue: work.queueName,
          thread: started?.thread ?? currentThreadID(),
          start: started?.start ?? end,
          end: end,
          outcome: Phase(termination).state,
          ran: started != nil
        )
      )
    }
  }

  // MARK: - Export

  /// The events as Chrome trace-event JSON (an object with a `traceEvents` array; times in microseconds).
  ///
  /// Work that ran is a complete event (`"ph": "X"`); work that never ran is an instant event (`"ph": "i"`).
  /// Threads are numbered 1, 2, … in order of first appearance and named after the queues that used them.
  public func chromeTraceJSON() -> String {
    let events = self.events
    var threadNumbers: [UInt64: Int] = [:]
    var threadQueues: [Int: String] = [:]
    var lines: [String] = []
    for event in events {
      let tid: Int
      if let known = threadNumbers[event.thread] {
        tid = known
      } else {
        tid = threadNumbers.count + 1
        threadNumbers[event.thread] = tid
        threadQueues[tid] = event.queue
      }
      let name = jsonString(event.name)
      let queue = jsonString(event.queue)
      let outcome = jsonString("\(event.outcome)")
      let ts = microseconds(event.start)
      if event.ran {
        let dur = microseconds(event.end - event.start)
        lines.append(
          "{\"name\":\(name),\"cat\":\(queue),\"ph\":\"X\",\"ts\":\(ts),\"dur\":\(dur),\"pid\":1,\"tid\":\(tid),"
            + "\"args\":{\"queue\":\(queue),\"outcome\":\(outcome)}}"
        )
      } else {
        lines.append(
          "{\"name\":\(name),\"cat\":\(queue),\"ph\":\"i\",\"s\":\"t\",\"ts\":\(ts),\"pid\":1,\"tid\":\(tid),"
            + "\"args\":{\"queue\":\(queue),\"outcome\":\(outcome)}}"
        )
      }
    }
    for (tid, queue) in threadQueues.sorted(by: { $0.key < $1.key }) {
      lines.append(
        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":\(tid),"
          + "\"args\":{\"name\":\(jsonString("thread \(tid) (\(queue))"))}}"
      )
    }
    return "{\"traceEvents\":[\n" + lines.joined(separator: ",\n") + "\n],\"displayTimeUnit\":\"ms\"}\n"
  }

  /// Writes ``chromeTraceJSON()`` to the file at `path`, replacing it.
  ///
  /// - Throws: ``WorkTraceError`` naming the path and the system's reason when the file cannot be written.
  public func write(toFile path: String) throws(WorkTraceError) {
    if let code = Platform.replaceFile(atPath: path, with: chromeTraceJSON().utf8) {
      throw WorkTraceError(path: path, code: code)
    }
  }
}

/// One work item as a ``WorkTrace`` saw it.
public struct WorkTraceEvent: Sendable, Hashable {
  /// The work item's name (`"work"` when it has none).
  public var name: String
  /// The name of the queue that ran (or ended) it.
  public var queue: String
  /// An identifier of the thread the body started on.
  public var thread: UInt64
  /// When the body started, from the creation of the trace (for work that never ran: when it ended).
  public var start: Duration
  /// When the work completed, from the creation of the trace.
  public var end: Duration
  /// How it ended: ``WorkState/finished``, ``WorkState/failed`` or ``WorkState/cancelled``.
  public var outcome: WorkState
  /// Whether the body ran (`false`: cancelled or ended by a dependency before it started).
  public var ran: Bool
}

/// A trace file could not be written.
public struct WorkTraceError: Error, CustomStringConvertible {
  /// The path that could not be written.
  public var path: String
  /// The `errno` value the system reported.
  public var code: Int32

  /// A one-line message naming the path and the system's reason.
  public var description: String {
    "cannot write trace to '\(path)': \(Platform.errorDescription(code))"
  }
}

/// The duration in microseconds with three decimals ("12.345"), without Foundation's formatting.
private func microseconds(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  let sign = nanoseconds < 0 ? "-" : ""
  let magnitude = nanoseconds.magnitude
  let fraction = String(magnitude % 1000)
  return sign + String(magnitude / 1000) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

private func jsonString(_ text: String) -> String {
  var result = "\""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": result += "\\\""
    case "\\": result += "\\\\"
    case "\n": result += "\\n"
    case "\r": result += "\\r"
    case "\t": result += "\\t"
    case _ where scalar.value < 0x20:
      let hex = String(scalar.value, radix: 16)
      result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result + "\""
}

/// An identifier of the calling thread.
func currentThreadID() -> UInt64 {
  Platform.currentThreadID
}
