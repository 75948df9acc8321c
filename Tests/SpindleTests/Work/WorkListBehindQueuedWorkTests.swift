import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// A worker's retirement may leave the incoming list alone while the queue holds ready work of a priority at least as
/// high as anything ready on the list. These tests try to break what that must keep: a higher item added live starts
/// next (no queued lower item runs first, but those a retirement already chose), and items of one priority start
/// in the order they were added, whatever was queued and whatever waited on the list.
@Suite("WorkQueue engine: the list behind queued work", .offThePool)
struct WorkListBehindQueuedWorkTests {
  /// Spins for about `microseconds`.
  static func spin(_ microseconds: Int) {
    let end = ContinuousClock.now + .microseconds(microseconds)
    while ContinuousClock.now < end {}
  }

  @Test(
    "a higher item added while lower ready items are queued starts before them, but for those already chosen",
    arguments: [1, 2])
  func aHigherItemAddedLiveOvertakesTheQueuedLowerOnes(width: Int) {
    let rounds = Reliability.size(10, full: 50)
    let lows = 64
    var problems: [String] = []
    for round in 0..<rounds {
      let queue = WorkQueue(name: "behind.priority.\(width).\(round)", maxConcurrent: width)
      let order = TSanVisibleMutex<[Int]>([])
      // Every slot held by a blocked body: the lower items go on the list, and a critical section (the count's) queues
      // them all; then the higher item goes on the list, behind them.
      let gate = DispatchSemaphore(value: 0)
      let held = DispatchSemaphore(value: 0)
      // Lowest priority, so that the flag they raise (the highest priority on the list) is below the lower items' and
      // only the higher item's raise makes the retirements take the list.
      for _ in 0..<width {
        queue.add(priority: .veryLow) {
          held.signal()
          gate.wait()
        }
      }
      for _ in 0..<width { held.wait() }
      // Each lower item notes, as it starts, whether the list still holds something (only the higher item can be
      // there): the choice itself, which the order of the records shows only at width 1 (at width 2, the worker that
      // chose the higher item can be descheduled before it records, while the other starts lower ones; helper-56).
      let startedBesideTheList = TSanVisibleMutex(0)
      for index in 0..<lows {
        queue.add(priority: .low) {
          if queue.engine.hasIncoming { startedBesideTheList.withLock { $0 += 1 } }
          order.withLock { $0.append(index) }
          Self.spin(100)
        }
      }
      #expect(queue.unfinishedCount == width + lows)
      queue.add(priority: .high) { order.withLock { $0.append(-1) } }
      for _ in 0..<width { gate.signal() }
      // Polled without the queue's lock: every critical section but a retirement takes the list (a wait would queue
      // the higher item itself).
      _ = eventually(within: 60) { order.withLock { $0.count } == lows + 1 }
      queue.waitUntilAllFinished()
      let seen = order.withLock { $0 }
      guard let high = seen.firstIndex(of: -1) else {
        problems.append("round \(round): the high item never ran")
        continue
      }
      // The retirements of the blocked bodies see the higher item's flag, and the first takes it off the list: at
      // most one lower item per worker is chosen before that (at width 1, none, and the order shows it).
      let beside = startedBesideTheList.withLock { $0 }
      if beside > width - 1 {
        problems.append("round \(round): \(beside) lower items started while the higher one waited on the list")
      }
      if width == 1 && high != 0 {
        problems.append("round \(round): \(high) lower items started before the high one, which was added before them")
      }
    }
    #expect(problems.isEmpty, "\(problems.prefix(5))")
  }

  /// At width 1 (one worker, so the order bodies start in is the order they were chosen).
  @Test("items of one priority added live among others start in the order they were added")
  func itemsOfOnePriorityKeepTheirOrderWhateverWasQueued() {
    let width = 1
    let count = Reliability.size(3_000, full: 20_000)
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    let queue = WorkQueue(name: "behind.fifo.\(width)", maxConcurrent: width)
    let order = TSanVisibleMutex<[Int]>([])
    var priorities: [WorkPriority] = []
    for index in 0..<count {
      let priority = WorkPriority.allCases[Int(random.next() % UInt64(WorkPriority.allCases.count))]
      priorities.append(priority)
      let work = Int(random.next() % 20)
      queue.add(priority: priority) {
        order.withLock { $0.append(index) }
        Self.spin(work)
      }
      if random.next() % 64 == 0 { Self.spin(Int(random.next() % 200)) }  // let the queue drain now and then
    }
    queue.waitUntilAllFinished()
    let seen = order.withLock { $0 }
    #expect(seen.count == count)
    var lastOf: [WorkPriority: Int] = [:]
    var problems: [String] = []
    for (position, index) in seen.enumerated() {
      let priority = priorities[index]
      if let last = lastOf[priority], last > index, problems.count < 5 {
        problems.append("item \(index) (\(priority)) started after item \(last) at position \(position)")
      }
      lastOf[priority] = max(lastOf[priority] ?? -1, index)
    }
    #expect(problems.isEmpty, "seed \(seed): \(problems)")
  }

