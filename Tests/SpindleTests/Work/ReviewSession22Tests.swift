import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// A review of `Work.wait()`'s blocked-wait count (`BlockedWait`), the group timeout that looks at the final item, and
/// the one-at-a-time delivery of an item's events: the count never leaks or goes negative and keeps no engine alive,
/// waits that can end are allowed and those that cannot still throw; event handlers that re-enter the item (cancel
/// it, observe it, add work) neither deadlock nor lose or reorder events, and no item is left "delivering".
@Suite("Work: review 22", .serialized, .offThePool)
struct ReviewSession22Tests {
  static let rounds = ProcessInfo.processInfo.environment["SPINDLE_ADVERSARIAL_ROUNDS"].flatMap(Int.init)
  /// The random tests' seed: `SPINDLE_REVIEW_SEED` replays a failure.
  static var seed: UInt64 {
    ProcessInfo.processInfo.environment["SPINDLE_REVIEW_SEED"].flatMap(UInt64.init) ?? .random(in: 0...UInt64.max)
  }

  /// Holds a value set after the item that reads it was added.
  final class Box<Value: Sendable>: Sendable {
    private let value = Locked<Value?>(nil)
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
    var get: Value { value.withLock { $0 }! }
    var getOptional: Value? { value.withLock { $0 } }
  }

  /// An event, reduced to what the order checks look at.
  enum Seen: Equatable, Sendable, CustomStringConvertible {
    case added
    case willStart(Int)
    case started(Int)
    case retrying(Int)
    case cancelRequested, finished

    init(_ kind: WorkEvent.Kind) {
      switch kind {
      case .added: self = .added
      case .willStart(let attempt): self = .willStart(attempt)
      case .started(let attempt): self = .started(attempt)
      case .retrying(let attempt, _): self = .retrying(attempt)
      case .cancelRequested: self = .cancelRequested
      case .finished: self = .finished
      }
    }

    var description: String {
      switch self {
      case .added: "added"
      case .willStart(let attempt): "willStart(\(attempt))"
      case .started(let attempt): "started(\(attempt))"
      case .retrying(let attempt): "retrying(\(attempt))"
      case .cancelRequested: "cancelRequested"
      case .finished: "finished"
      }
    }
  }

  /// What is wrong with the events of one item observed from before it was added, or nil: `added`, then per attempt
  /// `willStart(n)`, `started(n)`, a `retrying(n + 1)` between attempts, at most one `cancelRequested` (after a
  /// `started`), and `finished` once, last. With `parks`, an attempt may start again (an exclusive item that found its
  /// key taken: see `anExclusiveItemThatParksStartsOncePerAttemptInItsEvents`).
  static func orderProblem(_ events: [Seen]) -> String? {
    guard events.first == .added else { return "does not begin with added" }
    guard events.last == .finished, events.filter({ $0 == .finished }).count == 1 else {
      return "finished is not last, or not once"
    }
    var attempt = 0
    var inAttempt = false
    var cancels = 0
    var expectWillStart = 1
    for event in events.dropFirst().dropLast() {
      switch event {
      case .willStart(let n):
        guard !inAttempt && n == expectWillStart else { return "willStart(\(n)) out of place" }
        attempt = n
        inAttempt = true
      case .started(let n):
        guard inAttempt, n == attempt else { return "started(\(n)) out of place" }
      case .retrying(let n):
        guard inAttempt, n == attempt + 1 else { return "retrying(\(n)) out of place" }
        inAttempt = false
        expectWillStart = n
      case .cancelRequested:
        cancels += 1
        guard attempt > 0, cancels == 1 else { return "cancelRequested out of place, or twice" }
      case .added, .finished:
        return "\(event) repeated"
      }
    }
    return nil
  }

  /// Whether a thread still holds (or left) the turn to deliver the item's events.
  static func isDelivering(_ work: AnyWork) -> Bool {
    work.lock.withLock { work.deliveringEvents || !(work.extras?.heldEvents.isEmpty ?? true) }
  }

  static func blockedWaits(_ queue: WorkQueue) -> Int {
    queue.engine.withState { $0.blockedWaits.count }
  }

  // MARK: - Work.wait(): the blocked-wait count

