import Dispatch
import Testing

@testable import Spindle

/// `IdentifiableDispatchQueue(queue:)`, the Spindle pod's failable initialiser, written as the pod's specs write it.
@Suite struct PodInitialiserTests {
  @Test func wrapsAPrivateQueue() throws {
    let someQueue = DispatchQueue(label: "com.app.pod.some.queue")
    let identifiableQueue = try #require(IdentifiableDispatchQueue(queue: someQueue))
    #expect(identifiableQueue.queue === someQueue)
    #expect(identifiableQueue.label == "com.app.pod.some.queue")
    #expect(!IDQ.currentQueueIs(identifiableQueue))
    #expect(someQueue.sync { IDQ.currentQueueIs(identifiableQueue) })
    #expect(!identifiableQueue.isConcurrent)
  }

  @Test(arguments: [DispatchQoS.QoSClass.background, .utility, .default, .userInitiated, .userInteractive])
  func refusesGlobalQueues(qos: DispatchQoS.QoSClass) {
    #expect(IdentifiableDispatchQueue(queue: .global(qos: qos)) == nil)
    #expect(IdentifiableDispatchQueue(queue: .global(qos: qos), isConcurrent: true) == nil)
  }

  @Test func sharesTheIdentityWithEveryOtherWrapper() throws {
    let original = IdentifiableDispatchQueue(label: "com.app.pod.shared")
    let podStyle = try #require(IdentifiableDispatchQueue(queue: original.queue))
    let modern = try #require(IdentifiableDispatchQueue(underlyingQueue: original.queue))
    #expect(podStyle.identity === original.identity && modern.identity === original.identity)
    #expect(original.queue.sync { podStyle.isCurrent && modern.isCurrent && original.isCurrent })
    let unrelated = DispatchQueue(label: "com.app.pod.unrelated")
    #expect(!unrelated.sync { podStyle.isCurrent })
  }

  @Test func declaresConcurrencyOfAnAdoptedQueue() throws {
    let concurrent = DispatchQueue(label: "com.app.pod.concurrent", attributes: .concurrent)
    let wrapper = try #require(IdentifiableDispatchQueue(queue: concurrent, isConcurrent: true))
    #expect(wrapper.isConcurrent)
  }

  @Test func acceptsTheMainQueue() throws {
    let main = try #require(IdentifiableDispatchQueue(queue: .main))
    #expect(main.label == DispatchQueue.main.label)
  }
}
