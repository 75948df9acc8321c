import Spindle
import SpindleTestSupport
import Testing

/// The `.offThePool` trait that the CPU-bound suites of this target carry: their bodies must run on its executor's
/// threads, or they hold the two-thread cooperative pool again (CI's ThreadSanitizer run timed out that way).
@Suite(.offThePool) struct OffThePoolTraitTests {
  @Test func aTestOfTheSuiteRunsOnTheTraitsThreads() {
    #expect(offThePoolExecutor.isCurrent)
  }

  @Test(arguments: [1, 2, 3]) func everyCaseOfAParameterizedTestRunsThereToo(_ value: Int) async {
    #expect(offThePoolExecutor.isCurrent, "case \(value)")
    await Task.yield()
    #expect(offThePoolExecutor.isCurrent, "case \(value), after a suspension")
  }
}

@Suite struct WithoutTheTraitTests {
  @Test func aTestWithoutTheTraitRunsElsewhere() {
    #expect(!offThePoolExecutor.isCurrent)
  }

  @Test(.offThePool) func theTraitOnOneTestMovesThatTest() {
    #expect(offThePoolExecutor.isCurrent)
  }
}
