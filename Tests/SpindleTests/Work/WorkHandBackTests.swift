import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// Workers hand finished plain items back to the thread that adds the next one, which frees them (see
/// `WorkEngine.handBack`). These tests try to break what that must not change: nothing a user can observe is
/// released later than before (values with a deinit, errors, a body's captures), handed-back items are freed even
/// when nobody adds again, and the list stays bounded while nobody adds.
@Suite struct WorkHandBackTests {
  /// A weak reference to a work item, to see when it is freed without keeping it alive.
  final class WeakWork: @unchecked Sendable {  // written once before it is shared; read after the queue ended
    weak var work: AnyWork?
    init(_ work: AnyWork) { self.work = work }
  }

  /// Signals when it is released.
  final class Canary: Sendable {
    let released: DispatchSemaphore
    init(_ released: DispatchSemaphore) { self.released = released }
    deinit { released.signal() }
  }

  final class CanaryError: Error, Sendable {
    let canary: Canary
    init(_ canary: Canary) { self.canary = canary }
  }

  @Test func itemsHandedBackAreFreedWhenNobodyAddsAgain() async {
    let queue = WorkQueue(name: "hand-back.idle", maxConcurrent: 2)
    var weak: [WeakWork] = []
    for index in 0..<5_000 {
      if index.isMultiple(of: 2) {
        weak.append(WeakWork(queue.add {}))
      } else {
        weak.append(WeakWork(queue.add { index }))
      }
    }
    await offPool { queue.waitUntilAllFinished() }
    // Nothing is added from here on: what the workers handed back is freed when they stop.
    let all = weak
    let freed = await eventually { all.allSatisfy { $0.work == nil } }
    #expect(freed, "\(all.filter { $0.work != nil }.count) of 5000 finished items are still alive")
  }