  /// Random waits from bodies of a queue on work of the same queue (plain, retried, exclusive, cancelled, already
  /// finished), some allowed, some refused: no wait hangs, once everything is done nothing is counted, and the engine
  /// is freed with the queue (a counted `BlockedWait` holds it only until the awaited work completes).
  ///
  /// Only items that wait for nothing are waited for, and exclusive bodies do not wait: a body waiting for started work
  /// that itself waits (its slot is blocked, uncounted), or a key holder waiting for work that waits for the key, is a
  /// deadlock the check does not claim to see (found by this test's first version; it was so before these commits).
  @Test func theBlockedWaitCountEndsAtZeroAndKeepsNoEngine() throws {
    let rounds = Self.rounds ?? 60
    let seed = Self.seed
    var random = SeededGenerator(seed: seed)
    for round in 0..<rounds {
      let width = Int.random(in: 1...4, using: &random)
      var queue: WorkQueue? = WorkQueue(name: "r22.count.\(round)", maxConcurrent: width)
      weak let engine = queue!.engine
      let targets = Box<[Work<Int>]>()
      let key = "r22.count.\(round).\(seed)"
      let count = Int.random(in: 2...10, using: &random)
      // 0 plain, 1 retried (fails 0 to 2 times first), 2 exclusive, 3 plain that never waits.
      let kinds = (0..<count).map { _ in Int.random(in: 0..<4, using: &random) }
      let waitsAtAll = kinds.map { $0 < 2 && Bool.random(using: &random) }
      let awaitable = (0..<count).filter { !waitsAtAll[$0] }
      var made: [Work<Int>] = []
      var plan: [String] = []
      queue!.suspend()
      for index in 0..<count {
        let waitsFor = waitsAtAll[index] ? awaitable.randomElement(using: &random) : nil
        let spin = Int.random(in: 0..<200, using: &random)
        plan.append("w\(index): kind \(kinds[index])\(waitsFor.map { " waits w\($0)" } ?? "")")
        let body: @Sendable () throws -> Int = {
          if spin > 100 { usleep(UInt32(spin)) }
          guard let waitsFor else { return index }
          // A refused wait throws WorkDeadlockError; an allowed one returns a value or the awaited work's error.
          do { return try targets.get[waitsFor].wait() + 1 } catch is WorkDeadlockError { return -1 }
        }
        let work: Work<Int>
        switch kinds[index] {
        case 1:
          let failures = Locked(Int.random(in: 0...2, using: &random))
          work = queue!.add(name: "w\(index)", retry: .fixed(maxAttempts: 3)) {
            let fails = failures.withLock { remaining in
              defer { remaining -= 1 }
              return remaining > 0
            }
            if fails { throw TestError.retry }
            return try body()
          }
        case 2: work = queue!.add(name: "w\(index)", exclusive: key, body)
        default: work = queue!.add(name: "w\(index)", body)
        }
        made.append(work)
      }
      targets.set(made)
      queue!.resume()
      if Bool.random(using: &random) { made[Int.random(in: 0..<count, using: &random)].cancel() }
      let finished = DispatchSemaphore(value: 0)
      DispatchQueue.global().async { [queue] in
        queue!.waitUntilAllFinished()
        finished.signal()
      }
      guard finished.wait(timeout: .now() + 20 * hangBoundScale) == .success else {
        let states = made.map { "\($0.name ?? ""): \($0.state)" }.joined(separator: ", ")
        let message =
          "round \(round) (seed \(seed), width \(width)): a wait hung; \(states); \(plan.joined(separator: ", "));"
          + " blocked waits \(Self.blockedWaits(queue!))"
        Issue.record(Comment(rawValue: message))
        return
      }
      // The last completion handler (which ends a counted wait) may run a moment after the queue looks empty.
      #expect(eventually { Self.blockedWaits(queue!) == 0 }, "round \(round), seed \(seed)")
      queue = nil
      made = []
      targets.set([])
      #expect(eventually { engine == nil }, "round \(round) (seed \(seed)): the engine was kept alive")
    }
  }

  enum TestError: Error { case retry, failed }

  /// A refused wait leaves its completion handler on the awaited work: when that work completes later, the handler
  /// uncounts nothing (the wait was never counted) and the count stays at zero; the refused waits of a body that tries
  /// again and again do not add up.
  @Test func aRefusedWaitIsNeverCountedNorUncounted() throws {
    let queue = WorkQueue(name: "r22.refused", maxConcurrent: 1)
    let later = Box<Work<Int>>()
    let refusals = Locked(0)
    queue.suspend()
    let first = queue.add(name: "first") { () -> Int in
      for _ in 0..<100 {
        do { _ = try later.get.wait() } catch is WorkDeadlockError { refusals.withLock { $0 += 1 } }
      }
      return Self.blockedWaits(queue)
    }
    later.set(queue.add(name: "later") { 5 })
    queue.resume()
    #expect(try first.wait() == 0)
    #expect(try later.get.wait() == 5)
    #expect(refusals.withLock { $0 } == 100)
    #expect(eventually { Self.blockedWaits(queue) == 0 })
  }

