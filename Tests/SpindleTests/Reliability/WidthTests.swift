import Dispatch
import Foundation
import Spindle
import Synchronization
import Testing

/// Issue 15, item 6: the width is a hard bound, order at width 1 is exact, and threads stay near the width.
@Suite("Reliability: width")
struct WidthTests {
  /// Tracks how many bodies run at once and the most ever seen.
  final class HighWater: Sendable {
    private let active = Atomic<Int>(0)
    private let peakStorage = Atomic<Int>(0)

    func enter() {
      let now = active.add(1, ordering: .acquiringAndReleasing).newValue
      var seen = peakStorage.load(ordering: .relaxed)
      while now > seen {
        let (exchanged, original) = peakStorage.compareExchange(
          expected: seen, desired: now, ordering: .relaxed)
        if exchanged { break }
        seen = original
      }
    }

    func leave() { active.subtract(1, ordering: .acquiringAndReleasing) }

    var peak: Int { peakStorage.load(ordering: .relaxed) }
  }

  @Test("the high-water mark never exceeds the width", arguments: [1, 2, 8, 64])
  func highWaterMark(width: Int) async throws {
    let items = Reliability.size(max(400, width * 12), full: max(20_000, width * 500))
    let queue = WorkQueue(name: "width.\(width)", maxConcurrent: width)
    let mark = HighWater()
    for index in 0..<items {
      switch index % 3 {
      case 0:
        queue.add {
          mark.enter()
          usleep(index % 7 == 0 ? 200 : 0)  // some bodies block, so more of them overlap
          mark.leave()
        }
      case 1:
        queue.add { () async -> Void in
          mark.enter()
          await Task.yield()
          mark.leave()
        }
      default:
        queue.addCallback { (finish: WorkFinish<Void>) in
          mark.enter()
          DispatchQueue.global().async {
            mark.leave()
            finish(())
          }
        }
      }
    }
    #expect(await drained(queue), "width \(width): did not drain")
    #expect(mark.peak <= width, "width \(width): \(mark.peak) bodies ran at once")
    #expect(mark.peak >= 1)
    #expect(queue.runningCount == 0)
    print("reliability width \(width): \(items) items, high-water mark \(mark.peak)")
  }

  @Test("width 1 starts ready work in exact priority order, first in first out within a priority")
  func exactOrderAtWidthOne() async throws {
    let count = Reliability.size(3_000, full: 50_000)
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    let queue = WorkQueue(name: "order", maxConcurrent: 1)
    let order = TSanVisibleMutex<[Int]>([])
    queue.suspend()
    var priorities: [WorkPriority] = []
    for index in 0..<count {
      let priority = WorkPriority.allCases[Int(random.next() % UInt64(WorkPriority.allCases.count))]
      priorities.append(priority)
      queue.add(priority: priority) { order.withLock { $0.append(index) } }
    }
    queue.resume()
    #expect(await drained(queue))
    // Stable: higher priority first, then the order of adding.
    let expected = (0..<count).sorted { lhs, rhs in
      priorities[lhs] != priorities[rhs] ? priorities[lhs] > priorities[rhs] : lhs < rhs
    }
    let actual = order.withLock { $0 }
    let firstDifference = zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }
    #expect(actual == expected, "seed \(seed): first difference at \(String(describing: firstDifference))")
  }

  /// Runs in a child process so that no other test's threads are counted: bodies block (usleep), which is when
  /// Dispatch would add threads, and a sampler records the process's peak thread count above its baseline.
  @Test("a queue of width N uses at most N + 4 threads while its bodies block (child process)")
  func peakThreadCount() async throws {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      var failed = false
      for width in [1, 2, 8, 64] {
        // Let threads from the previous round retire before measuring the baseline.
        usleep(300_000)
        let baseline = procStatus("Threads") ?? 0
        let stop = Atomic<Bool>(false)
        let peak = Atomic<Int>(0)
        let sampler = Thread {
          while !stop.load(ordering: .relaxed) {
            let now = procStatus("Threads") ?? 0
            if now > peak.load(ordering: .relaxed) { peak.store(now, ordering: .relaxed) }
            usleep(200)
          }
        }
        sampler.start()
        let queue = WorkQueue(name: "threads.\(width)", maxConcurrent: width)
        for _ in 0..<(width * 6) { queue.add { usleep(3_000) } }
        blockUntilFinished(queue)
        stop.store(true, ordering: .relaxed)
        usleep(5_000)
        // The sampler thread itself is one of the counted threads.
        let extra = peak.load(ordering: .relaxed) - baseline - 1
        report("width=\(width) baseline=\(baseline) extra\(width)=\(extra)")
        if extra > width + 4 { failed = true }
      }
      exit(failed ? 1 : 0)
    }
    let output = text(result?.standardErrorContent)
    print("reliability threads: \(output)")
    for width in [1, 2, 8, 64] {
      let extra = reported("extra\(width)", in: result?.standardErrorContent)
      #expect(extra != nil, "no figure for width \(width): \(output)")
      if let extra { #expect(extra <= width + 4, "width \(width) used \(extra) threads: \(output)") }
    }
  }
}
