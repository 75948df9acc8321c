import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Review 27: several threads adding to and operating on the same queues at once (barriers, chains, exclusive work,
/// groups, callbacks, `async` bodies) while others cancel, suspend, resize or reprioritize. Every test is bounded: a
/// queue that does not drain is reported (with what its stuck items wait for) and cancelled.
@Suite("Work: review 27", .offThePool)
struct ReviewSession27Tests {
  /// Records the starts and ends of bodies in one order (under one lock), and what overlapped that must not: a
  /// barrier's body beside any other body of its queue, two bodies holding the same exclusivity key, a body run twice.
  final class Monitor: Sendable {
    struct State {
      var sequence = 0
      var starts: [Int: Int] = [:]
      var ends: [Int: Int] = [:]
      var runs: [Int: Int] = [:]
      var running: Set<Int> = []
      var barriersRunning: Set<Int> = []
      var keyHolders: Set<Int> = []
      var peak = 0
      var problems: [String] = []
    }

    let state = Locked(State())

    /// The body of item `id`: records its start, spins `spin` yields, records its end.
    func run(_ id: Int, barrier: Bool = false, exclusive: Bool = false, spin: Int = 0) {
      state.withLock { state in
        state.sequence += 1
        state.starts[id] = state.sequence
        state.runs[id, default: 0] += 1
        if state.runs[id]! > 1 { state.problems.append("#\(id) ran \(state.runs[id]!) times") }
        if barrier && !state.running.isEmpty {
          state.problems.append("barrier #\(id) started while \(state.running.sorted().prefix(4)) ran")
        }
        if !barrier && !state.barriersRunning.isEmpty {
          state.problems.append("#\(id) started while barrier \(state.barriersRunning.sorted()) ran")
        }
        if exclusive {
          if !state.keyHolders.isEmpty {
            state.problems.append("#\(id) started holding the key while \(state.keyHolders.sorted()) held it")
          }
          state.keyHolders.insert(id)
        }
        state.running.insert(id)
        if barrier { state.barriersRunning.insert(id) }
        state.peak = max(state.peak, state.running.count)
      }
      for _ in 0..<spin { sched_yield() }
      state.withLock { state in
        state.sequence += 1
        state.ends[id] = state.sequence
        state.running.remove(id)
        state.barriersRunning.remove(id)
        state.keyHolders.remove(id)
      }
    }
  }

  /// One item added by one thread, in that thread's order.
  struct Entry {
    let id: Int
    let work: AnyWork
    /// Whether its body is run through the monitor under this id (a group's handle is not).
    let monitored: Bool
    let isBarrier: Bool
  }

  /// Polls until `queues` have nothing unfinished, for at most `seconds`; on a timeout, returns what the first stuck
  /// items wait for (and cancels everything, resuming the queues, so that the round ends).
  static func drain(_ queues: [WorkQueue], entries: [Entry], seconds: Double) -> [String] {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while queues.contains(where: { $0.unfinishedCount != 0 }) && ContinuousClock.now < deadline { usleep(1_000) }
    var problems: [String] = []
    for queue in queues where queue.unfinishedCount != 0 {
      let number = Dictionary(
        entries.map { (ObjectIdentifier($0.work), $0.id) }, uniquingKeysWith: { first, _ in first })
      let label = { (work: AnyWork) in "#\(number[ObjectIdentifier(work)] ?? -1) \(work.state)" }
      let stuck = queue.engine.withState { state in
        let barriers = state.barriers.prefix(4).map { "\(label($0.barrier)) followed by \($0.followers.map(label))" }
        let waiting = state.unfinishedItems().prefix(6).map { work in
          let dependencies = work.lock.withLock { work.dependencyList.array(valueSource: nil) }
          return "\(label(work)) waits for \(work.remaining.load(ordering: .relaxed)): \(dependencies.map(label))"
        }
        return "suspended \(state.scheduler.isSuspended), width \(state.scheduler.width), "
          + "pending barriers \(barriers); \(waiting)"
      }
      problems.append("'\(queue.name)': \(queue.unfinishedCount) items never ended: \(stuck)")
    }
    if !problems.isEmpty {
      for queue in queues {
        queue.resume()
        queue.cancelAll()
      }
    }
    return problems
  }

  /// Checks, once the queues drained: every item ended (finished, or cancelled/failed without its body finishing),
  /// each monitored body ran once if its item finished and never if it did not, and no item added by a thread after
  /// one of its barriers started before that barrier ended (nor one added before it ended after it started).
  static func check(_ threads: [[Entry]], monitor: Monitor, width: Int) -> [String] {
    var problems: [String] = []
    let state = monitor.state.withLock { $0 }
    problems += state.problems.prefix(4)
    if state.peak > width { problems.append("\(state.peak) bodies ran at once, width at most \(width)") }
    for entries in threads {
      for entry in entries {
        let workState = entry.work.state
        if !workState.isFinal { problems.append("#\(entry.id) is \(workState) after the queue drained") }
        guard entry.monitored else { continue }
        let runs = state.runs[entry.id, default: 0]
        if workState == .finished && runs != 1 { problems.append("#\(entry.id) finished with \(runs) runs") }
        if workState != .finished && runs > 0 && entry.isBarrier == false && workState != .cancelled {
          problems.append("#\(entry.id) is \(workState) after its body ran")
        }
      }
      for (index, barrier) in entries.enumerated() where barrier.isBarrier {
        guard let barrierStart = state.starts[barrier.id], let barrierEnd = state.ends[barrier.id] else { continue }
        for before in entries[..<index] where before.monitored {
          if let end = state.ends[before.id], end > barrierStart {
            problems.append("#\(before.id), added before barrier #\(barrier.id), ended after it started")
          }
        }
        for after in entries[(index + 1)...] where after.monitored {
          if let start = state.starts[after.id], start < barrierEnd {
            problems.append("#\(after.id), added after barrier #\(barrier.id), started before it ended")
          }
        }
      }
    }
    return problems
  }

  /// Adds one item of `kind` to `queue` for thread `adder`: 0 plain, 1 after the thread's previous item, 2 barrier,
  /// 3 exclusive (one key for every thread), 4 callback, 5 a group of two members, 6 `async`.
  static func addItem(
    kind: Int, id: Int, to queue: WorkQueue, previous: AnyWork?, monitor: Monitor, key: String
  ) -> [Entry] {
    switch kind {
    case 1:
      if let previous {
        let work = queue.add(dependencies: [previous]) { monitor.run(id) }
        return [Entry(id: id, work: work, monitored: true, isBarrier: false)]
      }
      return [Entry(id: id, work: queue.add { monitor.run(id) }, monitored: true, isBarrier: false)]
    case 2:
      let work = queue.addBarrier { monitor.run(id, barrier: true, spin: 20) }
      return [Entry(id: id, work: work, monitored: true, isBarrier: true)]
    case 3:
      let work = queue.add(exclusive: key) { monitor.run(id, exclusive: true, spin: 10) }
      return [Entry(id: id, work: work, monitored: true, isBarrier: false)]
    case 4:
      let work = queue.addCallback { (finish: WorkFinish<Void>) in
        monitor.run(id)
        finish(())
      }
      return [Entry(id: id, work: work, monitored: true, isBarrier: false)]
    case 5:
      var members: [Entry] = []
      let handle = queue.group { group in
        let first = group.add { monitor.run(id + 1) }
        let second = group.add(dependencies: [first]) { monitor.run(id + 2) }
        members = [
          Entry(id: id + 1, work: first, monitored: true, isBarrier: false),
          Entry(id: id + 2, work: second, monitored: true, isBarrier: false),
        ]
        return second
      }
      return members + [Entry(id: id, work: handle, monitored: false, isBarrier: false)]
    case 6:
      let work = queue.add { () async in monitor.run(id) }
      return [Entry(id: id, work: work, monitored: true, isBarrier: false)]
    default:
      return [Entry(id: id, work: queue.add { monitor.run(id) }, monitored: true, isBarrier: false)]
    }
  }

  /// One round: `adders` threads each add `count` items of `kinds` (see ``addItem``) to a queue `width` wide, while
  /// another thread does `control` over and over (0 nothing, 1 `cancelAll`, 2 suspend and resume, 3 width between 1
  /// and `width`, 4 raises and lowers the priority of items already added, 5 cancels single items); returns what
  /// went wrong.
  static func round(
    width: Int, kinds: [Int], control: Int, adders: Int = 2, count: Int = 150, seed: UInt64
  ) -> [String] {
    let queue = WorkQueue(name: "review27.race", maxConcurrent: width)
    let monitor = Monitor()
    let stop = Atomic<Bool>(false)
    let added = Locked<[AnyWork]>([])
    let controlling = DispatchGroup()
    DispatchQueue.global().async(group: controlling) {
      var random = Reliability.Random(seed: seed ^ 0x5EED)
      while !stop.load(ordering: .relaxed) {
        switch control {
        case 1: queue.cancelAll()
        case 2:
          queue.suspend()
          for _ in 0..<Int(random.next() % 50) { sched_yield() }
          queue.resume()
        case 3: queue.maxConcurrent = 1 + Int(random.next() % UInt64(width))
        case 4:
          let items = added.withLock { $0.suffix(8) }
          for item in items { item.priority = WorkPriority.allCases[Int(random.next() % 5)] }
        case 5:
          let items = added.withLock { $0.suffix(4) }
          if let item = items.randomElement(using: &random) { item.cancel() }
        default: break
        }
        for _ in 0..<Int(random.next() % 200) { sched_yield() }
      }
      queue.resume()
      queue.maxConcurrent = width
    }
    let threads = Locked<[[Entry]]>(Array(repeating: [], count: adders))
    DispatchQueue.concurrentPerform(iterations: adders) { adder in
      var random = Reliability.Random(seed: seed &+ UInt64(adder))
      var entries: [Entry] = []
      var previous: AnyWork? = nil
      for index in 0..<count {
        let kind = kinds[Int(random.next() % UInt64(kinds.count))]
        let id = (adder + 1) * 100_000 + index * 10
        let new = addItem(kind: kind, id: id, to: queue, previous: previous, monitor: monitor, key: "review27.key")
        entries += new
        previous = new.first?.work
        if control == 4 || control == 5 { added.withLock { $0 += new.map(\.work) } }
      }
      threads.withLock { $0[adder] = entries }
    }
    stop.store(true, ordering: .relaxed)
    controlling.wait()
    let all = threads.withLock { $0 }
    let stuck = drain([queue], entries: all.flatMap { $0 }, seconds: Reliability.seconds(20, full: 60))
    if !stuck.isEmpty { return stuck }
    return check(all, monitor: monitor, width: width)
  }

  /// Runs `rounds` rounds of ``round`` with random widths and the given kinds and control; stops at the first failure.
  static func rounds(_ rounds: Int, kinds: [Int], control: Int, widths: [Int] = [1, 2, 3]) -> (UInt64, [String]) {
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    var problems: [String] = []
    for index in 0..<rounds where problems.isEmpty {
      let width = widths[Int(random.next() % UInt64(widths.count))]
      problems += round(width: width, kinds: kinds, control: control, seed: random.next())
        .map { "round \(index), width \(width): \($0)" }
    }
    return (seed, problems)
  }

  // MARK: - Barriers against work added by another thread

  #if DEBUG
    @Test("an item whose add straddles another thread's addBarrier never runs beside the barrier")
    func itemStraddlingABarrierNeverRunsBesideIt() {
      // The adder reads that no barrier is pending, then (preempted, here held by the admission hook, which runs
      // before the item is on `incoming`) another thread adds a barrier, whose snapshot of what it waits for cannot
      // see the item; the item is then published ready and follows nothing. Either order would do (the item before
      // the barrier, or after it), but not both running at once.
      let queue = WorkQueue(name: "review27.straddle", maxConcurrent: 2)
      let monitor = Monitor()
      let armed = Atomic<Bool>(false)
      let go = DispatchSemaphore(value: 0)
      let barrierAdded = DispatchSemaphore(value: 0)
      let barrier = Locked<AnyWork?>(nil)
      DispatchQueue.global().async {
        guard go.wait(timeout: .now() + 60) == .success else { return }
        barrier.withLock { $0 = queue.addBarrier { monitor.run(1, barrier: true, spin: 2_000) } }
        barrierAdded.signal()
      }
      queue.engine.admissionHook.withLock { hook in
        hook = {
          guard armed.exchange(false, ordering: .relaxed) else { return }
          go.signal()
          _ = barrierAdded.wait(timeout: .now() + 60)
        }
      }
      defer { queue.engine.admissionHook.withLock { $0 = nil } }
      armed.store(true, ordering: .relaxed)
      let item = queue.add { monitor.run(2) }
      let entries = [Entry(id: 2, work: item, monitored: true, isBarrier: false)]
      // The barrier's body yields 2,000 times: on a loaded host that alone took longer than 5 s.
      let stuck = Self.drain([queue], entries: entries, seconds: Reliability.seconds(20, full: 60))
      let problems = stuck + monitor.state.withLock { $0.problems }
      #expect(barrier.withLock { $0 } != nil, "the barrier was never added")
      #expect(problems.isEmpty, "\(problems)")
    }
  #endif

  @Test(
    "barriers, chains, exclusive work and callbacks added by two threads: barriers run alone, in each thread's order")
  func barriersAmongMixedAdds() {
    let (seed, problems) = Self.rounds(Reliability.size(30, full: 300), kinds: [0, 0, 1, 2, 3, 4], control: 0)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  @Test("barriers only, added by two threads while a third resizes the queue")
  func barriersWhileResizing() {
    let (seed, problems) = Self.rounds(Reliability.size(30, full: 300), kinds: [0, 2, 2], control: 3)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  @Test("mixed adds with groups and async bodies while a third thread suspends and resumes")
  func mixedAddsWhileSuspending() {
    let (seed, problems) = Self.rounds(Reliability.size(20, full: 200), kinds: [0, 1, 2, 3, 4, 5, 6], control: 2)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  @Test("mixed adds while a third thread cancels everything over and over")
  func mixedAddsWhileCancellingAll() {
    let (seed, problems) = Self.rounds(Reliability.size(20, full: 200), kinds: [0, 1, 2, 3, 4, 5, 6], control: 1)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  @Test("mixed adds while a third thread changes the priority of items already added")
  func mixedAddsWhileReprioritizing() {
    let (seed, problems) = Self.rounds(Reliability.size(20, full: 200), kinds: [0, 1, 2, 3, 4], control: 4)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  @Test("mixed adds while a third thread cancels single items just added")
  func mixedAddsWhileCancellingItems() {
    let (seed, problems) = Self.rounds(Reliability.size(20, full: 200), kinds: [0, 1, 2, 3, 4, 5], control: 5)
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }

  // MARK: - Two queues

  @Test("two threads add barriers and cross-queue dependencies to two queues: both drain, barriers run alone")
  func barriersAcrossTwoQueues() {
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    var problems: [String] = []
    for index in 0..<Reliability.size(30, full: 300) where problems.isEmpty {
      let width = 1 + Int(random.next() % 2)
      let queues = [
        WorkQueue(name: "review27.left", maxConcurrent: width), WorkQueue(name: "review27.right", maxConcurrent: 2),
      ]
      let monitors = [Monitor(), Monitor()]
      let roundSeed = random.next()
      let threads = Locked<[[[Entry]]]>(Array(repeating: [[], []], count: 2))
      let recent = Locked<[AnyWork]>([])
      DispatchQueue.concurrentPerform(iterations: 2) { adder in
        var random = Reliability.Random(seed: roundSeed &+ UInt64(adder))
        var entries: [[Entry]] = [[], []]
        for item in 0..<120 {
          let side = Int(random.next() % 2)
          let id = (adder + 1) * 100_000 + item * 10
          let queue = queues[side]
          let monitor = monitors[side]
          let entry: Entry
          switch random.next() % 4 {
          case 0:
            entry = Entry(
              id: id, work: queue.addBarrier { monitor.run(id, barrier: true, spin: 10) }, monitored: true,
              isBarrier: true)
          case 1:
            // After recent work of either queue, added by either thread.
            let dependencies = recent.withLock { Array($0.suffix(3)) }
            entry = Entry(
              id: id, work: queue.add(dependencies: dependencies) { monitor.run(id) }, monitored: true,
              isBarrier: false)
          default:
            entry = Entry(id: id, work: queue.add { monitor.run(id) }, monitored: true, isBarrier: false)
          }
          entries[side].append(entry)
          recent.withLock { $0.append(entry.work) }
        }
        threads.withLock { $0[adder] = entries }
      }
      let all = threads.withLock { $0 }
      let flat = all.flatMap { $0.flatMap { $0 } }
      problems += Self.drain(queues, entries: flat, seconds: Reliability.seconds(20, full: 60))
        .map { "round \(index): \($0)" }
      if problems.isEmpty {
        for side in 0..<2 {
          problems += Self.check(all.map { $0[side] }, monitor: monitors[side], width: side == 0 ? width : 2)
            .map { "round \(index), \(queues[side].name): \($0)" }
        }
      }
    }
    #expect(problems.isEmpty, "seed \(seed): \(problems.prefix(6))")
  }
}