  /// Width 3: two bodies wait for one unstarted item (the second wait fills the last free slot but one, and is
  /// allowed); a third body's wait would leave no slot for it and throws. Once the item ran, both waits end together
  /// and the count returns to zero (each wait is uncounted once, never twice).
  @Test func twoWaitsForOneItemAreCountedOnceEach() throws {
    let queue = WorkQueue(name: "r22.two", maxConcurrent: 3)
    let target = Box<Work<Int>>()
    let bothWaiting = SpindleTestSupport.Gate()
    let gate = SpindleTestSupport.Gate()
    queue.suspend()
    let a = queue.add(name: "a") { () -> Int in try target.get.wait() + 1 }
    let b = queue.add(name: "b") { () -> Int in
      // Only once a counts (its body started and checked): then b's check sees 1 counted wait.
      #expect(eventually { Self.blockedWaits(queue) == 1 })
      return try target.get.wait() + 2
    }
    let c = queue.add(name: "c") { () -> Int in
      #expect(eventually { Self.blockedWaits(queue) == 2 })
      bothWaiting.open()
      do { _ = try target.get.wait() } catch is WorkDeadlockError { return -1 }
      return 0
    }
    target.set(
      queue.add(name: "target") { () -> Int in
        gate.wait(seconds: 10)
        return 10
      })
    queue.resume()
    #expect(bothWaiting.wait(seconds: 10))
    #expect(try c.wait() == -1)
    #expect(Self.blockedWaits(queue) == 2)
    gate.open()
    #expect(try a.wait() == 11)
    #expect(try b.wait() == 12)
    #expect(eventually { Self.blockedWaits(queue) == 0 })
  }

  /// An exclusive item that has not got its key yet (another queue's item holds it) parks and needs a slot
  /// again: a wait for it counts, and on a queue whose other slots are all blocked, it is refused.
  @Test func aParkedExclusiveItemStillNeedsASlot() throws {
    let key = "r22.parked.\(UUID())"
    let other = WorkQueue(name: "r22.parked.other", maxConcurrent: 1)
    let queue = WorkQueue(name: "r22.parked", maxConcurrent: 2)
    let holding = SpindleTestSupport.Gate()
    let release = SpindleTestSupport.Gate()
    let holder = other.add(name: "holder", exclusive: key) { () -> Int in
      holding.open()
      release.wait(seconds: 10)
      return 1
    }
    #expect(holding.wait(seconds: 10))
    let exclusive = queue.add(name: "exclusive", exclusive: key) { 2 }
    // It asked for the key, found it taken and parked: pending, with no slot.
    #expect(eventually { exclusive.state == .pending && queue.runningCount == 0 })
    let first = queue.add(name: "first") { () -> Int in
      // The second slot may still run `second` below; the first wait is allowed (1 < 2).
      try exclusive.wait() + 10
    }
    #expect(eventually { Self.blockedWaits(queue) == 1 })
    let second = queue.add(name: "second") { () -> Int in
      do { return try exclusive.wait() + 20 } catch is WorkDeadlockError { return -1 }
    }
    #expect(try second.wait() == -1)
    release.open()
    #expect(try holder.wait() == 1)
    #expect(try first.wait() == 12)
    #expect(eventually { Self.blockedWaits(queue) == 0 })
  }

