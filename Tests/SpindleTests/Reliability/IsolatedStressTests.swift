import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Spindle

/// Issue 15, item 7: `Isolated` under 64 threads: one writer at a time, no reader during a write, no torn value.
@Suite("Reliability: Isolated")
struct IsolatedStressTests {
  /// Four words a writer sets one by one; a reader that sees them differ saw a torn (half-applied) write.
  struct Wide: Sendable {
    var a: UInt64 = 0
    var b: UInt64 = 0
    var c: UInt64 = 0
    var d: UInt64 = 0
    var writes: Int = 0
  }

  @Test("64 workers × laps (10,000 with SPINDLE_STRESS=full): exclusive writes, no overlap, no torn value")
  func sixtyFourWorkers() async throws {
    let workers = 64
    let laps = Reliability.size(600, full: 10_000)
    let value = Isolated(Wide())
    let sequenced = Isolated<Wide>.usesSequenceLock
    let readers = Atomic<Int>(0)
    let writers = Atomic<Int>(0)
    let overlaps = Atomic<Int>(0)
    let torn = Atomic<Int>(0)
    let syncWrites = Atomic<Int>(0)
    let asyncWrites = Atomic<Int>(0)
    let finished = Countdown(workers)
    for worker in 0..<workers {
      Thread.detachNewThread {
        var random = Reliability.Random(seed: UInt64(worker) &* 7919)
        for lap in 0..<laps {
          let roll = random.next() % 10
          if roll < 7 {
            let seen = value.read { wide -> Bool in
              readers.add(1, ordering: .acquiringAndReleasing)
              defer { readers.subtract(1, ordering: .acquiringAndReleasing) }
              // A small plain value is read from a validated snapshot (sequence lock): such a read may run while a
              // writer works, by design; only torn values count. Locked reads must never overlap a writer.
              if !sequenced && writers.load(ordering: .acquiring) != 0 { overlaps.add(1, ordering: .relaxed) }
              return wide.a == wide.b && wide.b == wide.c && wide.c == wide.d
            }
            if !seen { torn.add(1, ordering: .relaxed) }
          } else if roll < 9 {
            let stamp = UInt64(worker << 32 | lap)
            value.write { wide in
              if writers.add(1, ordering: .acquiringAndReleasing).newValue != 1
                || (!sequenced && readers.load(ordering: .acquiring) != 0)
              {
                overlaps.add(1, ordering: .relaxed)
              }
              wide.a = stamp
              wide.b = stamp
              wide.c = stamp
              wide.d = stamp
              wide.writes += 1
              writers.subtract(1, ordering: .acquiringAndReleasing)
            }
            syncWrites.add(1, ordering: .relaxed)
          } else {
            let stamp = UInt64(worker << 32 | lap) | 1 << 63
            value.writeAsync { wide in
              if writers.add(1, ordering: .acquiringAndReleasing).newValue != 1 {
                overlaps.add(1, ordering: .relaxed)
              }
              wide.a = stamp
              wide.b = stamp
              wide.c = stamp
              wide.d = stamp
              wide.writes += 1
              writers.subtract(1, ordering: .acquiringAndReleasing)
            }
            asyncWrites.add(1, ordering: .relaxed)
          }
        }
        finished.tick()
      }
    }
    #expect(await finished.wait(seconds: Reliability.seconds(120, full: 1200)), "\(finished.left) workers hung")
    // A read applies every pending asynchronous write first, so the count is exact.
    let writes = value.read(\.writes)
    #expect(overlaps.load(ordering: .relaxed) == 0, "a reader overlapped a writer or two writers overlapped")
    #expect(torn.load(ordering: .relaxed) == 0, "a reader saw a torn value")
    #expect(writes == syncWrites.load(ordering: .relaxed) + asyncWrites.load(ordering: .relaxed), "a write was lost")
    print(
      "reliability isolated: \(workers)×\(laps) laps, overlaps \(overlaps.load(ordering: .relaxed)), "
        + "torn \(torn.load(ordering: .relaxed)), writes \(writes) of "
        + "\(syncWrites.load(ordering: .relaxed) + asyncWrites.load(ordering: .relaxed))")
  }
}
