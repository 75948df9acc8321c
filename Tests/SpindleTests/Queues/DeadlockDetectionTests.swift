import Dispatch
import Spindle
import Testing

/// Sync cycles across queues are reported, never hang.
@Suite struct DeadlockDetectionTests {
  @Test func cycleThroughAnotherQueueThrowsWithinBoundedTime() {
    let a = IDQ(label: "cycle.a")
    let b = IDQ(label: "cycle.b")
    let outcome = runBounded { () -> DeadlockError? in
      a.sync {
        b.sync {
          do {
            try a.syncChecked {}
            return nil
          } catch let error as DeadlockError {
            return error
          } catch {
            return nil
          }
        }
      }
    }
    let error = outcome ?? nil
    #expect(error?.chain == ["cycle.a", "cycle.b", "cycle.a"])
    #expect(error?.heldQueue == "cycle.a")
    #expect(error?.reason == .cycle)
    #expect(error?.description.contains("'cycle.a' → 'cycle.b' → 'cycle.a'") == true)
  }

  @Test func cycleStartingFromARawBlockIsDetected() {
    let a = IDQ(label: "raw-cycle.a")
    let b = IDQ(label: "raw-cycle.b")
    let error = runBounded { () -> DeadlockError? in
      a.queue.sync {
        b.sync { (try? a.syncChecked {}) == nil ? DeadlockError.catching { try a.syncChecked {} } : nil }
      }
    }
    #expect(error??.chain == ["raw-cycle.a", "raw-cycle.b", "raw-cycle.a"])
  }

  @Test func cycleThroughTheMainQueueIsDetected() {
    let a = IDQ(label: "main-cycle.a")
    let error = runBounded { a.sync { IDQ.main.sync { DeadlockError.catching { try a.syncChecked {} } } } }
    #expect(error??.chain == ["main-cycle.a", DispatchQueue.main.label, "main-cycle.a"])
  }

  @Test func longerCycleNamesEveryQueue() {
    let a = IDQ(label: "long.a")
    let b = IDQ(label: "long.b")
    let c = IDQ(label: "long.c")
    let error = runBounded { a.sync { b.sync { c.sync { DeadlockError.catching { try b.syncChecked {} } } } } }
    #expect(error??.chain == ["long.a", "long.b", "long.c", "long.b"])
  }

  @Test func syncOntoAQueueTargetingAHeldQueueIsDetected() {
    let a = IDQ(label: "held-target.a")
    let child = IDQ(label: "held-target.child", target: a.queue)
    let b = IDQ(label: "held-target.b")
    let fromChain = runBounded { a.sync { b.sync { DeadlockError.catching { try child.syncChecked {} } } } }
    #expect(fromChain??.heldQueue == "held-target.a")
    #expect(fromChain??.chain.last == "held-target.child")
    #expect(fromChain??.description.contains("targets 'held-target.a'") == true)
    let fromParent = runBounded { a.sync { DeadlockError.catching { try child.syncChecked {} } } }
    #expect(fromParent??.heldQueue == "held-target.a")
  }

  @Test func barrierFromInsideTheConcurrentQueueIsDetected() {
    let k = IDQ(label: "barrier-inside.k", attributes: .concurrent)
    let error = runBounded { k.sync { DeadlockError.catching { try k.syncChecked(flags: .barrier) {} } } }
    #expect(error??.reason == .barrierFromInside)
    #expect(error??.heldQueue == "barrier-inside.k")
  }

  @Test func concurrentQueueHeldUpTheChainIsNotACycle() {
    let k = IDQ(label: "no-cycle.k", attributes: .concurrent)
    let b = IDQ(label: "no-cycle.b")
    let value = runBounded { k.sync { b.sync { (try? k.syncChecked { 5 }) ?? -1 } } }
    #expect(value == 5)
  }

  @Test func independentQueuesAreNotACycle() {
    let a = IDQ(label: "independent.a")
    let b = IDQ(label: "independent.b")
    let c = IDQ(label: "independent.c")
    let value = runBounded { (try? a.syncChecked { try b.syncChecked { try c.syncChecked { 3 } } }) ?? -1 }
    #expect(value == 3)
  }

  @Test func plainSyncStopsWithTheChainInsteadOfHanging() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let a = IDQ(label: "trap.a")
      let b = IDQ(label: "trap.b")
      a.sync { b.sync { a.sync {} } }
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("'trap.a' → 'trap.b' → 'trap.a'"))
  }
}

extension DeadlockError {
  /// The deadlock error `body` throws, or nil.
  static func catching(_ body: () throws -> Void) -> DeadlockError? {
    do {
      try body()
      return nil
    } catch {
      return error as? DeadlockError
    }
  }
}
