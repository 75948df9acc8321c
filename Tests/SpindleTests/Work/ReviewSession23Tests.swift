import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// A review of exclusive work asking for its key before it is made running (`askForKeyLocked`, `holdsKey`) and of
/// `Work.wait()`'s check that follows the waits of a queue's bodies (`BlockedWaits`): cycles and chains of waits are
/// refused, waits that can end are allowed, keys are never left held and slots never lost.
@Suite("Work: review 23", .serialized, .offThePool)
struct ReviewSession23Tests {
  /// `SPINDLE_ADVERSARIAL_ROUNDS`, as session 22's review reads it.
  static var rounds: Int? { ReviewSession22Tests.rounds }
  /// The random tests' seed: `SPINDLE_REVIEW_SEED` replays a failure.
  static var seed: UInt64 { ReviewSession22Tests.seed }

  typealias Box = ReviewSession22Tests.Box

  enum TestError: Error { case retry }

  static func blockedWaits(_ queue: WorkQueue) -> Int {
    queue.engine.withState { $0.blockedWaits.count }
  }

  /// The works whose bodies are counted as waiting in `queue`'s blocked waits.
  static func waiters(_ queue: WorkQueue) -> Set<ObjectIdentifier> {
    queue.engine.withState { Set($0.blockedWaits.entries.map(\.waiter)) }
  }

