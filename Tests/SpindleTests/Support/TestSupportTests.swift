import Dispatch
import Foundation
import SpindleTestSupport
import Testing

/// The shared helpers themselves: a helper that lies makes every test that uses it worthless.
@Suite struct TestSupportTests {
  @Test func stressIsReadOneWay() {
    #expect(Stress.isEnabled("1"))
    for value in [nil, "", "0", "yes", "true", " 1"] { #expect(!Stress.isEnabled(value), "\(value ?? "unset")") }
    #expect(Stress.size(small: 3, large: 30) == (Stress.enabled ? 30 : 3))
    #expect(Stress.scaled(4) == (Stress.enabled ? 40 : 4))
  }

  @Test func counterCountsAndTracksOverlap() async {
    let counter = Counter()
    await offPool {
      DispatchQueue.concurrentPerform(iterations: 100) { _ in counter.tracking { _ = counter.increment() } }
    }
    counter.add(5)
    #expect(counter.value == 105)
    #expect((1...100).contains(counter.peakConcurrency))
  }

  @Test func gateWaitsAreBoundedAndOpenLetsThrough() async {
    // Qualified: WorkQueueSemanticsTests declares a Gate of its own in this module.
    let gate = SpindleTestSupport.Gate()
    #expect(await offPool { gate.wait(seconds: 0.01) } == false, "a closed gate times out")
    gate.open(2)
    #expect(await offPool { gate.wait() && gate.wait() })
  }

  @Test func eventuallyReturnsWhetherTheConditionHeld() async {
    #expect(await eventually(within: 1) { true })
    #expect(await eventually(within: 0.01) { false } == false)
    #expect(await offPool { eventually(within: 0.01) { false } } == false, "the blocking overload too")
  }

  @Test func temporaryFoldersAreRemoved() throws {
    let kept = try withTemporaryFolder { folder in
      #expect(FileManager.default.fileExists(atPath: folder.path))
      return folder
    }
    #expect(!FileManager.default.fileExists(atPath: kept.path))
  }
}
