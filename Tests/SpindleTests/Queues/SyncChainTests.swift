import Dispatch
import Spindle
import Testing

/// `currentQueueIs` through chains of `sync` callers, re-entrant `sync`, and the target hierarchy.
@Suite struct SyncChainTests {
  struct Failure: Error, Equatable {}

  @Test func syncCallerIsCurrentInsideNestedSync() {
    let a = IDQ(label: "chain.a")
    let b = IDQ(label: "chain.b")
    let answers = a.sync { b.sync { [IDQ.currentQueueIs(a), IDQ.currentQueueIs(b), b.isCurrent, a.isCurrent] } }
    #expect(answers == [true, true, true, true])
    #expect(!a.isCurrent && !b.isCurrent)
  }

  @Test func chainIsThreeDeepAndUnrelatedQueuesStayFalse() {
    let a = IDQ(label: "chain3.a")
    let b = IDQ(label: "chain3.b")
    let c = IDQ(label: "chain3.c")
    let d = IDQ(label: "chain3.d")
    let answers = a.sync { b.sync { c.sync { [a.isCurrent, b.isCurrent, c.isCurrent, d.isCurrent] } } }
    #expect(answers == [true, true, true, false])
  }

  @Test func callerOnARawlyDispatchedBlockIsRecognised() async {
    let a = IDQ(label: "raw.a")
    let b = IDQ(label: "raw.b")
    let answer = await withCheckedContinuation { continuation in
      a.queue.async { continuation.resume(returning: b.sync { a.isCurrent }) }
    }
    #expect(answer)
  }

  @Test func chainReachesTheMainQueueBlockOnAnotherThread() {
    let a = IDQ(label: "main-chain.a")
    let answers = runBounded {
      a.sync {
        IDQ.main.sync {
          [a.isCurrent, IDQ.main.isCurrent, IDQ.currentSyncChain == ["main-chain.a", DispatchQueue.main.label]]
        }
      }
    }
    #expect(answers == [true, true, true])
  }

  @Test @MainActor func mainQueueSyncFromTheMainActorRunsInline() {
    #expect(IDQ.main.isCurrent)
    #expect(IDQ.main.sync { IDQ.main.isCurrent })
  }

  @Test func mainThreadChainIsRestoredAfterTheBlock() async {
    let a = IDQ(label: "main-restore.a")
    let inside = runBounded { a.sync { IDQ.main.sync { a.isCurrent } } }
    #expect(inside == true)
    let after = await withCheckedContinuation { continuation in
      DispatchQueue.main.async {
        continuation.resume(returning: a.isCurrent || IDQ.currentSyncChain.contains("main-restore.a"))
      }
    }
    #expect(!after)
  }

  @Test func chainIsRestoredAfterReturnAndAfterThrow() throws {
    let a = IDQ(label: "restore.a")
    let b = IDQ(label: "restore.b")
    #expect(throws: Failure.self) {
      try a.sync { try b.sync { throw Failure() } }
    }
    #expect(!a.isCurrent)
    #expect(IDQ.currentSyncChain.isEmpty)
    let after = a.sync { b.sync { 1 } } + 1
    #expect(after == 2)
    // The worker threads that ran the blocks carry no stale chain.
    let stale = Shared(false)
    DispatchQueue.concurrentPerform(iterations: 32) { _ in
      if a.isCurrent || b.isCurrent { stale.update { $0 = true } }
    }
    #expect(!stale.value)
  }

  @Test func reentrantSyncRunsInline() {
    let a = IDQ(label: "reentrant.a")
    let value = runBounded { a.sync { a.sync { a.sync { 42 } } } }
    #expect(value == 42)
  }

  @Test func reentrantSyncFromRawBlockRunsInline() {
    let a = IDQ(label: "reentrant.raw")
    let value = runBounded { a.queue.sync { a.sync { a.isCurrent } } }
    #expect(value == true)
  }

  @Test func syncFromAQueueThatTargetsItRunsInline() {
    let a = IDQ(label: "target.a")
    let child = IDQ(label: "target.child", target: a.queue)
    let rawChild = DispatchQueue(label: "target.raw-child", target: a.queue)
    let answers = runBounded {
      [
        child.queue.sync { a.isCurrent },
        child.sync { a.sync { a.isCurrent && child.isCurrent } },
        rawChild.sync { a.sync { a.isCurrent } },
        a.sync { child.isCurrent },
      ]
    }
    #expect(answers == [true, true, true, false])
  }

  @Test func targetSetAfterCreationIsFollowed() {
    let a = IDQ(label: "later-target.a")
    let child = DispatchQueue(label: "later-target.child", attributes: .initiallyInactive)
    child.setTarget(queue: a.queue)
    child.activate()
    let answer = runBounded { child.sync { a.sync { a.isCurrent } } }
    #expect(answer == true)
  }

  @Test func syncReturnsValuesAndRethrows() throws {
    let a = IDQ(label: "values.a")
    #expect(a.sync { "x" } == "x")
    #expect(throws: Failure.self) { try a.sync { throw Failure() } }
    #expect(try a.syncChecked { 7 } == 7)
    #expect(throws: Failure.self) { try a.syncChecked { throw Failure() } }
  }

  @Test func concurrentQueueReentrantReadRunsInline() {
    let k = IDQ(label: "concurrent.k", attributes: .concurrent)
    let answer = runBounded { k.sync { k.sync { k.isCurrent } } }
    #expect(answer == true)
  }

  @Test func barrierSyncOnConcurrentQueueRunsExclusively() {
    let k = IDQ(label: "barrier.k", attributes: .concurrent)
    let value = Shared(0)
    DispatchQueue.concurrentPerform(iterations: 8) { index in
      if index.isMultiple(of: 2) {
        k.sync(flags: .barrier) { value.update { $0 += 1 } }
      } else {
        _ = k.sync { value.value }
      }
    }
    #expect(value.value == 4)
  }

  @Test func asyncAndAsyncAfterRunOnTheQueue() async {
    let a = IDQ(label: "async.a")
    let group = DispatchGroup()
    let onQueue = await withCheckedContinuation { continuation in
      a.async(group: group) { continuation.resume(returning: a.isCurrent) }
    }
    #expect(onQueue)
    // The group empties once the block returns; poll without blocking a cooperative thread.
    #expect(await eventually { group.wait(timeout: .now()) == .success })
    let later = await withCheckedContinuation { continuation in
      a.asyncAfter(deadline: .now() + .milliseconds(5)) { continuation.resume(returning: a.isCurrent) }
    }
    #expect(later)
  }

  @Test func currentLabelNamesAnyQueue() {
    let a = IDQ(label: "label.a")
    let raw = DispatchQueue(label: "label.raw")
    #expect(a.sync { IDQ.currentLabel } == "label.a")
    #expect(raw.sync { IDQ.currentLabel } == "label.raw")
    #expect(a.sync { raw.sync { IDQ.currentLabel } } == "label.raw")
    #expect(IDQ.currentLabel != "label.a")
  }

  @Test func currentSyncChainListsHeldQueues() {
    let a = IDQ(label: "list.a")
    let b = IDQ(label: "list.b")
    #expect(a.sync { b.sync { IDQ.currentSyncChain } } == ["list.a", "list.b"])
    #expect(a.sync { IDQ.currentSyncChain } == ["list.a"])
  }
}