  /// Runs `body` on a thread of its own; returns whether it returned within `seconds`.
  static func finishes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      body()
      done.signal()
    }
    return done.wait(timeout: .now() + seconds * hangBoundScale) == .success
  }

  // MARK: - Work.wait(): cycles through work that started after it was waited for

  /// Width 4. W waits for T while every slot is taken (T unstarted: the wait is recorded as needing a slot). A slot
  /// frees and T starts; T waits for running X; then X waits for W. W → T → X → W is a cycle of running bodies, which
  /// never ends whatever the free slot. The cycle walk stopped at W's wait because T "needed a slot" when W began to
  /// wait, so X's wait was allowed (3 stuck of 4) and the three bodies hung.
  @Test func aCycleThroughWorkThatStartedAfterItWasAwaitedIsRefused() throws {
    let queue = WorkQueue(name: "r23.cycle.late", maxConcurrent: 4)
    let started = Locked<Set<String>>([])
    let gates = (0..<5).map { _ in SpindleTestSupport.Gate() }
    let w = Box<Work<Int>>()
    let t = Box<Work<Int>>()
    let x = Box<Work<Int>>()
    func body(_ name: String, _ gate: Int, waitsFor target: Box<Work<Int>>?) -> @Sendable () -> Int {
      { () -> Int in
        started.withLock { _ = $0.insert(name) }
        gates[gate].wait(seconds: 10)
        guard let target else { return 0 }
        do { return try target.get.wait() + 1 } catch is WorkDeadlockError { return -1 } catch { return -2 }
      }
    }
    queue.suspend()
    w.set(queue.add(name: "W", body("W", 0, waitsFor: t)))
    x.set(queue.add(name: "X", body("X", 1, waitsFor: w)))
    let f1 = queue.add(name: "F1", body("F1", 2, waitsFor: nil))
    let f2 = queue.add(name: "F2", body("F2", 3, waitsFor: nil))
    t.set(queue.add(name: "T", body("T", 4, waitsFor: x)))
    queue.resume()
    #expect(eventually(within: 60) { started.withLock { $0 } == ["W", "X", "F1", "F2"] })
    gates[0].open()  // W waits for unstarted T
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 1 })
    gates[2].open()  // F1 ends: T starts
    #expect(eventually(within: 60) { started.withLock { $0.contains("T") } })
    #expect(try f1.wait() == 0)
    gates[4].open()  // T waits for running X
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 2 })
    gates[1].open()  // X waits for W: a cycle
    let xDone = DispatchSemaphore(value: 0)
    x.get.whenCompleteErased { xDone.signal() }
    gates[3].open()
    #expect(try f2.wait() == 0)
    guard xDone.wait(timeout: .now() + 5 * hangBoundScale) == .success else {
      // W, T and X wait for one another: nothing can unblock them (their threads stay blocked).
      Issue.record("X's wait for W was allowed: W waits for T, T for X; the three bodies hang")
      return
    }
    #expect(try x.get.wait() == -1)
    #expect(try t.get.wait() == 0)
    #expect(try w.get.wait() == 1)
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 0 })
  }

  /// Width 3. T (with retries) waits for running W; then W waits for T, which is running (its body waits for W) but
  /// counts as needing a slot because it may be tried again. W and T wait for each other: W's wait must throw. The
  /// cycle walk stopped at once at a target that "needs a slot", and 2 stuck bodies of 3 were allowed: both hung.
  @Test func aCycleThroughRetriedWorkIsRefused() throws {
    let queue = WorkQueue(name: "r23.cycle.retry", maxConcurrent: 3)
    let started = Locked<Set<String>>([])
    let wGate = SpindleTestSupport.Gate()
    let tGate = SpindleTestSupport.Gate()
    let w = Box<Work<Int>>()
    let t = Box<Work<Int>>()
    queue.suspend()
    w.set(
      queue.add(name: "W") { () -> Int in
        started.withLock { _ = $0.insert("W") }
        wGate.wait(seconds: 10)
        do { return try t.get.wait() + 1 } catch is WorkDeadlockError { return -1 }
      })
    t.set(
      queue.add(name: "T", retry: .fixed(maxAttempts: 2)) { () -> Int in
        started.withLock { _ = $0.insert("T") }
        tGate.wait(seconds: 10)
        do { return try w.get.wait() + 10 } catch is WorkDeadlockError { return -10 }
      })
    queue.resume()
    #expect(eventually(within: 60) { started.withLock { $0 } == ["W", "T"] })
    tGate.open()
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 1 })
    wGate.open()
    let wDone = DispatchSemaphore(value: 0)
    w.get.whenCompleteErased { wDone.signal() }
    guard wDone.wait(timeout: .now() + 5 * hangBoundScale) == .success else {
      Issue.record("W's wait for T was allowed while T (retried) waits for W: both hang")
      return
    }
    #expect(try w.get.wait() == -1)
    #expect(try t.get.wait() == 9)
  }

  /// Width 3, lowered to 2 later. W waits for T while every slot is taken (T unstarted); a slot frees and T starts;
  /// then the width is lowered to 2 and N waits for unstarted U. T's body does not wait: T ends, W ends, and U gets
  /// N's spare slot, so N's wait ends. The check still counts W as stuck (T "needed a slot" when W began to wait) and
  /// refuses N's wait: 2 stuck of 2.
  @Test func aWaitForWorkThatStartedSinceIsNotStuckAfterTheWidthIsLowered() throws {
    let queue = WorkQueue(name: "r23.lowered", maxConcurrent: 3)
    let started = Locked<Set<String>>([])
    let gates = (0..<4).map { _ in SpindleTestSupport.Gate() }
    let t = Box<Work<Int>>()
    let u = Box<Work<Int>>()
    queue.suspend()
    let w = queue.add(name: "W") { () -> Int in
      started.withLock { _ = $0.insert("W") }
      gates[0].wait(seconds: 10)
      return try t.get.wait() + 1
    }
    let n = queue.add(name: "N") { () -> Int in
      started.withLock { _ = $0.insert("N") }
      gates[1].wait(seconds: 10)
      do { return try u.get.wait() + 100 } catch is WorkDeadlockError { return -1 }
    }
    let d = queue.add(name: "D") { () -> Int in
      started.withLock { _ = $0.insert("D") }
      gates[2].wait(seconds: 10)
      return 0
    }
    t.set(
      queue.add(name: "T") { () -> Int in
        started.withLock { _ = $0.insert("T") }
        gates[3].wait(seconds: 10)
        return 5
      })
    queue.resume()
    #expect(eventually(within: 60) { started.withLock { $0 } == ["W", "N", "D"] })
    gates[0].open()  // W waits for unstarted T
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 1 })
    gates[2].open()  // D ends: T starts
    #expect(try d.wait() == 0)
    #expect(eventually(within: 60) { started.withLock { $0.contains("T") } })
    queue.maxConcurrent = 2
    u.set(queue.add(name: "U") { 7 })
    gates[1].open()  // N waits for unstarted U
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 2 || n.state.isFinal })
    gates[3].open()  // T ends, then W; U gets a slot
    #expect(try w.wait() == 6)
    #expect(try n.wait() == 107, "N's wait for U was refused, yet it would have ended")
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 0 })
  }

  // MARK: - Work.wait(): a model of the wait graph

  /// A snapshot of a round's bodies, when nothing moves: each is unstarted, started and held at its gate, blocked in
  /// an allowed wait, or complete.
  struct Snapshot: CustomStringConvertible {
    var finished: Set<Int> = []
    var blocked: [Int: Int] = [:]
    var atGate: Set<Int> = []
    var unstarted: Set<Int> = []

    var description: String {
      "finished \(finished.sorted()), blocked \(blocked.sorted { $0.key < $1.key }.map { "\($0.key)→\($0.value)" }),"
        + " at gate \(atGate.sorted()), unstarted \(unstarted.sorted())"
    }
  }

  /// The reference model: whether `waiter`'s wait for `target` can end, in `width` slots. Bodies that are not blocked
  /// end (a later wait of theirs either ends or, refused, returns); a blocked body ends once its target has; unstarted
  /// work starts when fewer than `width` bodies hold slots. The wait can end when `target` ends in that closure.
  static func canEnd(waiter: Int, target: Int, width: Int, _ snapshot: Snapshot) -> Bool {
    var waiting = snapshot
    waiting.atGate.remove(waiter)
    waiting.blocked[waiter] = target
    return ends(width: width, waiting).contains(target)
  }

  /// The work of `snapshot` that ends in `width` slots (see ``canEnd(waiter:target:width:_:)``).
  static func ends(width: Int, _ snapshot: Snapshot) -> Set<Int> {
    var finished = snapshot.finished
    var blocked = snapshot.blocked
    var free = snapshot.atGate
    var unstarted = snapshot.unstarted
    var changed = true
    while changed {
      changed = false
      if !free.isEmpty {
        finished.formUnion(free)
        free = []
        changed = true
      }
      for (body, awaited) in blocked where finished.contains(awaited) {
        blocked[body] = nil
        free.insert(body)
        changed = true
      }
      while free.count + blocked.count < width, let next = unstarted.first {
        unstarted.remove(next)
        free.insert(next)
        changed = true
      }
    }
    return finished
  }

  enum Outcome: Sendable { case waited, refused, failed }

  /// Compares a wait's outcome with the model's verdict (`canEnd`), recording an issue where they disagree; counts
  /// the outcome in `refused` or `allowed`, and returns whether the model predicted a hang.
  static func judge(
    _ outcome: Outcome?, canEnd: Bool, waiter: Int, target: Int, context: String, now: some CustomStringConvertible,
    refused: inout Int, allowed: inout Int
  ) -> Bool {
    var predictedHang = false
    if outcome == .refused {
      refused += 1
      if canEnd {
        Issue.record(
          Comment(rawValue: "\(context): b\(waiter)'s wait for b\(target) was refused, yet it can end; \(now)"))
      }
    } else {
      allowed += 1
      if !canEnd {
        predictedHang = true
        Issue.record(
          Comment(rawValue: "\(context): b\(waiter)'s wait for b\(target) was allowed, yet it never ends; \(now)"))
      }
    }
    #expect(outcome != .failed, "\(context)")
    return predictedHang
  }

  /// Random small queues (width 1–4, 2–6 bodies) whose bodies each wait, or not, for one item of the queue; the test
  /// starts the waits one at a time (each body is held at a gate) and, before each, asks the model whether the wait
  /// can end. A refused wait must be one that can never end, an allowed one must be one that can, and no round hangs.
  @Test func theWaitCheckAgreesWithAModelOfTheWaitGraph() throws {
    // Fewer under a sanitizer (each round is some 30 times slower there).
    let rounds = Self.rounds ?? (hangBoundScale > 1 ? 100 : 400)
    let seed = Self.seed
    print("ReviewSession23Tests: the wait check against the model, seed \(seed) (SPINDLE_REVIEW_SEED replays it)")
    var random = SeededGenerator(seed: seed)
    var refused = 0
    var allowed = 0
    for round in 0..<rounds {
      var width = Int.random(in: 1...4, using: &random)
      let count = Int.random(in: 2...6, using: &random)
      // Now and then the width changes before a wait (lowered, bodies hold more slots than it for a while).
      let widthChanges = Int.random(in: 0..<3, using: &random) == 0
      // Mostly another item; now and then the body's own item.
      let plan: [Int?] = (0..<count).map { index in
        guard Int.random(in: 0..<10, using: &random) < 7 else { return nil }
        let target = Int.random(in: 0..<count, using: &random)
        return target == index && Int.random(in: 0..<4, using: &random) > 0 ? (index + 1) % count : target
      }
      let context =
        "round \(round) (seed \(seed), width \(width)\(widthChanges ? " changing" : ""), plan \(plan.map { $0.map(String.init) ?? "-" }))"
      let queue = WorkQueue(name: "r23.model.\(round)", maxConcurrent: width)
      let gates = (0..<count).map { _ in SpindleTestSupport.Gate() }
      let started = Locked<Set<Int>>([])
      let outcomes = Locked<[Int: Outcome]>([:])
      let items = Box<[Work<Int>]>()
      queue.suspend()
      var made: [Work<Int>] = []
      for index in 0..<count {
        let target = plan[index]
        let gate = gates[index]
        let run: @Sendable () -> Int = {
          started.withLock { _ = $0.insert(index) }
          gate.wait(seconds: 10)
          guard let target else { return index }
          let outcome: Outcome
          do {
            _ = try items.get[target].wait()
            outcome = .waited
          } catch is WorkDeadlockError {
            outcome = .refused
          } catch {
            outcome = .failed
          }
          outcomes.withLock { $0[index] = outcome }
          return index
        }
        // A synchronous body, or a callback body (its wait in the body; `finish` there or, later, on another thread).
        switch Int.random(in: 0..<3, using: &random) {
        case 0: made.append(queue.add(name: "b\(index)", run))
        case 1: made.append(queue.addCallback(name: "b\(index)") { finish in finish(run()) })
        default:
          made.append(
            queue.addCallback(name: "b\(index)") { finish in
              let value = run()
              DispatchQueue.global().async { finish(value) }
            })
        }
      }
      items.set(made)
      let ids = made.map(ObjectIdentifier.init)
      var opened: Set<Int> = []
      func snapshot() -> Snapshot? {
        let waiting = Self.waiters(queue)
        let starts = started.withLock { $0 }
        var snapshot = Snapshot()
        for index in 0..<count {
          if made[index].state.isFinal {
            snapshot.finished.insert(index)
          } else if !starts.contains(index) {
            snapshot.unstarted.insert(index)
          } else if !opened.contains(index) {
            snapshot.atGate.insert(index)
          } else if waiting.contains(ids[index]), let target = plan[index], !made[target].state.isFinal {
            // (Its target complete, the wait ends: the entry goes with the target's completion handlers.)
            snapshot.blocked[index] = target
          } else {
            return nil  // opened and on its way: not settled
          }
        }
        let holding = snapshot.atGate.count + snapshot.blocked.count
        // Unstarted work with a free slot is about to start.
        if !snapshot.unstarted.isEmpty && holding < width { return nil }
        return snapshot
      }
      queue.resume()
      var settled: Snapshot? = nil
      var predictedHang = false
      /// Waits until the bodies settle; records an issue and returns nil when they do not.
      func settle(_ what: String) -> Snapshot? {
        var latest: Snapshot? = nil
        guard
          eventually(
            within: 60,
            {
              latest = snapshot()
              return latest != nil
            }), let now = latest
        else {
          Issue.record(Comment(rawValue: "\(context): the bodies did not settle \(what)"))
          return nil
        }
        settled = now
        return now
      }
      while var now = settle("") {
        if now.finished.count == count { break }
        let newWidth = Int.random(in: 1...4, using: &random)
        // Only to a width in which the bodies blocked now can all end: a narrower one would deadlock them itself.
        if widthChanges && Bool.random(using: &random)
          && Self.ends(width: newWidth, now).isSuperset(of: now.blocked.keys)
        {
          width = newWidth
          queue.maxConcurrent = width
          // A wider queue starts unstarted work.
          guard let widened = settle("after the width became \(width)") else { break }
          now = widened
        }
        guard let next = now.atGate.sorted().randomElement(using: &random) else { break }
        let verdict = plan[next].map { Self.canEnd(waiter: next, target: $0, width: width, now) }
        opened.insert(next)
        gates[next].open()
        guard settle("once b\(next) was let go") != nil else { break }
        guard let target = plan[next], let canEnd = verdict else { continue }
        let outcome = outcomes.withLock { $0[next] }
        if Self.judge(
          outcome, canEnd: canEnd, waiter: next, target: target, context: context, now: now, refused: &refused,
          allowed: &allowed)
        {
          predictedHang = true
        }
      }
      if let settled, settled.finished.count < count {
        if !predictedHang {
          Issue.record(Comment(rawValue: "\(context): hung where the model saw no deadlock; \(settled)"))
        }
        // Unstarted work completes as cancelled, which ends the waits for it (a cycle of running bodies stays).
        queue.cancelAll()
        for gate in gates { gate.open() }
      }
      let done = Self.finishes(within: 60) { queue.waitUntilAllFinished() }
      #expect(done, "\(context): the queue did not finish")
      guard done else { continue }
      #expect(eventually(within: 60) { Self.blockedWaits(queue) == 0 && queue.runningCount == 0 }, "\(context)")
    }
    print(
      "ReviewSession23Tests: the wait check against the model: \(allowed) allowed, \(refused) refused (seed \(seed))")
  }

  // MARK: - Exclusive work asking for its key

  /// An event, reduced to what the order check looks at.
  typealias Seen = ReviewSession22Tests.Seen

  /// What is wrong with an item's events (see `WorkEvent`), or nil: `added`; per attempt one `willStart(n)` and one
  /// `started(n)`, a `retrying(n + 1)` between attempts; at most one `cancelRequested`, after a `started`; `finished`
  /// once, last. Also: as many `started` as the body ran (with `exact`; else at least as many: an `async` body's task
  /// cancelled before it began may not run the body).
  static func orderProblem(_ events: [Seen], runs: Int, exact: Bool) -> String? {
    guard events.first == .added else { return "does not begin with added" }
    guard events.last == .finished, events.filter({ $0 == .finished }).count == 1 else {
      return "finished is not last, or not once"
    }
    var attempt = 0
    var inAttempt = false
    var started = false
    var cancels = 0
    var expectWillStart = 1
    var starts = 0
    for event in events.dropFirst().dropLast() {
      switch event {
      case .willStart(let n):
        guard !inAttempt && n == expectWillStart else { return "willStart(\(n)) out of place" }
        attempt = n
        inAttempt = true
        started = false
      case .started(let n):
        guard inAttempt, !started, n == attempt else { return "started(\(n)) out of place" }
        started = true
        starts += 1
      case .retrying(let n):
        guard inAttempt, started, n == attempt + 1 else { return "retrying(\(n)) out of place" }
        inAttempt = false
        expectWillStart = n
      case .cancelRequested:
        cancels += 1
        guard started, cancels == 1 else { return "cancelRequested out of place, or twice" }
      case .added, .finished:
        return "\(event) repeated"
      }
    }
    return starts == runs || (!exact && starts > runs) ? nil : "\(starts) started for \(runs) runs of the body"
  }

  /// Exclusive items sharing a key on two queues (widths 1–3): synchronous, `async` and callback bodies (finishing on
  /// another thread), some failing and retried, cancelled at random moments (pending, in the key's line, between
  /// attempts, running). Never two bodies with the key at once; each item's events in order, one `started` per run of
  /// its body; at the end the key is free (no ended item holds it or stands in its line), no slot is lost and every
  /// completion came.
  @Test func exclusiveWorkOfEveryKindKeepsItsKeyAndSlotsStraight() async throws {
    let rounds = Self.rounds.map { max(1, $0 / 10) } ?? 30
    let seed = Self.seed
    print("ReviewSession23Tests: exclusive work of every kind, seed \(seed)")
    var random = SeededGenerator(seed: seed)
    var problems: [String] = []
    for round in 0..<rounds {
      let key = "r23.exclusive.\(round).\(seed)"
      let queues = [
        WorkQueue(name: "r23.exclusive.a.\(round)", maxConcurrent: Int.random(in: 1...3, using: &random)),
        WorkQueue(name: "r23.exclusive.b.\(round)", maxConcurrent: Int.random(in: 1...3, using: &random)),
      ]
      let log = Locked<[String: [Seen]]>([:])
      let observations = queues.map { queue in
        queue.observe { event in
          guard let name = event.work else { return }
          log.withLock { $0[name, default: []].append(Seen(event.kind)) }
        }
      }
      let inside = Locked(0)
      let overlaps = Locked(0)
      let runs = Locked<[String: Int]>([:])
      @Sendable func enter(_ name: String) {
        runs.withLock { $0[name, default: 0] += 1 }
        inside.withLock {
          $0 += 1
          if $0 > 1 { overlaps.withLock { $0 += 1 } }
        }
      }
      @Sendable func leave() { inside.withLock { $0 -= 1 } }
      let count = Int.random(in: 3...8, using: &random)
      var items: [Work<Int>] = []
      var asyncNames: Set<String> = []
      for index in 0..<count {
        let queue = queues[Int.random(in: 0...1, using: &random)]
        let name = "e\(index)"
        let failures = Locked(Int.random(in: 0...2, using: &random))
        let retry: WorkRetry? = Bool.random(using: &random) ? .fixed(maxAttempts: 3) : nil
        let spin = Int.random(in: 0..<300, using: &random)
        @Sendable func attempt() throws -> Int {
          enter(name)
          defer { leave() }
          let end = ContinuousClock.now + .microseconds(spin)
          while ContinuousClock.now < end {}
          let fails = failures.withLock { remaining in
            defer { remaining -= 1 }
            return remaining > 0
          }
          if fails { throw TestError.retry }
          return index
        }
        switch Int.random(in: 0..<3, using: &random) {
        case 0:
          items.append(queue.add(name: name, retry: retry, exclusive: key) { try attempt() })
        case 1:
          asyncNames.insert(name)
          items.append(
            queue.add(name: name, retry: retry, exclusive: key) { () async throws -> Int in
              await Task.yield()
              return try attempt()
            })
        default:
          items.append(
            queue.addCallback(name: name, retry: retry, exclusive: key) { (finish: WorkFinish<Int>) in
              DispatchQueue.global().async { finish(Result { try attempt() }) }
            })
        }
      }
      let cancelled = (0..<count).filter { _ in Int.random(in: 0..<4, using: &random) == 0 }
      let pause = Int.random(in: 0..<500, using: &random)
      let end = ContinuousClock.now + .microseconds(pause)
      while ContinuousClock.now < end {}
      for index in cancelled { items[index].cancel() }
      let all = items
      let done = await offPool { Self.finishes(within: 60) { for item in all { _ = try? item.wait() } } }
      guard done else {
        let states = items.map { "\($0.name ?? ""): \($0.state)" }.joined(separator: ", ")
        Issue.record(Comment(rawValue: "round \(round) (seed \(seed)): exclusive work hung: \(states)"))
        for item in items { item.cancel() }
        continue
      }
      // `wait()` can return a moment before the queue retired the work (which releases its key).
      for item in items {
        let released = await eventually(within: 60) { !ExclusivityRegistry.shared.isHeld(key, by: item) }
        #expect(released, "round \(round) (seed \(seed)): \(item.name ?? "") kept the key")
      }
      #expect(await eventually(within: 60) { queues.allSatisfy { $0.runningCount == 0 && $0.unfinishedCount == 0 } })
      for item in items {
        let name = item.name ?? ""
        let finishedSeen = await eventually { log.withLock { $0[name]?.last == .finished } }
        let events = log.withLock { $0[name] ?? [] }
        let problem =
          finishedSeen
          ? Self.orderProblem(
            events, runs: runs.withLock { $0[name, default: 0] }, exact: !asyncNames.contains(name)) : "no finished"
        if let problem, problems.count < 5 {
          problems.append("round \(round) \(name) (\(item.state)): \(problem): \(events)")
        }
      }
      #expect(overlaps.withLock { $0 } == 0, "round \(round) (seed \(seed)): two bodies held the key at once")
      // The key is free: new work with it runs at once on either queue.
      let after = queues[round % 2].add(name: "after", exclusive: key) { 7 }
      let afterDone = await offPool { Self.finishes(within: 60) { _ = try? after.wait() } }
      #expect(afterDone, "round \(round) (seed \(seed)): the key was left held")
      for observation in observations { observation.cancel() }
    }
    #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "; "))")
  }

  // MARK: - Work.wait(): work behind the waiter (once missed, and hung)

  /// The wait of a body: its work's value is the refusal's message, or "" when the wait returned.
  static func waitingBody(for target: Box<Work<Int>>, after gate: SpindleTestSupport.Gate? = nil)
    -> @Sendable () -> String
  {
    waitingBody(after: gate) { _ = try target.get.wait() }
  }

  /// The wait of a body (`wait`): its work's value is the refusal's message, or "" when the wait returned.
  static func waitingBody(after gate: SpindleTestSupport.Gate?, _ wait: @escaping @Sendable () throws -> Void)
    -> @Sendable () -> String
  {
    {
      gate?.wait(seconds: 10)
      do {
        try wait()
        return ""
      } catch let error as WorkDeadlockError {
        return "\(error)"
      } catch {
        return "other error: \(error)"
      }
    }
  }

  /// Waits (bounded) for `work`, whose body is expected to be refused; cancels `release` if it hangs instead.
  static func refusal(of work: Work<String>, release: AnyWork) throws -> String {
    let done = DispatchSemaphore(value: 0)
    work.whenCompleteErased { done.signal() }
    if done.wait(timeout: .now() + 2 * hangBoundScale) == .timedOut {
      Issue.record("the wait hangs")
      release.cancel()
      // A cycle of waits is not let go of by any cancel: its threads stay blocked, and the test goes on.
      guard done.wait(timeout: .now() + 5 * hangBoundScale) == .success else {
        Issue.record("cancelling did not let the wait go")
        return "hung"
      }
    }
    return try work.wait()
  }

  /// Width 2: A's body waits for X, which depends on A. X can only start after A ends: refused (it hung, with one of
  /// two slots counted stuck, before the check followed dependencies).
  @Test func aWaitForWorkThatDependsOnTheWaiterIsRefused() throws {
    let queue = WorkQueue(name: "r23.dependency", maxConcurrent: 2)
    let x = Box<Work<Int>>()
    queue.suspend()
    let a = queue.add(name: "A", Self.waitingBody(for: x))
    x.set(queue.add(name: "X", dependencies: [a]) { 1 })
    queue.resume()
    let message = try Self.refusal(of: a, release: x.get)
    #expect(
      message.contains("can only complete after this body ends") && message.contains("dependencies"), "\(message)")
    #expect(try x.get.wait() == 1)
  }

  /// The same through two more items, one of them on another queue: A ← Y (other queue) ← X; waits for work of
  /// another queue are checked for this too.
  @Test func aWaitForWorkThatDependsOnTheWaiterThroughAnotherQueueIsRefused() throws {
    let queue = WorkQueue(name: "r23.dependency.far", maxConcurrent: 4)
    let other = WorkQueue(name: "r23.dependency.other", maxConcurrent: 4)
    let x = Box<Work<Int>>()
    let y = Box<Work<Int>>()
    queue.suspend()
    let a = queue.add(name: "A", Self.waitingBody(for: y))
    x.set(other.add(name: "X", dependencies: [a]) { 1 })
    y.set(queue.add(name: "Y", dependencies: [x.get]) { 2 })
    queue.resume()
    let message = try Self.refusal(of: a, release: x.get)
    #expect(message.contains("dependencies"), "\(message)")
    #expect(try y.get.wait() == 2)
  }

  /// A wait for unrelated unstarted work of a wide queue is allowed, though the waiter has dependents: the walk does
  /// not refuse what it merely passes.
  @Test func aWaitForUnrelatedWorkWhileTheWaiterHasDependentsIsAllowed() throws {
    let queue = WorkQueue(name: "r23.dependency.unrelated", maxConcurrent: 2)
    let x = Box<Work<Int>>()
    queue.suspend()
    let a = queue.add(name: "A", Self.waitingBody(for: x))
    let dependents = (0..<20).map { index in queue.add(name: "D\(index)", dependencies: [a]) { index } }
    x.set(queue.add(name: "X") { 7 })
    queue.resume()
    #expect(try Self.refusal(of: a, release: x.get) == "")
    #expect(try dependents.map { try $0.wait() } == Array(0..<20))
  }

  /// Width 2: A runs; a barrier is added (it waits for A), then X (it waits for the barrier); A's body then waits for
  /// X, or for the barrier itself. Both can only run after A ends: refused (they hung).
  @Test(arguments: [false, true])
  func aWaitForWorkBehindABarrierAddedAfterTheWaiterIsRefused(forTheBarrier: Bool) throws {
    let queue = WorkQueue(name: "r23.barrier", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let target = Box<Work<Int>>()
    let barrierBox = Box<Work<Void>>()
    let a = queue.add(
      name: "A",
      Self.waitingBody(after: gate) {
        if forTheBarrier { try barrierBox.get.wait() } else { _ = try target.get.wait() }
      })
    #expect(eventually(within: 60) { a.state == .running })
    let barrier = queue.addBarrier(name: "barrier") {}
    barrierBox.set(barrier)
    let x = queue.add(name: "X") { 1 }
    target.set(x)
    gate.open()
    let message = try Self.refusal(of: a, release: x)
    let expected = forTheBarrier ? "dependencies" : "a barrier added after it"
    #expect(message.contains("can only complete after this body ends") && message.contains(expected), "\(message)")
    #expect(try x.wait() == 1)
  }

  /// Width 3: H holds key K and waits for running W; W waits for T, which needs K (in its line behind H). T needs H to
  /// end, H needs W, W needs T: W's wait is refused (it hung; only a key holder's own wait for work needing its key
  /// was refused).
  @Test func aCycleThroughAnExclusivityKeyIsRefused() throws {
    let key = "r23.key.cycle.\(UUID())"
    let queue = WorkQueue(name: "r23.key.cycle", maxConcurrent: 3)
    let hGate = SpindleTestSupport.Gate()
    let wGate = SpindleTestSupport.Gate()
    let w = Box<Work<Int>>()
    let t = Box<Work<Int>>()
    let wMessage = Box<String>()
    queue.suspend()
    let h = queue.add(name: "H", exclusive: key) { () -> Int in
      hGate.wait(seconds: 10)
      do { return try w.get.wait() } catch is WorkDeadlockError { return -1 } catch { return -2 }
    }
    w.set(
      queue.add(name: "W") { () -> Int in
        wGate.wait(seconds: 10)
        do {
          return try t.get.wait()
        } catch let error as WorkDeadlockError {
          wMessage.set("\(error)")
          return -1
        } catch {
          return -2
        }
      })
    queue.resume()
    // T is added once H holds the key: it waits in the key's line.
    #expect(eventually(within: 60) { h.state == .running && w.get.state == .running })
    t.set(queue.add(name: "T", exclusive: key) { 1 })
    #expect(eventually(within: 60) { t.get.state == .pending && queue.runningCount == 2 })
    hGate.open()
    #expect(eventually(within: 60) { Self.blockedWaits(queue) == 1 })
    wGate.open()
    let done = DispatchSemaphore(value: 0)
    w.get.whenCompleteErased { done.signal() }
    if done.wait(timeout: .now() + 2 * hangBoundScale) == .timedOut {
      Issue.record("W's wait for T (in the line of H's key, H waits for W) hangs")
      t.get.cancel()
    }
    #expect(try w.get.wait() == -1)
    let message = wMessage.get
    #expect(message.contains("exclusivity key") && message.contains("waiting"), "\(message)")
    #expect(try h.wait() == -1)
    #expect(try t.get.wait() == 1)
  }

  /// A on one queue waits for B on another, and B's body then waits for A: B's wait is refused (it hung: waits across
  /// queues were not followed), and A's returns B's value.
  @Test func bodiesOfTwoQueuesThatWouldWaitForEachOtherAreRefused() throws {
    let first = WorkQueue(name: "r23.cross.one", maxConcurrent: 2)
    let second = WorkQueue(name: "r23.cross.two", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let a = Box<Work<Int>>()
    let b = Box<Work<String>>()
    first.suspend()
    a.set(first.add(name: "A") { () -> Int in (try? b.get.wait()) == nil ? -2 : 1 })
    b.set(second.add(name: "B", Self.waitingBody(after: gate) { _ = try a.get.wait() }))
    first.resume()
    #expect(eventually(within: 60) { Self.bodyWaits(of: a.get) == 1 })
    gate.open()
    let message = try Self.refusal(of: b.get, release: a.get)
    #expect(message.contains("bodies would wait for each other"), "\(message)")
    guard message != "hung" else { return }
    #expect(try a.get.wait() == 1)
  }

  /// The same through three queues and a dependency: A (queue 1) waits for B (queue 2), B waits for C (queue 3), and
  /// C's body waits for D, which depends on A. Refused, saying both kinds of link.
  @Test func aCycleThroughThreeQueuesAndADependencyIsRefused() throws {
    let queues = (1...3).map { WorkQueue(name: "r23.cross.\($0)", maxConcurrent: 2) }
    let gate = SpindleTestSupport.Gate()
    let a = Box<Work<Int>>()
    let b = Box<Work<Int>>()
    let c = Box<Work<String>>()
    let d = Box<Work<Int>>()
    queues[0].suspend()
    queues[1].suspend()
    a.set(queues[0].add(name: "A") { (try? b.get.wait()) ?? -2 })
    b.set(queues[1].add(name: "B") { (try? c.get.wait()).map { $0.isEmpty ? 0 : 1 } ?? -2 })
    d.set(queues[1].add(name: "D", dependencies: [a.get]) { 4 })
    c.set(queues[2].add(name: "C", Self.waitingBody(after: gate) { _ = try d.get.wait() }))
    queues[0].resume()
    queues[1].resume()
    #expect(eventually(within: 60) { Self.bodyWaits(of: a.get) == 1 && Self.bodyWaits(of: b.get) == 1 })
    gate.open()
    let message = try Self.refusal(of: c.get, release: d.get)
    #expect(message.contains("dependencies") && message.contains("bodies waiting"), "\(message)")
    guard message != "hung" else { return }
    #expect(try a.get.wait() == 1)
    #expect(try d.get.wait() == 4)
  }

  /// How many waits of `work`'s bodies are recorded for the deadlock check.
  static func bodyWaits(of work: AnyWork) -> Int {
    var count = 0
    BodyWaits.shared.forEachTarget(of: work) { _ in count += 1 }
    return count
  }
}
