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
      for _ in 0..<width {
        queue.add(priority: .veryHigh) {
          held.signal()
          gate.wait()
        }
      }
      for _ in 0..<width { held.wait() }
      for index in 0..<lows {
        queue.add(priority: .low) {
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
      // The retirements of the blocked bodies see the higher item's flag: it starts first. At width 2 the other worker
      // may start a lower item meanwhile; slack of two for a worker descheduled between choosing and recording.
      if high > width + 1 {
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
