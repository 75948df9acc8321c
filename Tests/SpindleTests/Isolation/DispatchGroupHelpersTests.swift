import Dispatch
import Spindle
import SpindleTestSupport
import Synchronization
import Testing

@Suite struct DispatchGroupHelpersTests {
  @Test func asyncWaitReturnsOnlyAfterEveryBlock() async {
    let group = DispatchGroup()
    let done = Counter()
    for _ in 0..<10 {
      DispatchQueue.global().async(group: group) {
        for _ in 0..<1_000 { _ = done.value }
        done.add(1)
      }
    }
    await group.wait()
    #expect(done.value == 10)
    await DispatchGroup().wait()
  }

  @Test func waitUnlessCancelledThrowsWhenCancelledAndTheGroupStaysIntact() async {
    let group = DispatchGroup()
    group.enter()
    let waiter = Task { try await group.waitUnlessCancelled() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(group.wait(timeout: .now()) == .timedOut)
    group.leave()
    try? await group.waitUnlessCancelled()
    #expect(group.wait(timeout: .now()) == .success)
  }

  @Test func notifyOnMainActorRunsOnTheMainActorAfterTheLastLeave() async {
    let key = mainQueueKey  // Set up here, not lazily inside the block under test.
    #expect(DispatchQueue.getSpecific(key: key) == nil, "a test does not run on the main queue")
    let group = DispatchGroup()
    let lease = DispatchGroupLease(entering: group)
    let left = Counter()
    let seen = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, Int, Bool), Never>) in
      group.notifyOnMainActor {
        // The main actor's executor is the main queue: only there is the key's value set.
        let onMainQueue = DispatchQueue.getSpecific(key: key) == true
        continuation.resume(returning: (onMainQueue, left.value, group.wait(timeout: .now()) == .success))
      }
      DispatchQueue.global().async {
        left.increment()
        lease.leave()
      }
    }
    #expect(seen.0, "the block ran on the main actor (the main queue)")
    #expect(seen.1 == 1, "and only after the member left")
    #expect(seen.2, "when the group was empty")
    #expect(lease.hasLeft)
  }

  @Test func leaseLeavesOnceWhenTheCallbackFiresTwiceOnAnotherThread() async {
    let group = DispatchGroup()
    let lease = group.enter { lease in
      DispatchQueue.global().async {
        lease.leave()
        lease.leave()
      }
    }
    await group.wait()
    #expect(await eventually { lease.redundantLeaves == 1 })
    #expect(lease.hasLeft)
    // The group is balanced: a new member keeps it busy.
    group.enter()
    #expect(group.wait(timeout: .now()) == .timedOut)
    group.leave()
  }

  @Test func concurrentLeavesLeaveExactlyOnce() {
    let group = DispatchGroup()
    let lease = DispatchGroupLease(entering: group)
    let left = Counter()
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      if lease.leave() { left.add(1) }
    }
    #expect(left.value == 1)
    #expect(lease.redundantLeaves == 7)
    #expect(group.wait(timeout: .now() + .seconds(10)) == .success)
    group.enter()
    #expect(group.wait(timeout: .now()) == .timedOut)
    group.leave()
  }

  @Test func droppedLeaseLeavesTheGroup() {
    let group = DispatchGroup()
    group.enter { _ in }  // the callback was dropped without ever firing
    #expect(group.wait(timeout: .now() + .seconds(10)) == .success)
  }

  @Test func throwingBodyLeavesAndRethrows() {
    struct Failure: Error {}
    let group = DispatchGroup()
    var kept: DispatchGroupLease?
    #expect(throws: Failure.self) {
      try group.enter { lease in
        kept = lease
        throw Failure()
      }
    }
    #expect(kept?.hasLeft == true)
    #expect(group.wait(timeout: .now()) == .success)
  }
}

/// Set on the main queue only, to tell from inside a block whether it runs there.
private let mainQueueKey: DispatchSpecificKey<Bool> = {
  let key = DispatchSpecificKey<Bool>()
  DispatchQueue.main.setSpecific(key: key, value: true)
  return key
}()