  @Test func aWorkerThatKeepsRunningFreesWhatItHandedBackWithinTheLimit() async {
    let queue = WorkQueue(name: "hand-back.bound", maxConcurrent: 1)
    queue.suspend()
    var weak: [WeakWork] = []
    for index in 0..<2_000 { weak.append(WeakWork(queue.add { index })) }
    let all = weak
    // Runs after the 2,000 on the same worker, which has handed them back meanwhile, with nobody adding.
    let alive = queue.add { all.filter { $0.work != nil }.count }
    queue.resume()
    // Polled, not waited for: a thread blocked in `wait()` would free the list for the worker (see the tests below).
    #expect(await eventually { alive.result != nil })
    let count = try? alive.result?.get()
    // The list stays below `handBackLimit` (the flush that reaches it frees the list), and the worker's batch is on
    // the list before this last item's body runs (nothing else is queued then).
    let bound = WorkEngine.handBackLimit
    #expect(
      (count ?? .max) < bound,
      "\(count ?? -1) finished items alive while the worker ran on; the hand-back list must stay under \(bound)")
  }

  /// A thread blocked in `wait()` or `waitUntilAllFinished()` frees what the workers hand back meanwhile: they ask it
  /// once the list holds a batch, and free the list themselves only at a higher bound, which still holds.
  @Test(arguments: [false, true])
  func aWaitingThreadFreesWhatTheWorkersHandBack(waitsForTheQueue: Bool) async {
    let queue = WorkQueue(name: "hand-back.waiter", maxConcurrent: 1)
    queue.suspend()
    let gate = DispatchSemaphore(value: 0)
    queue.add { _ = gate.wait(timeout: .now() + 60 * hangBoundScale) }
    var weak: [WeakWork] = []
    for index in 0..<5_000 { weak.append(WeakWork(queue.add { index })) }
    let all = weak
    let alive = queue.add { all.filter { $0.work != nil }.count }
    queue.resume()
    // The waiting thread blocks before the gate opens, so that it has offered to free before anything is handed back.
    let waited = Task {
      await offPool {
        if waitsForTheQueue { queue.waitUntilAllFinished() } else { _ = try? alive.wait() }
      }
    }
    let offered = await eventually { queue.engine.hasFreeingHelperForTesting }
    gate.signal()
    await waited.value
    #expect(offered, "the waiting thread did not offer to free the hand-back list")
    #expect(!queue.engine.hasFreeingHelperForTesting, "the offer outlived the wait")
    // More than nothing, not a whole batch: a helper descheduled long enough lets the worker free the list itself at
    // the higher bound, and then frees what is left when it wakes.
    let freed = queue.engine.itemsFreedByWaitersForTesting.load(ordering: .relaxed)
    #expect(freed > 0, "the waiting thread freed none of the 5,000 handed-back items")
    // Bounded: a worker that passes the bound while the helper frees leaves the list to it, up to the hard limit (a
    // helper descheduled in the middle of its pass: 4,999 alive in 1 of 16 runs before there was one).
    let count = try? alive.result?.get()
    let bound = WorkEngine.handBackHardLimit + WorkEngine.handBackBatchSize
    #expect((count ?? .max) < bound, "\(count ?? -1) finished items alive at the end")
  }

  /// A thread that frees the list and stops in the middle of its pass (descheduled) does not let it grow without bound:
  /// the worker whose flush brings it to the hard limit frees it alongside.
  @Test(arguments: [false, true])
  func aStalledFreerLeavesTheListBoundedByTheHardLimit(withAWaitingThread: Bool) async {
    #if DEBUG
      let queue = WorkQueue(name: "hand-back.stalled", maxConcurrent: 1)
      queue.suspend()
      var weak: [WeakWork] = []
      let count = 3 * WorkEngine.handBackHardLimit
      for index in 0..<count { weak.append(WeakWork(queue.add { index })) }
      let all = weak
      let alive = queue.add { all.filter { $0.work != nil }.count }
      queue.engine.setFreeingHandedBackForTesting(true)
      queue.resume()
      if withAWaitingThread {
        await offPool { _ = try? alive.wait() }
      } else {
        #expect(await eventually { alive.result != nil })
      }
      queue.engine.setFreeingHandedBackForTesting(false)
      let seen = try? alive.result?.get()
      let bound = WorkEngine.handBackHardLimit + WorkEngine.handBackBatchSize
      #expect((seen ?? .max) < bound, "\(seen ?? -1) of \(count) finished items alive while another thread froze")
    #endif
  }

  /// Waits of every kind return with the right value while the workers hand back and wake the waiting thread that
  /// frees: threads blocked in `wait()` for work in the middle of a long run, one in `waitUntilAllFinished()`, bodies of
  /// another queue and a body of the same queue waiting; and every offer to free ends with its wait. (Adapted from
  /// helper-54's review: a freeing request must never end a wait early, nor a wait leave its offer behind.)
  @Test func waitersOfEveryKindReturnWhileWorkersHandBack() async {
    let a = WorkQueue(name: "hand-back.waiters.a", maxConcurrent: 2)
    let b = WorkQueue(name: "hand-back.waiters.b", maxConcurrent: 2)
    for round in 0..<4 {
      a.suspend()
      var targets: [Work<Int>] = []
      for index in 0..<20_000 {
        let work = a.add { index }
        if index % 2_500 == 1_000 { targets.append(work) }
      }
      let all = targets
      let expected = all.indices.map { 1_000 + 2_500 * $0 }
      let fromB = all.map { target in b.add { (try? target.wait()) ?? -1 } }  // bodies of another queue
      let fromA = a.add { (try? all.last!.wait()) ?? -1 }  // a body of the same queue
      let ended = DispatchSemaphore(value: 0)
      let seen = Locked<[Int]>([])
      for target in all {
        DispatchQueue.global().async {
          let value = (try? target.wait()) ?? -1
          seen.withLock { $0.append(value) }
          ended.signal()
        }
      }
      DispatchQueue.global().async {
        a.waitUntilAllFinished()
        ended.signal()
      }
      for work in fromB + [fromA] { work.onCompletion(on: .global()) { _ in ended.signal() } }
      a.resume()
      let count = all.count + 1 + fromB.count + 1
      let allEnded = await offPool {
        (0..<count).allSatisfy { _ in ended.wait(timeout: .now() + 60 * hangBoundScale) == .success }
      }
      #expect(allEnded, "round \(round): a wait did not end")
      guard allEnded else { return }
      #expect(seen.withLock { $0.sorted() } == expected, "round \(round)")
      #expect(fromB.map { try? $0.result?.get() } == expected, "round \(round)")
      #expect((try? fromA.result?.get()) == expected.last, "round \(round)")
      #expect(await eventually { !a.engine.hasFreeingHelperForTesting }, "round \(round): an offer outlived its wait")
    }
    #expect(await eventually { !b.engine.hasFreeingHelperForTesting })
  }

  /// The adding thread frees the list once it holds a batch (``WorkEngine/handBackAddBatch``), before it allocates,
  /// even while every worker runs a long body (found in review: a worker's batch kept finished items until the worker
  /// gathered more or stopped).
  @Test func anAddFreesABatchOfFinishedItemsWhileTheWorkersRunLongBodies() async {
    let queue = WorkQueue(name: "hand-back.busy", maxConcurrent: 2)
    queue.suspend()
    let started = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let long: @Sendable () -> Void = {
      started.signal()
      _ = go.wait(timeout: .now() + 60 * hangBoundScale)
    }
    let first = queue.add(long)
    let count = WorkEngine.handBackAddBatch + 8
    let finished: [WeakWork] = (0..<count).map { index in WeakWork(queue.add { index }) }
    let second = queue.add(long)
    queue.resume()
    await offPool {
      started.wait()
      started.wait()
    }
    // Both workers are in their long bodies: the second one put its batch on the list before it started its own
    // (nothing else was queued), so nothing frees the list now but an `add`.
    #expect(await eventually { queue.engine.handedBackCountForTesting == count })
    #expect(finished.contains { $0.work != nil }, "the finished items were freed before the add")
    let next = queue.add { 2 }  // frees the hand-back list before it allocates
    let alive = finished.filter { $0.work != nil }.count
    go.signal()
    go.signal()
    _ = await offPool { (try? first.wait(), try? second.wait(), try? next.wait()) }
    #expect(
      alive == 0, "\(alive) of \(count) finished items stayed alive after the add while the workers ran long bodies")
  }

  /// A worker gathers what it hands back a few items at a time: a last, partial batch (fewer items than
  /// `handBackBatchSize`, from plain items and from the dependencies `add(after:)` lets go of) is freed when the
  /// worker stops, although nobody adds again.
  @Test(arguments: [1, 2, 3, 5])
  func aPartialBatchIsFreedWhenTheWorkerStops(items: Int) async {
    for chained in [false, true] {
      let queue = WorkQueue(name: "hand-back.partial", maxConcurrent: 1)
      queue.suspend()
      var weak: [WeakWork] = []
      var last: Work<Int>? = nil
      for index in 0..<items {
        let work: Work<Int>
        if chained, let previous = last {
          work = queue.add(after: previous) { $0 + 1 }
        } else {
          work = queue.add { index }
        }
        weak.append(WeakWork(work))
        last = work
      }
      last = nil
      queue.resume()
      await offPool { queue.waitUntilAllFinished() }
      let all = weak
      let freed = await eventually { all.allSatisfy { $0.work == nil } }
      #expect(
        freed,
        "\(all.filter { $0.work != nil }.count) of \(items) finished items (chained: \(chained)) are still alive")
    }
  }

  /// On a suspended serial queue, adds what `setUp` adds (which releases a canary when it should), then an item
  /// that waits for that release, and runs them on one worker: nobody adds work meanwhile, so anything held back on
  /// the hand-back list would never be released. Returns whether the release came. `setUp` may return work that
  /// the waiting item must follow.
  func releasedBeforeTheNextItem(
    _ name: String, _ setUp: (WorkQueue, DispatchSemaphore) -> AnyWork?
  ) async -> Bool {
    let queue = WorkQueue(name: "hand-back.\(name)", maxConcurrent: 1)
    queue.suspend()
    let released = DispatchSemaphore(value: 0)
    // In a closure, so that the test keeps no reference to what `setUp` returned once `seen` follows it.
    let seen: Work<Bool> = {
      let after = setUp(queue, released)
      return queue.add(dependencies: after.map { [$0] } ?? []) {
        released.wait(timeout: .now() + 60 * hangBoundScale) == .success
      }
    }()
    queue.resume()
    return await offPool { try? seen.wait() } == true
  }

  @Test func aValueWithADeinitIsReleasedWhenItsWorkIsFreedNotLater() async {
    let released = await releasedBeforeTheNextItem("value") { queue, released in
      queue.add { Canary(released) }  // dropped: the worker holds the last reference once it finished
      return nil
    }
    #expect(released, "the value of finished, dropped work was not released")
  }

  @Test func anErrorWithADeinitIsReleasedWhenItsWorkIsFreedNotLater() async {
    let released = await releasedBeforeTheNextItem("error") { queue, released in
      // A plain value type (Void), so only the failure keeps this item from being handed back.
      queue.add { () throws in throw CanaryError(Canary(released)) }
      return nil
    }
    #expect(released, "the error of failed, dropped work was not released")
  }

  /// `add(after:)` holds its dependency in the item, not in the body's closure: the worker lets go of it when the
  /// dependent has run, even when the dependent itself (a plain `Void` item) is handed back to be freed later.
  @Test func aTypedDependencyIsReleasedWhenItsDependentHasRun() async {
    let released = await releasedBeforeTheNextItem("source") { queue, released in
      let source = queue.add { Canary(released) }
      // The waiting item follows this one, so it runs once the worker has let go of `source`.
      return queue.add(after: source) { _ in }
    }
    #expect(released, "a dependency was kept after its dependent ran")
  }

  @Test func aBodysCapturesAreReleasedWhenItEnds() async {
    let released = await releasedBeforeTheNextItem("captures") { queue, released in
      let canary = Canary(released)
      queue.add { _ = canary }
      return nil
    }
    #expect(released, "a finished body's captures were not released")
  }

  // Extras that arrive after the work was made (it was plain then): an observer, a group's members.

  @Test func anObserversCapturesAreReleasedWithItsWork() async {
    let released = await releasedBeforeTheNextItem("observer") { queue, released in
      let canary = Canary(released)
      queue.add { 1 }.observe { _ in _ = canary }
      return nil
    }
    #expect(released, "an observer's captures outlived its finished, dropped work")
  }

  @Test func anObservedTypedDependencyIsReleasedWhenItsDependentHasRun() async {
    let released = await releasedBeforeTheNextItem("observed-source") { queue, released in
      let canary = Canary(released)
      let source = queue.add { 1 }
      source.observe { _ in _ = canary }
      return queue.add(after: source) { _ in }
    }
    #expect(released, "an observer's captures outlived the dependency it observed")
  }

  @Test func aGroupsMembersAreReleasedWithTheGroupsWork() async {
    let released = await releasedBeforeTheNextItem("group") { queue, released in
      queue.group { group in
        let member = group.add { Canary(released) }
        return group.add(after: member) { _ in 1 }
      }
    }
    #expect(released, "a group's members (and their values) outlived the group's work")
  }

  /// As when the body's closure held it: `add(after:)`'s dependency is let go before the dependent completes, so
  /// its completion handlers (and `waitUntilAllFinished()`) already see it released.
  ///
  /// Many rounds: the thread that resumes the queue must not keep a reference to the item it starts (it once did,
  /// until `resume()` returned: 1 to 6 rounds in 100 failed under ThreadSanitizer, 1 in 5,000 without it).
  @Test func aTypedDependencyIsReleasedBeforeItsDependentsHandlersRun() async {
    var stillAlive = 0
    let rounds = 400
    for _ in 0..<rounds {
      let queue = WorkQueue(name: "hand-back.order", maxConcurrent: 1)
      queue.suspend()
      let released = DispatchSemaphore(value: 0)
      let seen = Locked<Bool?>(nil)
      let handled = DispatchSemaphore(value: 0)
      do {
        let source = queue.add { Canary(released) }
        queue.add(after: source) { _ in }.whenCompleteErased {
          seen.withLock { $0 = released.wait(timeout: .now()) == .success }
          handled.signal()
        }
      }
      queue.resume()
      guard await offPool({ handled.wait(timeout: .now() + 60 * hangBoundScale) }) == .success else {
        Issue.record("the dependent never completed")
        return
      }
      if seen.withLock({ $0 }) != true { stillAlive += 1 }
    }
    #expect(
      stillAlive == 0, "in \(stillAlive) of \(rounds) rounds the dependency was alive when its dependent's handler ran")
  }

  /// Several threads add while the workers hand items back: every item runs once, and every item is freed.
  @Test func concurrentAddersAndWorkersLoseNothing() async {
    let queue = WorkQueue(name: "hand-back.racing", maxConcurrent: 3)
    let ran = Locked(0)
    let adders = 4
    let perAdder = 3_000
    let weak = Locked<[WeakWork]>([])
    await withTaskGroup(of: Void.self) { group in
      for adder in 0..<adders {
        group.addTask {
          await offPool {
            var mine: [WeakWork] = []
            for index in 0..<perAdder {
              let work: AnyWork
              if index.isMultiple(of: 3) {
                work = queue.add { ran.withLock { $0 += 1 } }
              } else {
                work = queue.add {
                  ran.withLock { $0 += 1 }
                  return adder &* index
                }
              }
              mine.append(WeakWork(work))
            }
            weak.withLock { $0 += mine }
          }
        }
      }
    }
    await offPool { queue.waitUntilAllFinished() }
    #expect(ran.withLock { $0 } == adders * perAdder)
    let all = weak.withLock { $0 }
    let freed = await eventually { all.allSatisfy { $0.work == nil } }
    #expect(freed, "\(all.filter { $0.work != nil }.count) finished items are still alive")
  }

  /// A chained body reads its source through an unretained reference, without the item's lock (see
  /// `AnyWork.unretainedValueSource`); `dependencies` reads the same field under the lock while the item waits. A
  /// thread that reads every item's `dependencies` while the chain runs must only ever see the item's own source or
  /// nothing, and ThreadSanitizer (CI runs this suite under it) must see no race between the two.
  @Test func dependenciesReadWhileAChainRunsSeeTheSourceOrNothing() async {
    let queue = WorkQueue(name: "hand-back.dependencies", maxConcurrent: 2)
    let length = 3_000
    queue.suspend()
    var items: [Work<Int>] = [queue.add { 0 }]
    for _ in 1..<length { items.append(queue.add(after: items[items.count - 1]) { $0 + 1 }) }
    let chain = items
    let reading = Gate()
    let wrong = Locked<[String]>([])
    let reader = Task.detached {
      await offPool {
        reading.open()
        var rounds = 0
        let deadline = ContinuousClock.now + .seconds(60 * hangBoundScale)
        while (chain[length - 1].state != .finished || rounds < 2) && ContinuousClock.now < deadline {
          for index in 1..<length {
            let seen = chain[index].dependencies
            if !(seen.isEmpty || (seen.count == 1 && seen[0] === chain[index - 1])) {
              wrong.withLock { $0.append("item \(index) listed \(seen.count) dependencies") }
            }
          }
          rounds += 1
        }
      }
    }
    await offPool { reading.wait() }
    queue.resume()
    let last = await offPool { try? chain[length - 1].wait() }
    await reader.value
    #expect(last == length - 1)
    #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0.prefix(3) })")
    #expect(chain.allSatisfy { $0.dependencies.isEmpty })
  }
}
