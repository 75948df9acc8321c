extension WorkTrace {
  /// The items as Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and `chrome://tracing` open.
  ///
  /// - Each body that ran is a complete event (`"ph": "X"`) on the track of its thread; its `args` hold the item's
  ///   id, queue, outcome, attempts, dependency ids and the time it waited (`waited_us`, added → started).
  /// - Work that never ran is an instant event (`"ph": "i"`).
  /// - Each dependency between two bodies that ran is a flow arrow (`"ph": "s"` → `"ph": "f"`).
  /// - Each queue has a counter track (`"ph": "C"`) of its waiting items: for dependencies, and ready for a slot.
  /// - Threads are numbered 1, 2, … in the order they first ran a body, and named after the queues they served.
  ///
  /// Times are in microseconds from the creation of the trace.
  ///
  /// ```swift
  /// let json = trace.chromeTraceJSON()   // or: try trace.write(toFile: "run.json")
  /// ```
  public func chromeTraceJSON() -> String {
    Self.chromeTraceJSON(items)
  }

  static func chromeTraceJSON(_ events: [WorkTraceEvent]) -> String {
    let byStart = events.sorted { ($0.ran ? 0 : 1, $0.start, $0.id) < ($1.ran ? 0 : 1, $1.start, $1.id) }
    var threadNumbers: [UInt64: Int] = [:]
    var threadQueues: [Int: [String]] = [:]
    for event in byStart where threadNumbers[event.thread] == nil {
      threadNumbers[event.thread] = threadNumbers.count + 1
    }
    for event in byStart where event.ran {
      let tid = threadNumbers[event.thread]!
      if threadQueues[tid, default: []].contains(event.queue) == false {
        threadQueues[tid, default: []].append(event.queue)
      }
    }
    var byID: [Int: WorkTraceEvent] = [:]
    for event in events { byID[event.id] = event }

    var lines: [String] = [
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"Spindle WorkTrace\"}}"
    ]
    for (thread, tid) in threadNumbers.sorted(by: { $0.value < $1.value }) {
      _ = thread
      let queues = threadQueues[tid] ?? []
      let label = queues.isEmpty ? "thread \(tid) (ended work)" : "thread \(tid) (\(queues.joined(separator: ", ")))"
      lines.append(
        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":\(tid),\"args\":{\"name\":\(jsonString(label))}}")
      lines.append(
        "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":\(tid),\"args\":{\"sort_index\":\(tid)}}")
    }
    for event in byStart {
      let tid = threadNumbers[event.thread]!
      let queue = jsonString(event.queue)
      let dependencies = event.dependencies.map(String.init).joined(separator: ",")
      let args =
        "\"args\":{\"id\":\(event.id),\"queue\":\(queue),\"outcome\":\(jsonString("\(event.outcome.label)")),"
        + "\"attempts\":\(event.attempts),\"dependencies\":[\(dependencies)],"
        + "\"enqueued_us\":\(microsecondsText(event.enqueued)),\"waited_us\":\(microsecondsText(event.waited))}"
      let head = "{\"name\":\(jsonString(event.name)),\"cat\":\(queue),"
      if event.ran {
        lines.append(
          head + "\"ph\":\"X\",\"ts\":\(microsecondsText(event.start)),\"dur\":\(microsecondsText(event.duration)),"
            + "\"pid\":1,\"tid\":\(tid),\(args)}")
      } else {
        lines.append(
          head + "\"ph\":\"i\",\"s\":\"t\",\"ts\":\(microsecondsText(event.start)),\"pid\":1,\"tid\":\(tid),\(args)}")
      }
    }
    // Flow arrows, bound to the middle of each slice so both viewers attach them to the right one.
    var flow = 0
    for event in byStart where event.ran {
      for id in event.dependencies {
        guard let dependency = byID[id], dependency.ran else { continue }
        flow += 1
        let from = dependency.start + (dependency.end - dependency.start) / 2
        let to = event.start + (event.end - event.start) / 2
        lines.append(
          "{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":\(flow),\"ts\":\(microsecondsText(from)),"
            + "\"pid\":1,\"tid\":\(threadNumbers[dependency.thread]!)}")
        lines.append(
          "{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":\(flow),"
            + "\"ts\":\(microsecondsText(to)),\"pid\":1,\"tid\":\(threadNumbers[event.thread]!)}")
      }
    }
    for queue in WaitingProfile(events).queues {
      let name = jsonString("waiting · \(queue.name)")
      for step in queue.steps {
        lines.append(
          "{\"name\":\(name),\"ph\":\"C\",\"ts\":\(microsecondsText(step.time)),\"pid\":1,"
            + "\"args\":{\"for dependencies\":\(step.blocked),\"ready, for a slot\":\(step.ready)}}")
      }
    }
    return "{\"traceEvents\":[\n" + lines.joined(separator: ",\n") + "\n],\"displayTimeUnit\":\"ms\"}\n"
  }
}
