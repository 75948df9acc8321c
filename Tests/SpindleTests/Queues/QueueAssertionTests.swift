import Dispatch
import Spindle
import Testing

/// `preconditionCurrent()` and `assertCurrent()`.
@Suite struct QueueAssertionTests {
  @Test func assertionsPassOnTheQueueAndThroughTheChain() {
    let a = IDQ(label: "assert.a")
    let b = IDQ(label: "assert.b")
    let done = runBounded {
      a.sync { a.preconditionCurrent() }
      a.sync { b.sync { a.preconditionCurrent() } }
      a.sync { a.assertCurrent() }
      return true
    }
    #expect(done == true)
  }

  @Test func preconditionNamesExpectedAndCurrentQueue() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let expected = IDQ(label: "expected.queue")
      let other = IDQ(label: "actual.queue")
      other.sync { expected.preconditionCurrent("writes happen on the expected queue") }
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("expected to run on queue 'expected.queue' but running on 'actual.queue'"))
    #expect(stderr.contains("writes happen on the expected queue"))
  }

  @Test func preconditionNamesTheSyncChain() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let expected = IDQ(label: "expected.q")
      let a = IDQ(label: "chain.q1")
      let b = IDQ(label: "chain.q2")
      a.sync { b.sync { expected.preconditionCurrent() } }
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("sync chain: 'chain.q1' → 'chain.q2'"))
  }

  @Test func assertCurrentStopsDebugBuildsOffTheQueue() async {
    #if DEBUG
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        IDQ(label: "assert.off").assertCurrent()
      }
      let stderr = text(result?.standardErrorContent)
      #expect(stderr.contains("expected to run on queue 'assert.off'"))
    #else
      IDQ(label: "assert.off").assertCurrent()
    #endif
  }
}
