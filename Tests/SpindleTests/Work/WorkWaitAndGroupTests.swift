import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// `Work.wait()`'s deadlock check and groups, against cases a review found wrong: a finished wait still counted as
/// blocked, a running exclusive item counted as unstarted, a group timing out after all of its members finished, and
/// what is (and is not) a member of a group.
@Suite("Work: waits and groups", .serialized)
struct WorkWaitAndGroupTests {
  /// Holds a value set after the item that reads it was added.
  final class Box<Value: Sendable>: Sendable {
    private let value = Locked<Value?>(nil)
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
    var get: Value { value.withLock { $0 }! }
  }

  /// Width 2: body B waits for X; the other slot runs X and then Y, whose body waits for Z. When Y checks, B's wait
  /// has ended (X completed) even if B's thread has not woken yet, so one slot is not blocked and Y's wait must be
  /// allowed: B returns, and its slot runs Z. Counting B's finished wait threw `WorkDeadlockError` at Y.
  @Test func aWaitThatEndedIsNotCountedAsBlocked() throws {
    let rounds = ProcessInfo.processInfo.environment["SPINDLE_ADVERSARIAL_ROUNDS"].flatMap(Int.init) ?? 40
    for round in 0..<rounds {
      let queue = WorkQueue(name: "wait.ended.\(round)", maxConcurrent: 2)
      let gate = SpindleTestSupport.Gate()
      let waiting = SpindleTestSupport.Gate()
      let x = Box<Work<Int>>()
      let z = Box<Work<Int>>()
      queue.suspend()
      let g = queue.add(name: "G") { () -> Int in
        gate.wait()
        return 0
      }
      let b = queue.add(name: "B") { () -> Int in
        waiting.open()
        return try x.get.wait() + 1
      }
      x.set(queue.add(name: "X") { 1 })
      let y = queue.add(name: "Y") { () -> Int in try z.get.wait() + 10 }
      z.set(queue.add(name: "Z") { 3 })
      queue.resume()
      #expect(waiting.wait())
      // B has (almost surely) made its check by now; the gate lets the other slot go on to X, then Y.
      gate.open()
      #expect(try g.wait() == 0)
      #expect(try b.wait() == 2, "round \(round)")
      #expect(try y.wait() == 13, "round \(round)")
    }
  }

