import Dispatch
import Foundation
import Spindle
import Synchronization
import Testing

/// Issue 15, item 8: every would-be deadlock returns an error, runs inline, or stops with a message — under a
/// watchdog, so a hang fails the test instead of the run. Cases that stop the program run in a child process.
@Suite("Reliability: would-be deadlocks")
struct WouldBeDeadlockTests {
  /// How a case ended.
  enum Ending: Equatable {
    case inline
    case error(DeadlockError.Reason)
    case hung
  }

  /// Runs `body` on a Dispatch thread with a watchdog of `seconds`.
  static func watch(seconds: Double = 60, _ body: @escaping @Sendable () -> Ending) async -> Ending {
    let outcome = TSanVisibleMutex<Ending?>(nil)
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      let ending = body()
      outcome.withLock { $0 = ending }
      done.signal()
    }
    let finished = await blockingWait(seconds: seconds) { done.wait(timeout: $0) == .success }
    return finished ? outcome.withLock { $0 } ?? .hung : .hung
  }

  static func checked(_ body: () throws -> Void) -> Ending {
    do {
      try body()
      return .inline
    } catch let error as DeadlockError {
      return .error(error.reason)
    } catch {
      return .hung
    }
  }

  @Test("A→A: sync onto the current serial queue runs inline (plain and checked)")
  func selfSync() async {
    let a = IDQ(label: "dl.self")
    #expect(await Self.watch { a.sync { a.sync { .inline } } } == .inline)
    #expect(await Self.watch { a.sync { Self.checked { try a.syncChecked {} } } } == .inline)
  }

  @Test("A→B→A: syncChecked throws a cycle error naming the chain")
  func twoQueueCycle() async {
    let a = IDQ(label: "dl.a")
    let b = IDQ(label: "dl.b")
    #expect(await Self.watch { a.sync { b.sync { Self.checked { try a.syncChecked {} } } } } == .error(.cycle))
  }

  @Test("target-queue chains: a queue targeting the current one runs inline; from a sibling chain, an error")
  func targetChains() async {
    let root = IDQ(label: "dl.root")
    let child = IDQ(label: "dl.child", target: root.queue)
    let grandchild = IDQ(label: "dl.grandchild", target: child.queue)
    let other = IDQ(label: "dl.other")
    // On the child, the root is already held: a sync onto the root is a re-entry, run inline.
    #expect(await Self.watch { child.sync { Self.checked { try root.syncChecked {} } } } == .inline)
    #expect(await Self.watch { grandchild.sync { Self.checked { try root.syncChecked {} } } } == .inline)
    // Holding the root (through a sync that went via another queue), a sync onto its descendant would wait for
    // the root, which this thread holds: an error, not a hang.
    let held = await Self.watch { root.sync { other.sync { Self.checked { try grandchild.syncChecked {} } } } }
    #expect(held != .hung, "hung")
    #expect(held == .error(.cycle), "\(held)")
  }

  @Test("a barrier sync inside a read sync on the same concurrent queue throws instead of hanging")
  func barrierInsideRead() async {
    let k = IDQ(label: "dl.concurrent", attributes: .concurrent)
    #expect(
      await Self.watch { k.sync { Self.checked { try k.syncChecked(flags: .barrier) {} } } }
        == .error(.barrierFromInside))
  }

  @Test("a write inside a read of a small plain Isolated value runs: its readers hold no lock")
  func isolatedWriteInsideSequenceLockedRead() {
    let value = Isolated(0)
    value.read { _ in value.write { $0 += 1 } }
    #expect(value.read { $0 } == 1)
  }

  @Test("a write requested inside a read of the same Isolated (locked value) stops with a message (child process)")
  func isolatedWriteInsideRead() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 20) {
        report("hung: a write inside a read of the same Isolated waited forever")
        exit(42)
      }
      let value = Isolated(["zero"])  // not plain: read under the lock
      value.read { _ in value.write { $0.append("one") } }
      report("returned: the nested write ran")
      exit(0)
    }
    let output = text(result?.standardErrorContent)
    print("reliability isolated re-entry: exit \(String(describing: result?.exitStatus)): \(output.suffix(300))")
    #expect(result?.exitStatus != .exitCode(42), "hung: \(output)")
    #expect(!output.isEmpty, "the child stopped without a message")
  }

  // `wait()` on a work item from a body of a full queue (the item can never start) throws.
  @Test(
    "wait() from a body on work that cannot start (its queue is full) throws instead of hanging")
  func waitOnUnstartableWork() async {
    let queue = WorkQueue(name: "dl.full", maxConcurrent: 1)
    queue.suspend()
    let box = WorkBox()
    let outer = queue.add(name: "outer") { () -> String in
      guard let inner = box.work else { return "no handle" }
      do {
        _ = try inner.wait()
        return "returned"
      } catch {
        return "threw"
      }
    }
    box.work = queue.add(name: "inner") { "inner" }
    queue.resume()
    let outcome = await blockingWait(seconds: 60) { deadline in
      while DispatchTime.now() < deadline {
        if outer.state.isFinal { return true }
        usleep(1_000)
      }
      return false
    }
    #expect(outcome, "wait() hung")
    #expect(outer.result.flatMap { try? $0.get() } == "threw")
  }
}
