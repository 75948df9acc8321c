import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// `try await work.value` and `await queue.allFinished()` awaited by an `async` body: the body holds its slot while it
/// awaits, so an await that could never end throws `WorkDeadlockError` as `Work.wait()` does, and only the body's own
/// task is checked (a task it started may outlive it). Each of the refused awaits hung before they were checked: the
/// outcomes are read with a bound, and "hung" fails the test instead of hanging it.
@Suite("Work: awaits of async bodies", .serialized, .offThePool)
struct AwaitCheckTests {
  typealias Box = ReviewSession24Tests.Box
  typealias Slot = ReviewSession24Tests.Slot

  /// What an await did: "value N", "refused: …" or "error: …".
  static func outcome(of work: Work<Int>) async -> String {
    do {
      return "value \(try await work.value)"
    } catch let error as WorkDeadlockError {
      return "refused: \(error)"
    } catch {
      return "error: \(error)"
    }
  }

  /// What `AnyWork.isBodyTask` stands on: a `Task` handle hashes like the `UnsafeCurrentTask` of its own task, and not
  /// like another task's. Should the standard library change that, every `async` body's awaits would go unchecked (no
  /// false refusal); this test says so first.
  @Test func aTaskHandleHashesLikeItsOwnCurrentTask() async {
    let inside = Locked<[Int]>([])
    let tasks = (0..<8).map { _ in
      Task { withUnsafeCurrentTask { task in inside.withLock { $0.append(task?.hashValue ?? 0) } } }
    }
    for task in tasks { await task.value }
    let handles = Set(tasks.map(\.hashValue))
    #expect(handles.count == tasks.count)
    #expect(Set(inside.withLock { $0 }) == handles)
  }