  /// Width 1: B runs (blocked); Q is queued, D waits for B, and I is added after them, on the list. When B retires it
  /// makes D ready, and the queue holds Q, of D's priority: the list must be taken all the same, so that I, ready
  /// since its add, starts before D, ready only now (first in first out by the moment an item became ready).
  @Test func anItemReadyOnTheListStartsBeforeADependentThatTheRetirementReadies() throws {
    for round in 0..<Reliability.size(20, full: 100) {
      let queue = WorkQueue(name: "behind.dependent.\(round)", maxConcurrent: 1)
      let order = TSanVisibleMutex<[String]>([])
      let gate = DispatchSemaphore(value: 0)
      let running = DispatchSemaphore(value: 0)
      let b = queue.add { () -> Int in
        running.signal()
        gate.wait()
        return 0
      }
      running.wait()
      queue.add { order.withLock { $0.append("Q") } }
      queue.add(after: b) { _ in order.withLock { $0.append("D") } }
      #expect(queue.unfinishedCount == 3)  // Q queued, D registered (waiting)
      queue.add { order.withLock { $0.append("I") } }
      gate.signal()
      // Polled without the queue's lock (any other critical section would take the list itself).
      _ = eventually(within: 60) { order.withLock { $0.count } == 3 }
      queue.waitUntilAllFinished()
      let seen = order.withLock { $0 }
      #expect(seen == ["Q", "I", "D"], "round \(round): \(seen)")
      if seen != ["Q", "I", "D"] { break }
    }
  }
}

/// After a retirement that left a ready item on the list (queued work of at least its priority ran next), every way a
/// slot can free up or be added must still start the listed item; adders on several threads hide nothing; live adds
/// start highest priority first. Adapted from helper-56's review of the step.
@Suite("WorkQueue engine: the list left behind, after a skip", .offThePool)
struct WorkListLeftBehindTests {
  enum Then: String, CaseIterable { case raiseWidth, suspendResume, exclusiveParks, hold }