  /// Exclusive work is made running only once it holds its key, so a `cancel()` from another thread, whenever it comes
  /// while a worker asks for the key, finds the work pending (it completes at once, with no `cancelRequested`) or
  /// running with its key (one `cancelRequested`, after `started`), and the key is never left held or lined up by
  /// work that ended: the next item with the key runs. (A worker used to make the work running first, deliver
  /// `willStart` and `started`, and park it when the key was taken; a cancel in that window gave `cancelRequested` and
  /// then a second start.) Rounds alternate between a free key and one another queue holds for a moment.
  @Test func aCancelWhileExclusiveWorkAsksForItsKeyKeepsItsEventsInOrder() throws {
    let rounds = Self.rounds ?? 300
    let seed = Self.seed
    var random = SeededGenerator(seed: seed)
    let key = "r22.exclusive.cancel.\(UUID())"
    let queue = WorkQueue(name: "r22.exclusive.cancel", maxConcurrent: 2)
    let other = WorkQueue(name: "r22.exclusive.cancel.other", maxConcurrent: 1)
    let log = Locked<[String: [Seen]]>([:])
    let observation = queue.observe { event in
      guard let name = event.work else { return }
      log.withLock { $0[name, default: []].append(Seen(event.kind)) }
    }
    defer { observation.cancel() }
    var problems: [String] = []
    var outcomes: [String: Int] = [:]
    for round in 0..<rounds {
      let held = Bool.random(using: &random)
      let holding = SpindleTestSupport.Gate()
      let hold = Int.random(in: 0..<200, using: &random)
      let holder: Work<Int>? =
        held
        ? other.add(name: "holder \(round)", exclusive: key) { () -> Int in
          holding.open()
          let end = ContinuousClock.now + .microseconds(hold)
          while ContinuousClock.now < end {}
          return 0
        } : nil
      if held { #expect(holding.wait(seconds: 10)) }
      let name = "x\(round)"
      let ran = Locked(false)
      let work = queue.add(name: name, exclusive: key) { () -> Int in
        ran.withLock { $0 = true }
        return 1
      }
      if round % 4 == 3 {
        // Now and then only once the body ran, so that the end where it runs is reached whatever the timing.
        #expect(eventually { ran.withLock { $0 } })
      } else {
        let spin = Int.random(in: 0..<100_000, using: &random)
        let end = ContinuousClock.now + .nanoseconds(spin)
        while ContinuousClock.now < end {}
      }
      work.cancel()
      let value = try? work.wait()
      _ = try holder?.wait()
      // Ran to the end (the cancel came after its synchronous body ended or found it running with no way to stop
      // it), or cancelled without running.
      if value == 1 {
        #expect(ran.withLock { $0 }, "round \(round) (seed \(seed)): a value without a run")
        outcomes["ran", default: 0] += 1
      } else {
        #expect(work.state == .cancelled)
        outcomes[ran.withLock { $0 } ? "cancelled while running" : "cancelled before it ran", default: 0] += 1
      }
      #expect(eventually { log.withLock { $0[name]?.last == .finished } })
      let events = log.withLock { $0.removeValue(forKey: name) ?? [] }
      // `started` means the body started: work that never ran had none (it was pending, in the key's line or ready).
      let problem =
        Self.orderProblem(events)
        ?? (!ran.withLock({ $0 }) && events.contains(.started(1)) ? "started, but its body never ran" : nil)
      if let problem, problems.count < 5 {
        problems.append("round \(round) \(name) (key \(held ? "held" : "free")): \(problem): \(events)")
      }
    }
    // The key is free: an item with it runs on either queue.
    #expect(try queue.add(name: "after", exclusive: key) { 2 }.wait() == 2)
    #expect(try other.add(name: "after other", exclusive: key) { 3 }.wait() == 3)
    print("ReviewSession22Tests: exclusive items asking for their key, cancelled at random: \(outcomes) (seed \(seed))")
    #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "; "))")
    // Both ends of the race are reached.
    #expect(outcomes["ran", default: 0] > 0)
    #expect(outcomes["cancelled before it ran", default: 0] > 0)
  }

  /// The waits of one queue's bodies for another queue's work are never counted on either queue.
  @Test func waitsAcrossQueuesAreNotCounted() throws {
    let a = WorkQueue(name: "r22.cross.a", maxConcurrent: 1)
    let b = WorkQueue(name: "r22.cross.b", maxConcurrent: 1)
    let gate = SpindleTestSupport.Gate()
    b.suspend()
    let target = b.add(name: "target") { () -> Int in
      gate.wait(seconds: 10)
      return 3
    }
    let waiter = a.add(name: "waiter") { () -> Int in try target.wait() + 1 }
    #expect(eventually { a.runningCount == 1 })
    #expect(Self.blockedWaits(a) == 0 && Self.blockedWaits(b) == 0)
    b.resume()
    gate.open()
    #expect(try waiter.wait() == 4)
  }

  // MARK: - Group timeout

  /// The final item completed before the timeout, but the group's own item has no slot yet (a long item holds the only
  /// one): the group ends with the final item's value, not with a timeout, and the members are not cancelled. The
  /// timeout (1 s) leaves the final item, on an idle queue, time to complete on a loaded host; the test then waits
  /// until the deadline has passed.
  @Test func aGroupWhoseFinalItemCompletedButWhoseHandleWaitsForASlotDoesNotTimeOut() throws {
    let queue = WorkQueue(name: "r22.group.slot", maxConcurrent: 1)
    let other = WorkQueue(name: "r22.group.slot.other", maxConcurrent: 1)
    let gate = SpindleTestSupport.Gate()
    let blocking = SpindleTestSupport.Gate()
    let blocker = queue.add(name: "blocker") { () -> Int in
      blocking.open()
      gate.wait(seconds: 10)
      return 0
    }
    #expect(blocking.wait(seconds: 10))
    let final = Box<Work<Int>>()
    let deadline = ContinuousClock.now + .seconds(1)
    let group = queue.group(name: "g", timeout: .seconds(1)) { _ in
      // The final item runs on another queue; the group's own item needs `queue`'s slot, held by the blocker.
      final.set(other.add(name: "final") { 42 })
      return final.get
    }
    #expect(try final.get.wait() == 42)
    // Past the deadline, and the timer's moment after it.
    while ContinuousClock.now < deadline + .milliseconds(200) { usleep(10_000) }
    #expect(group.state == .pending || group.state == .ready)
    gate.open()
    #expect(try blocker.wait() == 0)
    #expect(try group.wait() == 42)
  }

  // MARK: - Event delivery: re-entrant handlers

  /// A queue observer cancels the item from its `willStart` and `started` handlers (on the worker, which holds the
  /// item's turn): `cancel()` returns at once, and the event comes after `started`, once.
  @Test func aHandlerThatCancelsItsItemDuringTheStartEvents() throws {
    for cancelOn in ["willStart", "started"] {
      let queue = WorkQueue(name: "r22.reenter.\(cancelOn)", maxConcurrent: 1)
      let log = Locked<[Seen]>([])
      let target = Box<Work<Int>>()
      let observation = queue.observe { event in
        log.withLock { $0.append(Seen(event.kind)) }
        switch event.kind {
        case .willStart where cancelOn == "willStart", .started where cancelOn == "started":
          target.get.cancel(reason: "from a handler")
          target.get.cancel()  // the second call is harmless
        default: break
        }
      }
      defer { observation.cancel() }
      queue.suspend()
      target.set(
        queue.add(name: "item") { () throws -> Int in
          guard WorkContext.current?.isCancelled == true else { return 1 }
          throw CancellationError()
        })
      queue.resume()
      #expect(throws: WorkCancellationError.self) { try target.get.wait() }
      #expect(eventually { log.withLock { $0.last } == .finished })
      #expect(log.withLock { $0 } == [.added, .willStart(1), .started(1), .cancelRequested, .finished])
      #expect(eventually { !Self.isDelivering(target.get) })
    }
  }

  /// A `cancelRequested` handler (on the cancelling thread, which holds the turn) cancels the item again, observes it,
  /// adds and waits for other work, and the body ends meanwhile: `finished` comes after, from that thread, and nothing
  /// deadlocks.
  @Test func aCancelRequestedHandlerThatReentersTheItem() throws {
    let queue = WorkQueue(name: "r22.reenter.cancel", maxConcurrent: 2)
    let other = WorkQueue(name: "r22.reenter.other", maxConcurrent: 1)
    let log = Locked<[Seen]>([])
    let itemLog = Locked<[Seen]>([])
    let target = Box<Work<Int>>()
    let bodyStarted = SpindleTestSupport.Gate()
    let observation = queue.observe { event in
      guard event.work == "item" else { return }
      log.withLock { $0.append(Seen(event.kind)) }
      if case .cancelRequested = event.kind {
        target.get.cancel()
        target.get.observe { event in itemLog.withLock { $0.append(Seen(event.kind)) } }
        // The body sees the cancel and ends; its `finished` is left to this thread.
        #expect(eventually { target.get.state.isFinal })
        #expect((try? other.add(name: "side") { 9 }.wait()) == 9)
        #expect(log.withLock { $0.last } == .cancelRequested)
      }
    }
    defer { observation.cancel() }
    let deadline = ContinuousClock.now + .seconds(10)
    target.set(
      queue.add(name: "item") { () throws -> Int in
        bodyStarted.open()
        while WorkContext.current?.isCancelled != true && ContinuousClock.now < deadline { usleep(50) }
        throw CancellationError()
      })
    #expect(bodyStarted.wait(seconds: 10))
    target.get.cancel()
    #expect(log.withLock { $0 } == [.added, .willStart(1), .started(1), .cancelRequested, .finished])
    // The observer added while `cancelRequested` was being delivered may get that event too (the item's observers are
    // read after the queue's); it gets `finished`, once, last.
    #expect([[.finished], [.cancelRequested, .finished]].contains(itemLog.withLock { $0 }))
    #expect(eventually { !Self.isDelivering(target.get) })
  }

  /// An item observer added while the body runs (the worker delivered no start events then, nobody observed): the
  /// cancel's and the end's events reach it, in order, and the item ends with no thread holding its turn.
  @Test func anObserverAddedAfterTheStartSeesTheRestInOrder() throws {
    for round in 0..<(Self.rounds.map { max(1, $0 / 20) } ?? 50) {
      let queue = WorkQueue(name: "r22.late.\(round)", maxConcurrent: 1)
      let bodyStarted = SpindleTestSupport.Gate()
      let proceed = SpindleTestSupport.Gate()
      let log = Locked<[Seen]>([])
      let item = queue.add(name: "item") { () throws -> Int in
        bodyStarted.open()
        proceed.wait(seconds: 10)
        if WorkContext.current?.isCancelled == true { throw CancellationError() }
        return 1
      }
      #expect(bodyStarted.wait(seconds: 10))
      item.observe { event in log.withLock { $0.append(Seen(event.kind)) } }
      let cancelled = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        item.cancel()
        cancelled.signal()
      }
      if round % 2 == 0 { proceed.open() }
      #expect(cancelled.wait(timeout: .now() + 10) == .success)
      proceed.open()
      _ = try? item.wait()
      #expect(eventually { log.withLock { $0.last } == .finished })
      let events = log.withLock { $0 }
      #expect(events == [.cancelRequested, .finished] || events == [.finished], "round \(round): \(events)")
      #expect(eventually { !Self.isDelivering(item) })
    }
  }

