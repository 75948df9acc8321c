import Dispatch
import Spindle
import Testing

/// A concurrent queue running a barrier block runs nothing else until it ends: a `sync` back into it (or into a queue
/// that targets it) from that block's chain is reported, and the legal shapes around it still run.
@Suite struct BarrierDeadlockDetectionTests {
  @Test func syncIntoAQueueHeldByABarrierSyncThrows() {
    let c = IDQ(label: "barrier-sync.c", attributes: .concurrent)
    let s = IDQ(label: "barrier-sync.s")
    let error = runBounded(seconds: 5) {
      c.sync(flags: .barrier) { s.sync { DeadlockError.catching { try c.syncChecked {} } } }
    }
    #expect(error??.reason == .cycle)
    #expect(error??.heldQueue == "barrier-sync.c")
    #expect(error??.chain == ["barrier-sync.c", "barrier-sync.s", "barrier-sync.c"])
  }

  @Test func syncIntoAQueueTargetingABarrierHeldQueueThrows() {
    let c = IDQ(label: "barrier-target.c", attributes: .concurrent)
    let child = IDQ(label: "barrier-target.child", target: c.queue)
    let wide = IDQ(label: "barrier-target.wide", attributes: .concurrent, target: c.queue)
    let s = IDQ(label: "barrier-target.s")
    let throughAnother = runBounded(seconds: 5) {
      c.sync(flags: .barrier) { s.sync { DeadlockError.catching { try child.syncChecked {} } } }
    }
    #expect(throughAnother??.reason == .cycle)
    #expect(throughAnother??.heldQueue == "barrier-target.c")
    #expect(throughAnother??.chain == ["barrier-target.c", "barrier-target.s", "barrier-target.child"])
    #expect(throughAnother??.description.contains("targets 'barrier-target.c'") == true)
    let fromTheBarrier = runBounded(seconds: 5) {
      c.sync(flags: .barrier) { DeadlockError.catching { try child.syncChecked {} } }
    }
    #expect(fromTheBarrier??.heldQueue == "barrier-target.c")
    let concurrentChild = runBounded(seconds: 5) {
      c.sync(flags: .barrier) { s.sync { DeadlockError.catching { try wide.syncChecked {} } } }
    }
    #expect(concurrentChild??.heldQueue == "barrier-target.c")
  }

  @Test func syncIntoAQueueHeldByABarrierAsyncBlockThrows() {
    let c = IDQ(label: "barrier-async.c", attributes: .concurrent)
    let s = IDQ(label: "barrier-async.s")
    let submitters: [@Sendable (@escaping @Sendable () -> Void) -> Void] = [
      { c.async(flags: .barrier, execute: $0) },
      { c.asyncAfter(deadline: .now(), flags: .barrier, execute: $0) },
    ]
    for submit in submitters {
      let found = Shared<DeadlockError?>(nil)
      let done = DispatchSemaphore(value: 0)
      submit {
        found.update { $0 = s.sync { DeadlockError.catching { try c.syncChecked {} } } }
        done.signal()
      }
      #expect(done.wait(timeout: .now() + 60) == .success)
      let error = found.value
      #expect(error?.reason == .cycle)
      #expect(error?.heldQueue == "barrier-async.c")
      #expect(error?.chain == ["barrier-async.c", "barrier-async.s", "barrier-async.c"])
    }
  }

  @Test func plainSyncStopsWithTheChainInsteadOfLibdispatchsTrap() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let c = IDQ(label: "barrier-trap.c", attributes: .concurrent)
      let s = IDQ(label: "barrier-trap.s")
      c.sync(flags: .barrier) { s.sync { c.sync {} } }
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("'barrier-trap.c' → 'barrier-trap.s' → 'barrier-trap.c'"))
  }

  @Test func sharedHoldsOfAConcurrentQueueAreNotACycle() {
    let c = IDQ(label: "barrier-legal.c", attributes: .concurrent)
    let child = IDQ(label: "barrier-legal.child", target: c.queue)
    let wide = IDQ(label: "barrier-legal.wide", attributes: .concurrent, target: c.queue)
    let s = IDQ(label: "barrier-legal.s")
    // A non-barrier block shares `c`, so a sync back into it (or into a queue targeting it) runs.
    #expect(runBounded(seconds: 5) { c.sync { s.sync { (try? c.syncChecked { 1 }) ?? -1 } } } == 1)
    #expect(runBounded(seconds: 5) { c.sync { s.sync { (try? child.syncChecked { 2 }) ?? -1 } } } == 2)
    // Re-entering the barrier's own queue from the barrier block runs inline.
    #expect(runBounded(seconds: 5) { c.sync(flags: .barrier) { (try? c.syncChecked { 3 }) ?? -1 } } == 3)
    // A barrier on `wide` holds `wide` alone; `c`, its target, still has room.
    #expect(runBounded(seconds: 5) { wide.sync(flags: .barrier) { s.sync { (try? c.syncChecked { 4 }) ?? -1 } } } == 4)
    // A barrier that has ended holds nothing.
    c.sync(flags: .barrier) {}
    #expect(runBounded(seconds: 5) { s.sync { (try? c.syncChecked { 5 }) ?? -1 } } == 5)
  }

  @Test func nonBarrierAsyncBlockMaySyncBackIntoItsQueue() {
    let c = IDQ(label: "barrier-legal-async.c", attributes: .concurrent)
    let s = IDQ(label: "barrier-legal-async.s")
    let found = Shared(0)
    let done = DispatchSemaphore(value: 0)
    c.async {
      found.update { $0 = s.sync { (try? c.syncChecked { 6 }) ?? -1 } }
      done.signal()
    }
    #expect(done.wait(timeout: .now() + 60) == .success)
    #expect(found.value == 6)
  }

  @Test func syncFromAnotherThreadWaitsForTheBarrierInsteadOfThrowing() {
    let c = IDQ(label: "barrier-elsewhere.c", attributes: .concurrent)
    let s = IDQ(label: "barrier-elsewhere.s")
    let found = Shared<[Int]>([])
    let done = DispatchSemaphore(value: 0)
    let handOff: @Sendable () -> Void = {
      s.async {
        found.update { $0.append((try? c.syncChecked { 7 }) ?? -1) }
        done.signal()
      }
    }
    c.sync(flags: .barrier, execute: handOff)
    c.async(flags: .barrier, execute: handOff)
    #expect(done.wait(timeout: .now() + 60) == .success)
    #expect(done.wait(timeout: .now() + 60) == .success)
    #expect(found.value == [7, 7])
  }
}