  /// Width 1: B runs (blocked); X is queued (blocked once it runs); I goes on the list (flagged). B retires: the queue
  /// holds X, of I's priority, so the retirement skips the list and runs X. Then `then` frees or adds a slot while X
  /// is still blocked (or X parks on a key another queue holds): I must start.
  @Test(arguments: Then.allCases)
  func theListedItemStartsAfterASkip(then: Then) {
    var skips = 0
    var problems: [String] = []
    for round in 0..<Reliability.size(20, full: 100) {
      let queue = WorkQueue(name: "left-behind.\(then).\(round)", maxConcurrent: 1)
      let other = WorkQueue(name: "left-behind.key.\(round)", maxConcurrent: 1)
      let key = "left-behind.key.\(round)"
      let keyHeld = DispatchSemaphore(value: 0)
      let keyGate = DispatchSemaphore(value: 0)
      if then == .exclusiveParks {
        other.add(exclusive: key) {
          keyHeld.signal()
          keyGate.wait()
        }
        keyHeld.wait()
      }
      let gateB = DispatchSemaphore(value: 0)
      let gateX = DispatchSemaphore(value: 0)
      let running = DispatchSemaphore(value: 0)
      let xStarted = DispatchSemaphore(value: 0)
      let iRan = DispatchSemaphore(value: 0)
      queue.add {
        running.signal()
        gateB.wait()
      }
      running.wait()
      if then == .exclusiveParks {
        queue.add(exclusive: key) {
          xStarted.signal()
          gateX.wait()
        }
      } else {
        queue.add {
          xStarted.signal()
          gateX.wait()
        }
      }
      #expect(queue.unfinishedCount == 2)  // X registered and queued
      queue.add { iRan.signal() }  // I: on the list, flag raised
      gateB.signal()
      if then == .exclusiveParks {
        WorkListBehindQueuedWorkTests.spin(10_000)  // X parks on the key (its worker takes the list then)
      } else {
        xStarted.wait()
        if queue.engine.hasIncoming { skips += 1 }
        switch then {
        case .raiseWidth: queue.maxConcurrent = 2
        case .suspendResume:
          queue.suspend()
          gateX.signal()
          WorkListBehindQueuedWorkTests.spin(5_000)
          queue.resume()
        case .hold:
          queue.batch {
            gateX.signal()
            WorkListBehindQueuedWorkTests.spin(5_000)
          }
        case .exclusiveParks: break
        }
      }
      if iRan.wait(timeout: .now() + 60 * hangBoundScale) == .timedOut {
        problems.append("round \(round): I never started")
      }
      gateX.signal()
      keyGate.signal()
      queue.waitUntilAllFinished()
      other.waitUntilAllFinished()
      if !problems.isEmpty { break }
    }
    #expect(problems.isEmpty, "\(then): \(problems)")
    if then != .exclusiveParks { #expect(skips > 0, "the skip path was never taken") }
  }

  /// Several threads add items of random priorities while the workers retire: every item runs (nothing hidden), and
  /// the queue drains without a wait taking the list first (polled without the lock).
  @Test(arguments: [1, 2, 3])
  func itemsAddedFromSeveralThreadsAllRun(width: Int) {
    let queue = WorkQueue(name: "left-behind.adders.\(width)", maxConcurrent: width)
    let count = Reliability.size(20_000, full: 200_000)
    let adders = 3
    let done = TSanVisibleMutex<Int>(0)
    DispatchQueue.concurrentPerform(iterations: adders) { adder in
      var random = Reliability.Random(seed: UInt64(adder + 1) &* 0x9E37_79B9)
      for _ in 0..<count / adders {
        let priority = WorkPriority.allCases[Int(random.next() % 5)]
        let spin = Int(random.next() % 3)
        queue.add(priority: priority) {
          if spin > 0 { WorkListBehindQueuedWorkTests.spin(spin) }
          done.withLock { $0 += 1 }
        }
      }
    }
    let drained = eventually(within: 60 * hangBoundScale) { done.withLock { $0 } == (count / adders) * adders }
    #expect(drained, "only \(done.withLock { $0 }) of \((count / adders) * adders) ran without a wait")
    queue.waitUntilAllFinished()
  }

  /// Width 1, one adder, random priorities added live while the worker runs: after an add of priority p returned, at
  /// most the one item already chosen (plus one for a descheduled recorder) of a lower priority starts before it.
  @Test func liveAddsOfRandomPrioritiesStartHighestFirstAtWidthOne() {
    let n = Reliability.size(4_000, full: 40_000)
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    let queue = WorkQueue(name: "left-behind.order", maxConcurrent: 1)
    let order = TSanVisibleMutex<[Int]>([])
    var marks = [Int](repeating: 0, count: n)
    var priorities: [Int] = []
    for index in 0..<n {
      let priority = WorkPriority.allCases[Int(random.next() % 5)]
      priorities.append(priority.rawValue)
      let work = Int(random.next() % 10)
      queue.add(priority: priority) {
        order.withLock { $0.append(index) }
        WorkListBehindQueuedWorkTests.spin(work)
      }
      marks[index] = order.withLock { $0.count }
      if random.next() % 128 == 0 { WorkListBehindQueuedWorkTests.spin(Int(random.next() % 300)) }
    }
    // Polled without the queue's lock (a wait takes the list itself).
    _ = eventually(within: 120) { order.withLock { $0.count } == n }
    queue.waitUntilAllFinished()
    let seen = order.withLock { $0 }
    #expect(seen.count == n)
    var position = [Int](repeating: -1, count: n)
    for (at, index) in seen.enumerated() { position[index] = at }
    var problems: [String] = []
    for h in 0..<n where position[h] >= 0 {
      var overtaking = 0
      if marks[h] < position[h] {
        for at in marks[h]..<position[h] where priorities[seen[at]] < priorities[h] { overtaking += 1 }
      }
      if overtaking > 2 && problems.count < 5 {
        problems.append(
          "item \(h) (priority \(priorities[h])): \(overtaking) lower items started after its add, before it")
      }
    }
    #expect(problems.isEmpty, "seed \(seed): \(problems)")
  }
}