  /// A running exclusive item holds its key and runs its body to the end: it needs no slot again, so a body of the
  /// same queue may wait for it even when that body's slot is the queue's last (here after `maxConcurrent` was lowered
  /// to 1). It used to count as unstarted (it could park for its key) and the wait threw.
  @Test func waitingForARunningExclusiveItemNeedsNoFreeSlot() throws {
    let queue = WorkQueue(name: "wait.exclusive", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let running = SpindleTestSupport.Gate()
    let exclusive = queue.add(exclusive: "wait.exclusive.\(UUID())") { () -> Int in
      running.open()
      gate.wait()
      return 7
    }
    #expect(running.wait())
    let waitingStarted = SpindleTestSupport.Gate()
    let waiting = queue.add(name: "waiter") { () -> Int in
      queue.maxConcurrent = 1
      waitingStarted.open()
      return try exclusive.wait() + 1
    }
    #expect(waitingStarted.wait())
    gate.open()
    #expect(try waiting.wait() == 8)
  }

  /// The same check still refuses a wait that cannot end: the exclusive item has not started and the waiting body
  /// holds the queue's only slot.
  @Test func waitingForAnUnstartedExclusiveItemOnASerialQueueStillThrows() throws {
    let queue = WorkQueue(name: "wait.exclusive.serial", maxConcurrent: 1)
    queue.suspend()
    let later = queue.add(exclusive: "wait.exclusive.serial.\(UUID())") { 1 }
    let first = queue.add(name: "first", priority: .veryHigh) { try later.wait() + 1 }
    queue.resume()
    #expect(throws: WorkDeadlockError.self) { try first.wait() }
    #expect(try later.wait() == 1)
  }

  /// A group whose members all finished in time succeeds, even when its own closing item could not get a slot
  /// before the timeout ran out (here the only slot is taken by unrelated work of a higher priority, added by the last
  /// member). It used to fail with `WorkTimeoutError`. The timeout (1 s) leaves the four members time to finish on a
  /// loaded host; the test then holds the slot until past the deadline.
  @Test func aGroupWhoseMembersFinishedInTimeDoesNotTimeOut() throws {
    let queue = WorkQueue(name: "group.in-time", maxConcurrent: 1)
    let hold = SpindleTestSupport.Gate()
    let blocking = SpindleTestSupport.Gate()
    let blocker = Box<Work<Int>>()
    let deadline = ContinuousClock.now + .seconds(1)
    let album = queue.group(name: "album", timeout: .seconds(1)) { group in
      let parts = (0..<3).map { i in group.add { i } }
      return group.add(afterAll: parts) { (values: [Int]) -> Int in
        blocker.set(
          queue.add(name: "blocker", priority: .veryHigh) { () -> Int in
            blocking.open()
            hold.wait()
            return 0
          })
        return values.reduce(0, +)
      }
    }
    #expect(blocking.wait())
    // Past the timeout (and the timer's moment after it) while the group's closing item waits for the slot.
    while ContinuousClock.now < deadline + .milliseconds(200) { Thread.sleep(forTimeInterval: 0.01) }
    hold.open()
    #expect(try blocker.get.wait() == 0)
    #expect(try album.wait() == 3)
  }

  /// The timeout still fails a group whose members have not finished.
  @Test func aGroupWithUnfinishedMembersStillTimesOut() throws {
    let queue = WorkQueue(name: "group.late", maxConcurrent: 2)
    let hold = SpindleTestSupport.Gate()
    let album = queue.group(name: "late", timeout: .milliseconds(100)) { group in
      group.add { () -> Int in
        hold.wait(seconds: 5)
        return 1
      }
    }
    #expect(throws: WorkTimeoutError.self) { try album.wait() }
    hold.open()
  }

  /// Membership is what the docs say: items added through the group and the item `build` returns; work added
  /// straight to the queue inside `build` is not cancelled with the group nor counted in its progress.
  @Test func onlyWhatIsAddedThroughTheGroupIsAMember() throws {
    let queue = WorkQueue(name: "group.members", maxConcurrent: 1)
    queue.suspend()
    let outside = Box<Work<Int>>()
    let album = queue.group(name: "album") { group in
      outside.set(queue.add(name: "outside") { 1 })
      let inside = group.add(name: "inside") { 2 }
      return queue.add(name: "final", after: inside) { $0 * 10 }
    }
    #expect(album.progress.total == 2)  // "inside" and "final"
    album.cancel()
    queue.resume()
    #expect(try outside.get.wait() == 1)
    #expect(throws: CancellationError.self) { try album.wait() }
  }

  // MARK: - Chains and cycles of waits

  static func blockedWaits(_ queue: WorkQueue) -> Int {
    queue.engine.withState { $0.blockedWaits.count }
  }

  /// Width 2: A waits for running B, and then B for unstarted C. Both slots are blocked and C never gets one, so B's
  /// wait must throw. A wait for running work was not counted at all: B's wait was allowed and the queue hung.
  @Test func aChainOfWaitsThatBlocksEverySlotIsRefused() throws {
    let queue = WorkQueue(name: "wait.chain", maxConcurrent: 2)
    let bRunning = SpindleTestSupport.Gate()
    let b = Box<Work<Int>>()
    let c = Box<Work<Int>>()
    queue.suspend()
    let a = queue.add(name: "A") { () -> Int in
      bRunning.wait(seconds: 10)
      return try b.get.wait() * 10
    }
    b.set(
      queue.add(name: "B") { () -> Int in
        bRunning.open()
        // A's wait for this (running) work is counted before this body waits.
        _ = eventually { Self.blockedWaits(queue) == 1 }
        do { return try c.get.wait() } catch is WorkDeadlockError { return -1 }
      })
    c.set(queue.add(name: "C") { 3 })
    queue.resume()
    let bDone = DispatchSemaphore(value: 0)
    b.get.whenCompleteErased { bDone.signal() }
    guard bDone.wait(timeout: .now() + 5 * hangBoundScale) == .success else {
      Issue.record("B's wait for C was allowed: A waits for B, B for C, and C has no slot")
      c.get.cancel()  // lets B, then A, go
      _ = try? a.wait()
      return
    }
    #expect(try b.get.wait() == -1)
    #expect(try a.wait() == -10)
    #expect(try c.get.wait() == 3)
    #expect(eventually { Self.blockedWaits(queue) == 0 })
  }

  /// Width 3, a slot to spare: A waits for running B, and then B for running A. They wait for each other whatever the
  /// free slots, so B's wait must throw (it hung).
  @Test func bodiesThatWouldWaitForEachOtherAreRefused() throws {
    let queue = WorkQueue(name: "wait.cycle", maxConcurrent: 3)
    let bothRunning = DispatchGroup()
    bothRunning.enter()
    bothRunning.enter()
    let a = Box<Work<Int>>()
    let b = Box<Work<Int>>()
    queue.suspend()
    a.set(
      queue.add(name: "A") { () -> Int in
        bothRunning.leave()
        _ = bothRunning.wait(timeout: .now() + 10)
        return try b.get.wait() * 10
      })
    b.set(
      queue.add(name: "B") { () -> Int in
        bothRunning.leave()
        _ = bothRunning.wait(timeout: .now() + 10)
        _ = eventually { Self.blockedWaits(queue) == 1 }
        do { return try a.get.wait() } catch let error as WorkDeadlockError {
          #expect("\(error)".contains("wait for each other"), "\(error)")
          return -1
        }
      })
    queue.resume()
    let bDone = DispatchSemaphore(value: 0)
    b.get.whenCompleteErased { bDone.signal() }
    guard bDone.wait(timeout: .now() + 5 * hangBoundScale) == .success else {
      Issue.record("B's wait for A was allowed while A waits for B: both hang")
      return
    }
    #expect(try b.get.wait() == -1)
    #expect(try a.get.wait() == -10)
  }

  /// A body waiting for running work whose body does not wait is not stuck: that work ends. Here the width is lowered
  /// from 3 to 2 while A, B and E run; A waits for running B, and E for unstarted C. Counting A as blocked would refuse
  /// E's wait (2 of 2), yet B ends, then A, and C gets their slot: E's wait must be allowed, and it ends.
  @Test func aWaitForRunningWorkThatDoesNotWaitIsNotStuck() throws {
    let queue = WorkQueue(name: "wait.not.stuck", maxConcurrent: 3)
    let allRunning = DispatchGroup()
    for _ in 0..<3 { allRunning.enter() }
    let release = SpindleTestSupport.Gate()
    let b = Box<Work<Int>>()
    let c = Box<Work<Int>>()
    queue.suspend()
    let a = queue.add(name: "A") { () -> Int in
      allRunning.leave()
      _ = allRunning.wait(timeout: .now() + 10)
      return try b.get.wait() * 10
    }
    b.set(
      queue.add(name: "B") { () -> Int in
        allRunning.leave()
        release.wait(seconds: 10)
        return 2
      })
    let e = queue.add(name: "E") { () -> Int in
      allRunning.leave()
      _ = allRunning.wait(timeout: .now() + 10)
      _ = eventually { Self.blockedWaits(queue) == 1 }
      do { return try c.get.wait() + 100 } catch is WorkDeadlockError { return -1 }
    }
    c.set(queue.add(name: "C") { 3 })
    queue.resume()
    #expect(allRunning.wait(timeout: .now() + 10) == .success)
    queue.maxConcurrent = 2
    #expect(eventually { Self.blockedWaits(queue) == 2 })
    release.open()
    #expect(try a.wait() == 20)
    #expect(try e.wait() == 103)
    #expect(try c.get.wait() == 3)
  }
}
