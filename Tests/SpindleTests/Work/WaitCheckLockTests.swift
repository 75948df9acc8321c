import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// What runs while a body's wait is checked under ``WorkEngine/waitChecks``, the process-wide lock of the checks.
///
/// What it tries to break: the lock is meant to be the outermost one, held over the check's own code only. But the
/// walk (`AnyWork.mustWait(for:evaluating:)`) holds strong references to the works it passes, and one of them can be
/// the last: work that completed while the walk looked elsewhere, and that everything else let go of meanwhile. Its
/// value is then freed under the lock, so a user deinit runs there; any other body that begins a checked wait waits
/// for that deinit, and a deinit that waits for such a body (or takes a lock such a body holds) never ends.
@Suite("Work: what runs under the wait-check lock", .serialized, .offThePool)
struct WaitCheckLockTests {
  typealias Box = ReviewSession24Tests.Box

  /// A value whose deinit calls `onDeinit`.
  final class Sentinel: Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { onDeinit() }
  }

  /// C waits for B, which waits for W (another queue). While C's walk is at B (B's queue's critical section, through
  /// the debug hook), W completes, B's wait returns and everything else lets go of W: the walk holds its last
  /// reference. W's value's deinit must not run under the wait-check lock: another body's checked wait (P for Z)
  /// begun from that deinit must get through its check meanwhile.
  @Test func aValueFreedByTheWalkIsNotFreedUnderTheWaitCheckLock() {
    let qB = WorkQueue(name: "wcl.B", maxConcurrent: 1)
    let qW = WorkQueue(name: "wcl.W", maxConcurrent: 1)
    let qC = WorkQueue(name: "wcl.C", maxConcurrent: 1)
    let qP = WorkQueue(name: "wcl.P", maxConcurrent: 1)
    let qZ = WorkQueue(name: "wcl.Z", maxConcurrent: 1)
    let (wGate, cGate, pGate, zGate) = (
      SpindleTestSupport.Gate(), SpindleTestSupport.Gate(), SpindleTestSupport.Gate(), SpindleTestSupport.Gate()
    )
    let (bReleased, testReleased) = (SpindleTestSupport.Gate(), SpindleTestSupport.Gate())
    let heldW = Locked<Work<Sentinel>?>(nil)
    let forC = Box<Work<Int>>()
    let forP = Box<Work<Int>>()
    let checker = Box<AnyWork>()
    let hookFired = Locked<Bool>(false)
    let deinitOnChecker = Locked<Bool>(false)
    let probeChecked = Locked<Bool>(false)
    let deinitRan = Locked<Bool>(false)

    let z = qZ.add(name: "Z") { () -> Int in
      zGate.wait(seconds: 10)
      return 26
    }
    forP.set(z)
    let p = qP.add(name: "P") { () -> Int in
      pGate.wait(seconds: 10)
      return (try? forP.get.wait()) ?? -1
    }
    // Held only here (no local of the test): the test lets go of it when C's walk holds it.
    let addW: () -> Work<Sentinel> = {
      qW.add(name: "W") { () -> Sentinel in
        wGate.wait(seconds: 10)
        return Sentinel {
          // The deinit of W's value: which thread, and does another body's check get through meanwhile?
          deinitOnChecker.withLock { $0 = WorkContext.currentWork === checker.getOptional }
          pGate.open()
          let through = eventually(within: 1) { AwaitCheckTests.isRecorded(p, waitingFor: z) }
          probeChecked.withLock { $0 = through }
          // Last: the test then lets Z (and so P's wait) end.
          deinitRan.withLock { $0 = true }
        }
      }
    }
    heldW.withLock { $0 = addW() }
    let b = qB.add(name: "B") { () -> Int in
      do {
        let target = heldW.withLock { $0 }!
        _ = try? target.wait()
      }
      bReleased.open(2)  // the hook and the test
      return 2
    }
    #expect(
      eventually(within: 60) { heldW.withLock { $0.map { AwaitCheckTests.isRecorded(b, waitingFor: $0) } } ?? false })
    forC.set(b)
    let c = qC.add(name: "C") { () -> Int in
      cGate.wait(seconds: 10)
      return (try? forC.get.wait()) ?? -1
    }
    checker.set(c)
    #expect(eventually(within: 60) { c.state == .running })
    qB.engine.criticalSectionHook.withLock {
      $0 = { _, _ in
        // Only C's walk, at B, once.
        guard WorkContext.currentWork === checker.getOptional,
          !hookFired.withLock({ fired in
            defer { fired = true }
            return fired
          })
        else { return }
        wGate.open()
        bReleased.wait(seconds: 5)
        testReleased.wait(seconds: 5)
        // W's worker and queue let go of it.
        usleep(200_000)
      }
    }
    defer { qB.engine.criticalSectionHook.withLock { $0 = nil } }
    cGate.open()
    #expect(bReleased.wait(seconds: 5))
    heldW.withLock { $0 = nil }
    testReleased.open()
    #expect(eventually(within: 60) { deinitRan.withLock { $0 } })
    zGate.open()
    #expect(eventually { [b, c, p, z].allSatisfy { $0.state.isFinal } })
    #expect(hookFired.withLock { $0 }, "C's walk did not pass B")
    #expect(
      deinitOnChecker.withLock { $0 },
      "W's value was not freed by C's walk (the case was not reached)")
    #expect(
      probeChecked.withLock { $0 },
      "another body's checked wait was held up by a deinit run under the wait-check lock")
    #expect(c.result.flatMap { try? $0.get() } == 2)
    #expect(p.result.flatMap { try? $0.get() } == 26)
  }
}
