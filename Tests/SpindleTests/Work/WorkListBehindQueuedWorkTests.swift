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
    let rounds = Reliability.size(20, full: 100)
    let lows = 64
    var problems: [String] = []
    for round in 0..<rounds {
      let queue = WorkQueue(name: "behind.priority.\(width).\(round)", maxConcurrent: width)
      let order = TSanVisibleMutex<[Int]>([])
      // Every slot held: the lower items below go on the list, and the first retirement queues them all.
      let gates = (0..<width).map { _ in DispatchSemaphore(value: 0) }
      let held = DispatchSemaphore(value: 0)
      for gate in gates {
        queue.add(priority: .veryLow) {
          held.signal()
          gate.wait()
        }
      }
      for _ in 0..<width { held.wait() }
      for index in 0..<lows {
        queue.add(priority: .low) {
          order.withLock { $0.append(index) }
          Self.spin(50)
        }
      }
      for gate in gates { gate.signal() }
      // Some lower items have run: the rest are queued, and the workers retire one after another.
      _ = eventually(within: 60) { order.withLock { $0.count } >= 4 }
      queue.add(priority: .high) { order.withLock { $0.append(-1) } }
      let mark = order.withLock { $0.count }
      queue.waitUntilAllFinished()
      let seen = order.withLock { $0 }
      guard let high = seen.firstIndex(of: -1) else {
        problems.append("round \(round): the high item never ran")
        continue
      }
      // Started after the add returned and before the high item: at most one per worker, whose retirement read the
      // list's state before the add.
      let overtaking = max(0, high - mark)
      if overtaking > width {
        problems.append("round \(round): \(overtaking) lower items started after the high one was added, before it")
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
}
