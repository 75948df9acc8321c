import Dispatch
import Spindle
import Testing

@Suite struct IdentifiableDispatchQueueParityTests {
  @Test func currentQueueIsTrueOnlyOnTheQueue() {
    let queue = IdentifiableDispatchQueue(label: "com.spindle.test.serial")
    #expect(!IDQ.currentQueueIs(queue))
    let inside = queue.queue.sync { IDQ.currentQueueIs(queue) }
    #expect(inside)
  }
}