  @Test func anAsyncBodyAwaitingItsOwnWorkIsRefused() {
    let queue = WorkQueue(name: "await.own", maxConcurrent: 2)
    let me = Box<Work<Int>>()
    let result = Slot()
    queue.suspend()
    me.set(
      queue.add(name: "A") { () async -> Int in
        result.set(await Self.outcome(of: me.get))
        return 1
      })
    queue.resume()
    let outcome = result.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("its own work"), "\(outcome)")
  }

  /// X, on another queue, depends on the awaiting body's work A: it can only run after A ends.
  @Test func anAsyncBodyAwaitingADependentOfItsWorkIsRefused() async throws {
    let queue = WorkQueue(name: "await.dependent", maxConcurrent: 2)
    let other = WorkQueue(name: "await.dependent.other", maxConcurrent: 2)
    let x = Box<Work<Int>>()
    let result = Slot()
    queue.suspend()
    let a = queue.add(name: "A") { () async -> Int in
      result.set(await Self.outcome(of: x.get))
      return 1
    }
    x.set(other.add(name: "X", after: a) { $0 + 1 })
    queue.resume()
    let outcome = result.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("dependencies"), "\(outcome)")
    #expect(try await x.get.value == 2)
  }

  /// Width 1: `later` was added first, but A (higher priority) runs first and awaits it while holding the only slot.
  @Test func anAsyncBodyOfASerialQueueAwaitingUnstartedWorkOfItsQueueIsRefused() async throws {
    let queue = WorkQueue(name: "await.serial", maxConcurrent: 1)
    let result = Slot()
    queue.suspend()
    let later = queue.add(name: "L", priority: .veryLow) { 2 }
    _ = queue.add(name: "A", priority: .veryHigh) { () async -> Int in
      result.set(await Self.outcome(of: later))
      return 1
    }
    queue.resume()
    let outcome = result.await() ?? "hung"
    #expect(outcome.hasPrefix("refused:") && outcome.contains("serial"), "\(outcome)")
    #expect(try await later.value == 2)
  }

  /// Width 2: A awaits B, which runs in the other slot and ends by itself: allowed, and the value arrives.
  @Test func anAsyncBodyAwaitingRunningWorkOfItsQueueGetsTheValue() async throws {
    let queue = WorkQueue(name: "await.running", maxConcurrent: 2)
    let gate = SpindleTestSupport.Gate()
    let result = Slot()
    let b = queue.add(name: "B") { () -> Int in
      gate.wait(seconds: 10)
      return 2
    }
    #expect(await eventually(within: 60) { b.state == .running })
    _ = queue.add(name: "A") { () async -> Int in
      result.set(await Self.outcome(of: b))
      return 1
    }
    #expect(await eventually(within: 60) { ReviewSession23Tests.blockedWaits(queue) == 1 })
    gate.open()
    #expect(result.await() == "value 2")
    try await queue.allFinished()
    #expect(ReviewSession23Tests.blockedWaits(queue) == 0)
  }

  /// A sync body on one queue waits for an async body on another, which awaits the first: whichever waits second is
  /// refused (here the sync body: A's await is recorded first), and both then end.
  @Test func aCycleOfASyncWaitAndAnAsyncAwaitAcrossQueuesIsRefused() async throws {
    let first = WorkQueue(name: "await.cycle.1", maxConcurrent: 2)
    let second = WorkQueue(name: "await.cycle.2", maxConcurrent: 2)
    let sGate = SpindleTestSupport.Gate()
    let awaiting = SpindleTestSupport.Gate()
    let s = Box<Work<Int>>()
    let a = Box<Work<Int>>()
    let sResult = Slot()
    let aResult = Slot()
    first.suspend()
    second.suspend()
    s.set(
      first.add(name: "S") { () -> Int in
        sGate.wait(seconds: 10)
        sResult.set(ReviewSession24Tests.outcome(of: a.get))
        return 1
      })
    a.set(
      second.add(name: "A") { () async -> Int in
        awaiting.open()
        aResult.set(await Self.outcome(of: s.get))
        return 2
      })
    first.resume()
    second.resume()
    #expect(awaiting.wait(seconds: 5))
    // A's await is recorded before it suspends; give it the moment between the gate and the record.
    #expect(await eventually(within: 60) { a.get.state == .running && Self.isRecorded(a.get, waitingFor: s.get) })
    sGate.open()
    let sOutcome = sResult.await() ?? "hung"
    #expect(sOutcome.hasPrefix("refused:") && sOutcome.contains("each other"), "\(sOutcome)")
    #expect(aResult.await() == "value 1")
  }

  /// A task that an `async` body started awaits the body's own work and a dependent of it while the body runs: the body
  /// returns without awaiting the task, so both awaits end. Not refused: only the body's own task is checked.
  @Test func aTaskAnAsyncBodyStartedMayAwaitItsWorkAndItsDependents() async throws {
    let queue = WorkQueue(name: "await.task", maxConcurrent: 2)
    let other = WorkQueue(name: "await.task.other", maxConcurrent: 2)
    let me = Box<Work<Int>>()
    let x = Box<Work<Int>>()
    let own = Slot()
    let dependent = Slot()
    let started = SpindleTestSupport.Gate()
    queue.suspend()
    me.set(
      queue.add(name: "A") { () async -> Int in
        Task {
          started.open()
          async let ownOutcome = Self.outcome(of: me.get)
          async let dependentOutcome = Self.outcome(of: x.get)
          own.set(await ownOutcome)
          dependent.set(await dependentOutcome)
        }
        // The task's awaits begin while the body still runs.
        _ = started.wait(seconds: 10)
        try? await Task.sleep(for: .milliseconds(100))
        return 1
      })
    x.set(other.add(name: "X", after: me.get) { $0 + 1 })
    queue.resume()
    #expect(own.await() == "value 1")
    #expect(dependent.await() == "value 2")
  }

  /// Width 2. A awaits U, which needs a slot (it waits for a gated dependency): one stuck body of two, allowed. A is
  /// cancelled: its await throws `CancellationError` at once and A ends, and its wait must no longer count: B's wait
  /// for U2 (unstarted too) is then the only stuck one and is allowed. Counted still, it was refused as the second.
  @Test func anAwaitEndedByCancellationNoLongerCountsAgainstTheSlots() async throws {
    let queue = WorkQueue(name: "await.cancelled", maxConcurrent: 2)
    let other = WorkQueue(name: "await.cancelled.other", maxConcurrent: 1)
    let gate = SpindleTestSupport.Gate()
    let g = other.add(name: "G") { () -> Int in
      gate.wait(seconds: 10)
      return 0
    }
    let u = queue.add(name: "U", after: g) { $0 + 1 }
    let u2 = queue.add(name: "U2", after: g) { $0 + 2 }
    let aResult = Slot()
    let a = queue.add(name: "A") { () async -> Int in
      aResult.set(await Self.outcome(of: u))
      return 1
    }
    #expect(await eventually(within: 60) { ReviewSession23Tests.blockedWaits(queue) == 1 })
    a.cancel()
    let aOutcome = aResult.await() ?? "hung"
    #expect(aOutcome.hasPrefix("error:") && aOutcome.contains("Cancellation"), "\(aOutcome)")
    #expect(await eventually(within: 60) { a.state.isFinal })
    #expect(ReviewSession23Tests.blockedWaits(queue) == 0)
    let bResult = Slot()
    _ = queue.add(name: "B") { () -> Int in
      DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { gate.open() }
      bResult.set(ReviewSession24Tests.outcome(of: u2))
      return 3
    }
    #expect(bResult.await() == "value 2")
    #expect(try await u.value == 1)
  }

  /// `allFinished()` awaited by an `async` body of the same queue would wait for that body: refused at once. Awaited
  /// by a task the body started, or by a body of another queue, it returns once the queue is done.
  @Test func allFinishedAwaitedByAnAsyncBodyOfTheSameQueueIsRefused() async throws {
    let queue = WorkQueue(name: "await.all", maxConcurrent: 2)
    let other = WorkQueue(name: "await.all.other", maxConcurrent: 2)
    let own = Slot()
    let fromTask = Slot()
    let fromOther = Slot()
    @Sendable func outcome(_ queue: WorkQueue) async -> String {
      do {
        try await queue.allFinished()
        return "finished"
      } catch let error as WorkDeadlockError {
        return "refused: \(error)"
      } catch {
        return "error: \(error)"
      }
    }
    let started = SpindleTestSupport.Gate()
    _ = queue.add(name: "A") { () async -> Int in
      own.set(await outcome(queue))
      Task {
        started.open()
        fromTask.set(await outcome(queue))
      }
      // The task's await begins while the body still runs.
      _ = started.wait(seconds: 10)
      try? await Task.sleep(for: .milliseconds(100))
      return 1
    }
    _ = other.add(name: "O") { () async -> Int in
      fromOther.set(await outcome(queue))
      return 2
    }
    let ownOutcome = own.await() ?? "hung"
    #expect(ownOutcome.hasPrefix("refused:") && ownOutcome.contains("allFinished()"), "\(ownOutcome)")
    #expect(fromTask.await() == "finished")
    #expect(fromOther.await() == "finished")
  }

  // MARK: - The slots of another queue

  /// Adds W to `first`, whose body (once `wGate` opens) waits for `x`, and B to `second` (first in line), whose body
  /// (once `bGate` opens, if given) waits for W; each body records its outcome.
  static func addWaitingPair(
    first: WorkQueue, second: WorkQueue, wGate: SpindleTestSupport.Gate, bGate: SpindleTestSupport.Gate?,
    x: Box<Work<Int>>, wResult: Slot, bResult: Slot
  ) -> (w: Work<Int>, b: Work<Int>) {
    let w = first.add(name: "W") { () -> Int in
      wGate.wait(seconds: 10)
      wResult.set(ReviewSession24Tests.outcome(of: x.get))
      return 1
    }
    let b = second.add(name: "B", priority: .veryHigh) { () -> Int in
      bGate?.wait(seconds: 10)
      bResult.set(ReviewSession24Tests.outcome(of: w))
      return 2
    }
    return (w, b)
  }

  /// Q2 has one slot, held by B, which waits for W on Q1; W's body then waits for X, unstarted on Q2. X can only start
  /// once B ends, and B only once W does: W's wait is refused (it hung: waits for work of another queue were not
  /// counted against that queue's slots). In the other order (W waits for X first, while B runs without waiting),
  /// B's wait for W is the one refused. Either way both end afterwards.
  @Test(arguments: [false, true])
  func aWaitForUnstartedWorkOfAQueueWhoseSlotsWaitForTheWaiterIsRefused(bodyWaitsFirst: Bool) throws {
    let first = WorkQueue(name: "slots.q1.\(bodyWaitsFirst)", maxConcurrent: 2)
    let second = WorkQueue(name: "slots.q2.\(bodyWaitsFirst)", maxConcurrent: 1)
    let wGate = SpindleTestSupport.Gate()
    let bGate = SpindleTestSupport.Gate()
    let x = Box<Work<Int>>()
    let wResult = Slot()
    let bResult = Slot()
    first.suspend()
    second.suspend()
    let (w, b) = Self.addWaitingPair(
      first: first, second: second, wGate: wGate, bGate: bGate, x: x, wResult: wResult, bResult: bResult)
    x.set(second.add(name: "X") { 3 })
    first.resume()
    second.resume()
    #expect(eventually(within: 60) { w.state == .running && b.state == .running })
    if bodyWaitsFirst {
      bGate.open()
      #expect(eventually(within: 60) { Self.isRecorded(b, waitingFor: w) })
      wGate.open()
      let outcome = wResult.await() ?? "hung"
      #expect(outcome.hasPrefix("refused:") && outcome.contains("slots of a queue"), "\(outcome)")
      #expect(bResult.await() == "value 1")
    } else {
      wGate.open()
      #expect(eventually(within: 60) { Self.isRecorded(w, waitingFor: x.get) })
      bGate.open()
      let outcome = bResult.await() ?? "hung"
      #expect(outcome.hasPrefix("refused:") && outcome.contains("slots of a queue"), "\(outcome)")
      #expect(wResult.await() == "value 3")
    }
    #expect(eventually { (try? x.get.result?.get()) == 3 })
  }

  /// As above, but Q2 has a second slot: held by C, which does not wait (it ends a moment later), or free. X gets
  /// that slot once C ends (or at once): W's wait returns, then B's.
  @Test(arguments: [false, true])
  func aWaitForUnstartedWorkOfAQueueWithASlotThatFreesIsAllowed(secondSlotBusy: Bool) throws {
    let first = WorkQueue(name: "slots.free.q1.\(secondSlotBusy)", maxConcurrent: 2)
    let second = WorkQueue(name: "slots.free.q2.\(secondSlotBusy)", maxConcurrent: 2)
    let wGate = SpindleTestSupport.Gate()
    let cGate = SpindleTestSupport.Gate()
    let xGate = SpindleTestSupport.Gate()
    let x = Box<Work<Int>>()
    let wResult = Slot()
    let bResult = Slot()
    first.suspend()
    second.suspend()
    let (w, b) = Self.addWaitingPair(
      first: first, second: second, wGate: wGate, bGate: nil, x: x, wResult: wResult, bResult: bResult)
    if secondSlotBusy {
      _ = second.add(name: "C", priority: .high) { () -> Int in
        cGate.wait(seconds: 10)
        return 4
      }
    }
    // X stays unstarted until its dependency G ends.
    let g = first.add(name: "G") { () -> Int in
      xGate.wait(seconds: 10)
      return 0
    }
    x.set(second.add(name: "X", after: g) { $0 + 3 })
    first.resume()
    second.resume()
    #expect(eventually(within: 60) { Self.isRecorded(b, waitingFor: w) })
    wGate.open()
    #expect(eventually(within: 60) { Self.isRecorded(w, waitingFor: x.get) })
    xGate.open()
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { cGate.open() }
    #expect(wResult.await() == "value 3")
    #expect(bResult.await() == "value 1")
  }

  /// Width 2: round after round, W1 and W2 (the two slots) begin waiting for the same unstarted target at the same
  /// moment. Exactly one is refused: that frees its slot, the target runs, and the other wait returns 5. (When every
  /// recorded wait counted against the slots, each saw the other's and both were refused, about one round in ten
  /// under ThreadSanitizer.)
  @Test func twoWaitsBeginningTogetherForUnstartedWorkInTheLastTwoSlotsRefuseOnlyOne() throws {
    var outcomes: [[Int]: Int] = [:]
    for round in 0..<60 {
      let queue = WorkQueue(name: "slots.together.\(round)", maxConcurrent: 2)
      let start = DispatchGroup()
      start.enter()
      start.enter()
      let go = SpindleTestSupport.Gate()
      queue.suspend()
      let target = queue.add(name: "target", priority: .veryLow) { 5 }
      let waiters = (1...2).map { index in
        queue.add(name: "W\(index)") { () -> Int in
          start.leave()
          go.wait(seconds: 10)
          return (try? target.wait()) ?? -1
        }
      }
      queue.resume()
      #expect(start.wait(timeout: .now() + 10 * hangBoundScale) == .success)
      go.open(2)
      let results = waiters.map { waiter in
        eventually { waiter.state.isFinal } ? ((try? waiter.result?.get()) ?? -2) : -3
      }
      outcomes[results.sorted(), default: 0] += 1
    }
    #expect(outcomes == [[-1, 5]: 60], "\(outcomes)")
  }

  /// Whether `waiter`'s body waits for `target` in a wait that passed its check (and so counts in the checks of later
  /// waits: ``BodyWaits/snapshot()``).
  static func isRecorded(_ waiter: AnyWork, waitingFor target: AnyWork) -> Bool {
    BodyWaits.shared.snapshot().contains { $0.waiter === waiter && $0.targets.contains { $0 === target } }
  }
}
