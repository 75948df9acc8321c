import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

@Suite("Lingering workers, process-wide")
struct WorkLingerBoundTests {
  /// Idle workers spin and yield a moment before they give their slot back. Many queues going idle at once must not
  /// put many threads in that loop: on two cores, 194 of them starved every other thread of the test process for
  /// 15–30 s. At most one worker per processor may linger, whatever the number of queues.
  @Test("no more workers linger at once than there are processors, however many queues go idle together")
  func lingeringIsBoundedByTheProcessors() async {
    let queues = (0..<16).map { WorkQueue(name: "linger-\($0)", maxConcurrent: 8) }
    let gate = DispatchSemaphore(value: 0)
    // 16 queues × 8 slots: every worker blocks on the gate, then all are let go together and each finds nothing
    // left to run, so all 128 workers reach `linger` at about the same moment, round after round.
    for _ in 0..<6 {
      for queue in queues {
        for _ in 0..<8 { queue.add { gate.wait() } }
      }
      let allRan = await offPool {
        // Every body is running (the width allows all of them), so all 128 wait on the gate.
        let running = queues.allSatisfy { queue in eventually { queue.runningCount == 8 } }
        for _ in 0..<(16 * 8) { gate.signal() }
        for queue in queues { queue.waitUntilAllFinished() }
        return running
      }
      #expect(allRan, "not every body started")
    }
    let highWater = WorkEngine.lingeringHighWater.load(ordering: .relaxed)
    #expect(highWater >= 1, "no worker lingered: the test did not reach the loop it checks")
    #expect(highWater <= WorkEngine.maxLingering, "\(highWater) workers lingered at once")
  }
}
