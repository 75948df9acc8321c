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

    var out = "{\"traceEvents\":[\n"
    out.reserveCapacity(events.count * 360 + 4096)
    var first = true
    func line(_ body: (inout String) -> Void) {
      if !first { out += ",\n" }
      first = false
      body(&out)
    }
    line {
      $0 += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"Spindle WorkTrace\"}}"
    }
    for tid in threadNumbers.values.sorted() {
      let queues = threadQueues[tid] ?? []
      let label = queues.isEmpty ? "thread \(tid) (ended work)" : "thread \(tid) (\(queues.joined(separator: ", ")))"
      line {
        $0 += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":\(tid),\"args\":{\"name\":"
        $0 += jsonString(label) + "}}"
      }
      line {
        $0 += "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":\(tid),\"args\":{\"sort_index\":\(tid)}}"
      }
    }
    var quotedQueues: [String: String] = [:]
    for event in byStart {
      let tid = threadNumbers[event.thread]!
      let queue: String
      if let known = quotedQueues[event.queue] {
        queue = known
      } else {
        queue = jsonString(event.queue)
        quotedQueues[event.queue] = queue
      }
      line { out in
        out += "{\"name\":"
        appendJSONString(event.name, to: &out)
        out += ",\"cat\":"
        out += queue
        if event.ran {
          out += ",\"ph\":\"X\",\"ts\":"
          appendMicroseconds(event.start, to: &out)
          out += ",\"dur\":"
          appendMicroseconds(event.duration, to: &out)
        } else {
          out += ",\"ph\":\"i\",\"s\":\"t\",\"ts\":"
          appendMicroseconds(event.start, to: &out)
        }
        out += ",\"pid\":1,\"tid\":"
        out += String(tid)
        out += ",\"args\":{\"id\":"
        out += String(event.id)
        out += ",\"queue\":"
        out += queue
        out += ",\"outcome\":\""
        out += event.outcome.label
        out += "\",\"attempts\":"
        out += String(event.attempts)
        out += ",\"dependencies\":["
        for (index, dependency) in event.dependencies.enumerated() {
          if index > 0 { out += "," }
          out += String(dependency)
        }
        out += "],\"enqueued_us\":"
        appendMicroseconds(event.enqueued, to: &out)
        out += ",\"waited_us\":"
        appendMicroseconds(event.waited, to: &out)
        out += "}}"
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
        line { out in
          out += "{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":\(flow),\"ts\":"
          appendMicroseconds(from, to: &out)
          out += ",\"pid\":1,\"tid\":\(threadNumbers[dependency.thread]!)}"
        }
        line { out in
          out += "{\"name\":\"dependency\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":\(flow),\"ts\":"
          appendMicroseconds(to, to: &out)
          out += ",\"pid\":1,\"tid\":\(threadNumbers[event.thread]!)}"
        }
      }
    }
    for queue in WaitingProfile(events).queues {
      let name = jsonString("waiting · \(queue.name)")
      for step in queue.steps {
        line { out in
          out += "{\"name\":"
          out += name
          out += ",\"ph\":\"C\",\"ts\":"
          appendMicroseconds(step.time, to: &out)
          out += ",\"pid\":1,\"args\":{\"for dependencies\":"
          out += String(step.blocked)
          out += ",\"ready, for a slot\":"
          out += String(step.ready)
          out += "}}"
        }
      }
    }
    out += "\n],\"displayTimeUnit\":\"ms\"}\n"
    return out
  }
}
