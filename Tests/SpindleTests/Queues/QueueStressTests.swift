import Dispatch
import Spindle
import SpindleTestSupport
import Testing

/// Many threads nesting `sync` across a few queues at once: answers stay right and nothing hangs.
///
/// Bounded by default; `SPINDLE_STRESS=1` runs a hundred times more.
@Suite struct QueueStressTests {
  static let rounds = Stress.size(small: 2_000, large: 200_000)

  @Test func concurrentNestedSyncsKeepTheirChains() {
    let queues = (0..<4).map { IDQ(label: "stress.\($0)") }
    let wrong = Shared(0)
    let total = Shared(0)
    let finished = runBounded(seconds: 60) {
      DispatchQueue.concurrentPerform(iterations: 8) { worker in
        var local = 0
        for round in 0..<(Self.rounds / 8) {
          // Always take queues in ascending order (no lock-order inversion between workers).
          let first = (worker + round) % 3
          let outer = queues[first]
          let inner = queues[first + 1]
          let ok = outer.sync {
            inner.sync { outer.isCurrent && inner.isCurrent && (first + 1 == 3 || !queues[3].isCurrent) }
          }
          if !ok { wrong.update { $0 += 1 } }
          if queues.contains(where: \.isCurrent) { wrong.update { $0 += 1 } }
          local += 1
        }
        total.update { $0 += local }
      }
      return true
    }
    #expect(finished == true)
    #expect(wrong.value == 0)
    #expect(total.value == Self.rounds / 8 * 8)
  }

  @Test func deadlockDetectionUnderContention() {
    let a = IDQ(label: "stress.cycle.a")
    let b = IDQ(label: "stress.cycle.b")
    let detected = Shared(0)
    let finished = runBounded(seconds: 60) {
      DispatchQueue.concurrentPerform(iterations: 4) { _ in
        for _ in 0..<(Self.rounds / 20) {
          a.sync {
            b.sync {
              if DeadlockError.catching({ try a.syncChecked {} }) != nil { detected.update { $0 += 1 } }
            }
          }
        }
      }
      return true
    }
    #expect(finished == true)
    #expect(detected.value == Self.rounds / 20 * 4)
  }
}