  /// Queue observers come and go while items run, retry, get cancelled and park for exclusivity keys, with handlers
  /// that cancel items, observe them and add work from inside: no hang, no item left with a thread holding its turn,
  /// and for every item observed throughout by a queue observer, its events are in order.
  @Test func randomReentrantHandlersAndObserversThatComeAndGo() throws {
    let rounds = Self.rounds.map { max(1, $0 / 10) } ?? 120
    let seed = Self.seed
    var random = SeededGenerator(seed: seed)
    var problems: [String] = []
    for round in 0..<rounds {
      let queue = WorkQueue(name: "r22.random.\(round)", maxConcurrent: Int.random(in: 1...3, using: &random))
      let side = WorkQueue(name: "r22.random.side.\(round)", maxConcurrent: 2)
      let items = Box<[String: Work<Int>]>()
      let log = Locked<[String: [Seen]]>([:])
      let handlerCancels = Int.random(in: 0..<4, using: &random)
      let steady = queue.observe { event in
        guard let name = event.work, name.hasPrefix("i") else { return }
        log.withLock { $0[name, default: []].append(Seen(event.kind)) }
        let work = items.getOptional?[name]
        switch (event.kind, handlerCancels) {
        case (.willStart, 1), (.started, 2): work?.cancel()
        case (.cancelRequested, 3):
          work?.cancel()
          work?.observe { _ in }
          side.add { 0 }
        default: break
        }
      }
      let key = "r22.random.\(seed).\(round)"
      var made: [String: Work<Int>] = [:]
      var exclusive: Set<String> = []
      let count = Int.random(in: 1...6, using: &random)
      queue.suspend()
      for index in 0..<count {
        let name = "i\(index)"
        let spin = Int.random(in: 0..<300, using: &random)
        let failFirst = Bool.random(using: &random)
        let attempts = Locked(0)
        let body: @Sendable () throws -> Int = {
          let attempt = attempts.withLock { n in
            n += 1
            return n
          }
          let end = ContinuousClock.now + .microseconds(spin)
          while ContinuousClock.now < end {
            if WorkContext.current?.isCancelled == true { throw CancellationError() }
          }
          if failFirst && attempt == 1 { throw TestError.failed }
          return index
        }
        switch Int.random(in: 0..<5, using: &random) {
        case 0: made[name] = queue.add(name: name, body)
        case 1: made[name] = queue.add(name: name, retry: .fixed(maxAttempts: 2), body)
        case 2:
          made[name] = queue.add(name: name, exclusive: key, body)
          exclusive.insert(name)
        case 3:
          made[name] = queue.add(name: name, retry: .fixed(maxAttempts: 2)) { () async throws -> Int in
            try Task.checkCancellation()
            await Task.yield()
            return try body()
          }
        default:
          made[name] = queue.addCallback(name: name, retry: .fixed(maxAttempts: 2)) { (finish: WorkFinish<Int>) in
            DispatchQueue.global().async { finish(Result { try body() }) }
          }
        }
      }
      items.set(made)
      // A second observer that comes and goes while the items run.
      let flicker = Bool.random(using: &random)
      queue.resume()
      let names = made.keys.sorted()
      let snapshot = made
      for _ in 0..<Int.random(in: 0...3, using: &random) {
        let name = names[Int.random(in: 0..<names.count, using: &random)]
        let delay = UInt32.random(in: 0..<300, using: &random)
        DispatchQueue.global().async {
          usleep(delay)
          snapshot[name]?.cancel(reason: Bool.random() ? "r" : "s")
        }
      }
      if flicker {
        for _ in 0..<3 {
          let passing = queue.observe { _ in }
          usleep(UInt32.random(in: 0..<200, using: &random))
          passing.cancel()
        }
      }
      let finished = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        queue.waitUntilAllFinished()
        finished.signal()
      }
      guard finished.wait(timeout: .now() + 20 * hangBoundScale) == .success else {
        Issue.record("round \(round) (seed \(seed)): the queue never finished")
        return
      }
      for (name, work) in made {
        #expect(
          eventually { !Self.isDelivering(work) }, "round \(round) (seed \(seed)): \(name) delivering")
      }
      #expect(eventually { log.withLock { $0.values.allSatisfy { $0.last == .finished } } })
      steady.cancel()
      for (name, events) in log.withLock({ $0 }) {
        if let problem = Self.orderProblem(events), problems.count < 8 {
          problems.append("round \(round) \(name): \(problem): \(events)")
        }
      }
    }
    #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "; "))")
  }

  /// An attempt fails and is to be retried (the work is pending again) while a `cancel()` comes from another thread: the
  /// cancel completes the pending work at once. `retrying` must still come before `finished`, never after it. It used
  /// to be delivered after the work was made pending, by a separate `emit`: the cancel's `finished` could take the
  /// item's turn first (found once by `randomReentrantHandlersAndObserversThatComeAndGo`; this stress seldom hits the
  /// window, `retryingNeverFollowsFinishedStaged` reproduces it).
  @Test func retryingNeverFollowsFinished() {
    let rounds = Self.rounds ?? 1_000
    let seed = Self.seed
    var random = SeededGenerator(seed: seed)
    let queue = WorkQueue(name: "r22.retrying", maxConcurrent: 2)
    let log = Locked<[String: [Seen]]>([:])
    let finished = DispatchSemaphore(value: 0)
    let observation = queue.observe { event in
      guard let name = event.work else { return }
      log.withLock { $0[name, default: []].append(Seen(event.kind)) }
      if case .finished = event.kind { finished.signal() }
    }
    defer { observation.cancel() }
    var problems: [String] = []
    var raced = 0
    for round in 0..<rounds {
      let name = "t\(round)"
      let failing = DispatchSemaphore(value: 0)
      let go = Locked(false)
      let spin = Int.random(in: 0..<3_000, using: &random)
      let work: Work<Int>
      if Bool.random(using: &random) {
        // A callback body whose `finish` (with an error) another thread calls.
        work = queue.addCallback(name: name, retry: .fixed(maxAttempts: 2, delay: .seconds(5))) {
          (finish: WorkFinish<Int>) in
          DispatchQueue.global().async {
            failing.signal()
            while !go.withLock({ $0 }) {}
            finish(TestError.failed)
          }
        }
      } else {
        // A synchronous body that throws on its worker.
        work = queue.add(name: name, retry: .fixed(maxAttempts: 2, delay: .seconds(5))) { () throws -> Int in
          failing.signal()
          while !go.withLock({ $0 }) {}
          throw TestError.failed
        }
      }
      #expect(failing.wait(timeout: .now() + 10) == .success)
      go.withLock { $0 = true }
      if round % 4 == 0 {
        // Every fourth round cancels the moment the attempt is settled (pending again): the window this test is about,
        // reached whatever the timing (under AddressSanitizer the random spin alone never reached it in 1,000 rounds).
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
          let settled = work.lock.withLock { () -> Bool in
            if work.extras?.attempts == 2, case .pending = work.phase { return true }
            return false
          }
          if settled { break }
        }
      } else {
        let end = ContinuousClock.now + .nanoseconds(spin)
        while ContinuousClock.now < end {}
      }
      work.cancel()
      guard finished.wait(timeout: .now() + 10 * hangBoundScale) == .success else {
        Issue.record("round \(round) (seed \(seed)): no finished")
        return
      }
      let events = log.withLock { $0.removeValue(forKey: name) ?? [] }
      if events.contains(.retrying(2)) { raced += 1 }
      if let problem = Self.orderProblem(events), problems.count < 5 {
        problems.append("\(name): \(problem): \(events)")
      }
    }
    queue.waitUntilAllFinished()
    print("ReviewSession22Tests: retrying was delivered before a cancel's finished in \(raced) of \(rounds) rounds")
    #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "; "))")
    #expect(raced > 0, "no round cancelled the work between its failed attempt and the next")
  }

  /// Staged: a thread settles a failed attempt for a retry (the work is pending again); the test takes the item's lock
  /// at once and, if the thread has not taken the item's turn yet, stops it with a signal (its handler blocks);
  /// a `cancel()` then completes the pending work and delivers `finished`, and the thread is let go. Its `retrying`
  /// came after `finished` when the thread had not taken the item's turn when it was stopped (it took it after the
  /// phase change, in a lock acquisition of its own).
  @Test func retryingNeverFollowsFinishedStaged() throws {
    let rounds = Self.rounds.map { max(10, $0 / 20) } ?? 60
    StallSignal.install()
    defer { StallSignal.uninstall() }
    var staged = 0
    var problems: [String] = []
    for round in 0..<rounds {
      let queue = WorkQueue(name: "r22.retrying.staged.\(round)", maxConcurrent: 1)
      let log = Locked<[Seen]>([])
      let observation = queue.observe { event in log.withLock { $0.append(Seen(event.kind)) } }
      defer { observation.cancel() }
      let thread = Locked<pthread_t?>(nil)
      let failing = SpindleTestSupport.Gate()
      let go = Locked(false)
      // A callback body whose `finish` a thread of the test's own calls (Dispatch's threads block signals, and a thread
      // started from one inherits its mask: it unblocks the signal).
      let work = queue.addCallback(name: "item", retry: .fixed(maxAttempts: 2, delay: .seconds(5))) {
        (finish: WorkFinish<Int>) in
        Thread.detachNewThread {
          StallSignal.unblock()
          thread.withLock { $0 = pthread_self() }
          failing.open()
          while !go.withLock({ $0 }) {}
          finish(TestError.failed)
        }
      }
      #expect(failing.wait(seconds: 10))
      go.withLock { $0 = true }
      // Take the lock the moment the attempt is settled (pending again, attempt 2 next), before the worker goes on.
      let deadline = ContinuousClock.now + .seconds(5)
      var settled = false
      while ContinuousClock.now < deadline {
        work.lock.lock()
        if work.extras?.attempts == 2, case .pending = work.phase {
          settled = true
          break
        }
        work.lock.unlock()
      }
      guard settled, let worker = thread.withLock({ $0 }) else {
        Issue.record("round \(round): the attempt was never settled")
        return
      }
      // Stopped only while it has not taken the item's turn (which needs the lock held here): then it holds no lock
      // that the cancel below needs. (Once it has the turn it may be in `deliver`, in the queue's lock.)
      let hasTurn = work.deliveringEvents
      let retryingDelivered = log.withLock { $0.contains(.retrying(2)) }
      let stopped = !hasTurn && !retryingDelivered && StallSignal.stop(worker)
      work.lock.unlock()
      work.cancel()
      StallSignal.resume()
      #expect(throws: CancellationError.self) { try work.wait() }
      #expect(eventually { log.withLock { $0.contains(.retrying(2)) && $0.contains(.finished) } })
      guard stopped else { continue }
      staged += 1
      let events = log.withLock { $0 }
      if let problem = Self.orderProblem(events) { problems.append("round \(round): \(problem): \(events)") }
    }
    // None, once the settling thread takes the item's turn in the same lock acquisition as the phase change (before the
    // fix, it waited for the lock the test holds to take its turn, and was stopped in nearly every round).
    print(
      "ReviewSession22Tests: the settling thread was stopped before it delivered retrying in \(staged) of \(rounds)")
    #expect(problems.isEmpty, "\(problems.count) of \(staged) staged rounds: \(problems.prefix(3))")
  }

  // MARK: - Event delivery: exclusive items that park

  /// An exclusive item whose key another item holds finds the key taken, parks, and later runs its body once.
  /// ``WorkEvent``'s order promises `willStart` and `started` once per attempt. The worker used to deliver them when it
  /// made the item running, before it looked for the key, and again when the item ran after parking:
  /// `added, willStart(1), started(1), willStart(1), started(1), finished`. Now the worker asks for the key before it
  /// makes the item running: one `willStart` and one `started`, when the item has its key.
  @Test func anExclusiveItemThatParksStartsOncePerAttemptInItsEvents() throws {
    let key = "r22.events.parked.\(UUID())"
    let other = WorkQueue(name: "r22.events.parked.other", maxConcurrent: 1)
    let queue = WorkQueue(name: "r22.events.parked", maxConcurrent: 1)
    let holding = SpindleTestSupport.Gate()
    let release = SpindleTestSupport.Gate()
    let holder = other.add(name: "holder", exclusive: key) { () -> Int in
      holding.open()
      release.wait(seconds: 10)
      return 1
    }
    #expect(holding.wait(seconds: 10))
    let log = Locked<[Seen]>([])
    let observation = queue.observe { event in log.withLock { $0.append(Seen(event.kind)) } }
    defer { observation.cancel() }
    let runs = Locked(0)
    let item = queue.add(name: "item", exclusive: key) { () -> Int in
      runs.withLock { $0 += 1 }
      return 2
    }
    #expect(eventually { item.state == .pending && queue.runningCount == 0 })
    release.open()
    #expect(try holder.wait() == 1)
    #expect(try item.wait() == 2)
    #expect(runs.withLock { $0 } == 1)
    #expect(eventually { log.withLock { $0.last } == .finished })
    let events = log.withLock { $0 }
    #expect(Self.orderProblem(events) == nil, "\(events)")
  }
}

