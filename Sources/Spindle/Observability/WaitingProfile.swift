/// How many items of each queue were waiting over time: for their dependencies, or ready and waiting for a slot.
///
/// An item waits from the moment it is added until its body starts (or, if it never runs, until it ends). It
/// waits for its dependencies until the last of them ended, then for a slot of its queue.
struct WaitingProfile {
  /// The counts of one queue from `time` until the next step.
  struct Step {
    var time: Duration
    var blocked: Int
    var ready: Int
  }

  /// Queue names in the order their first item was added, with each queue's steps in time order.
  var queues: [(name: String, steps: [Step])]

  init(_ events: [WorkTraceEvent]) {
    var ends: [Int: Duration] = [:]
    for event in events where event.isComplete { ends[event.id] = event.end }
    var changes: [String: [(time: Duration, blocked: Int, ready: Int)]] = [:]
    var order: [String] = []
    for event in events {
      if changes[event.queue] == nil {
        changes[event.queue] = []
        order.append(event.queue)
      }
      let leave = event.start
      var readyAt = event.enqueued
      for dependency in event.dependencies {
        readyAt = max(readyAt, ends[dependency] ?? leave)
      }
      readyAt = min(readyAt, leave)
      changes[event.queue]!.append((event.enqueued, 1, 0))
      changes[event.queue]!.append((readyAt, -1, 1))
      changes[event.queue]!.append((leave, 0, -1))
    }
    queues = order.map { name in
      let sorted = changes[name]!.sorted { $0.time < $1.time }
      var steps: [Step] = []
      var blocked = 0
      var ready = 0
      for change in sorted {
        blocked += change.blocked
        ready += change.ready
        if let last = steps.last, last.time == change.time {
          steps[steps.count - 1].blocked = blocked
          steps[steps.count - 1].ready = ready
        } else {
          steps.append(Step(time: change.time, blocked: blocked, ready: ready))
        }
      }
      return (name, steps)
    }
  }
}