/// Stops a thread (SIGUSR1, sent with `pthread_kill`, nothing else here uses it) in a handler that blocks until
/// `resume()`; for staging a thread between two steps it takes without any hook in between.
enum StallSignal {
  nonisolated(unsafe) static let entered: UnsafeMutablePointer<sem_t> = {
    let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    sem_init(semaphore, 0, 0)
    return semaphore
  }()
  nonisolated(unsafe) static let resumed: UnsafeMutablePointer<sem_t> = {
    let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    sem_init(semaphore, 0, 0)
    return semaphore
  }()
  nonisolated(unsafe) static var previous: sighandler_t? = nil

  static func install() {
    _ = entered
    _ = resumed
    previous = signal(SIGUSR1) { _ in
      sem_post(StallSignal.entered)
      while sem_wait(StallSignal.resumed) != 0 {}
    }
  }

  static func uninstall() {
    signal(SIGUSR1, previous ?? SIG_DFL)
  }

  /// Stops `thread`; false when it did not stop within a few seconds (it then stops later, and `resume()` lets it go).
  static func stop(_ thread: pthread_t) -> Bool {
    guard pthread_kill(thread, SIGUSR1) == 0 else { return false }
    var deadline = timespec()
    clock_gettime(CLOCK_REALTIME, &deadline)
    deadline.tv_sec += Int(5 * hangBoundScale)
    while true {
      if sem_timedwait(entered, &deadline) == 0 { return true }
      if errno != EINTR { return false }
    }
  }

  /// Lets the signal reach the calling thread.
  static func unblock() {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGUSR1)
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
  }

  static func resume() {
    sem_post(resumed)
  }
}
