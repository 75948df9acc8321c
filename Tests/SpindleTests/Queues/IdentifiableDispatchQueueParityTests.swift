import Dispatch
import Spindle
import Testing

/// Every use shown in the Spindle pod's README, with the behaviour it documents.
@Suite struct IdentifiableDispatchQueueParityTests {
  @Test func currentQueueIsTrueOnlyOnTheQueue() {
    let queue = IdentifiableDispatchQueue(label: "com.spindle.test.serial")
    let other = IdentifiableDispatchQueue(label: "com.spindle.test.other")
    #expect(!IDQ.currentQueueIs(queue))
    #expect(queue.queue.sync { IDQ.currentQueueIs(queue) })
    #expect(!other.queue.sync { IDQ.currentQueueIs(queue) })
    #expect(!DispatchQueue.global().sync { IDQ.currentQueueIs(queue) })
  }

  @Test func initialisersMirrorDispatchQueue() {
    let serialQueue = IdentifiableDispatchQueue(label: "com.app.serial.queue")
    let concurrentQueue = IdentifiableDispatchQueue(label: "com.app.concurrent.queue", attributes: [.concurrent])
    let qosQueue = IdentifiableDispatchQueue(
      label: "com.app.concurrent.qos.queue",
      qos: .background,
      attributes: [.concurrent]
    )
    let target = DispatchQueue(label: "com.app.target")
    let full = IdentifiableDispatchQueue(
      label: "com.app.full",
      qos: .userInitiated,
      attributes: [],
      autoreleaseFrequency: .workItem,
      target: target
    )
    #expect(serialQueue.queue.label == "com.app.serial.queue")
    #expect(serialQueue.label == "com.app.serial.queue")
    #expect(!serialQueue.isConcurrent)
    #expect(concurrentQueue.isConcurrent)
    #expect(qosQueue.queue.qos.qosClass == .background)
    #expect(full.queue.qos.qosClass == .userInitiated)
    for queue in [serialQueue, concurrentQueue, qosQueue, full] {
      #expect(queue.queue.sync { IDQ.currentQueueIs(queue) }, "\(queue.label)")
    }
  }

  @Test func concurrentQueueRunsBlocksInParallel() {
    let queue = IdentifiableDispatchQueue(label: "com.app.concurrent.parallel", attributes: [.concurrent])
    let inside = Shared(0)
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      queue.queue.sync { if IDQ.currentQueueIs(queue) { inside.update { $0 += 1 } } }
    }
    #expect(inside.value == 8)
  }

  @Test func underlyingQueueIsWrapped() throws {
    let someQueue = DispatchQueue(label: "com.app.some.queue")
    let identifiableQueue: IdentifiableDispatchQueue? = IdentifiableDispatchQueue(underlyingQueue: someQueue)
    let queue = try #require(identifiableQueue)
    #expect(queue.queue === someQueue)
    #expect(!IDQ.currentQueueIs(queue))
    #expect(someQueue.sync { IDQ.currentQueueIs(queue) })
  }

  @Test(arguments: [
    DispatchQoS.QoSClass.background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
  ])
  func globalQueuesAreRefused(qos: DispatchQoS.QoSClass) {
    #expect(IdentifiableDispatchQueue(underlyingQueue: .global(qos: qos)) == nil)
    #expect(IdentifiableDispatchQueue(underlyingQueue: .global(qos: qos), isConcurrent: true) == nil)
  }

  @Test func refusingGlobalQueuesPreventsFalsePositives() {
    // A concurrent queue with the same QoS retargets the global queue; it must not look identifiable.
    let concurrent = DispatchQueue(label: "com.app.unrelated", attributes: .concurrent)
    let serial = IdentifiableDispatchQueue(label: "com.app.serial")
    #expect(IdentifiableDispatchQueue(underlyingQueue: .global()) == nil)
    #expect(!concurrent.sync { IDQ.currentQueueIs(serial) })
  }

  @Test func mainQueueIsAcceptedAsUnderlyingQueue() async throws {
    let main = try #require(IdentifiableDispatchQueue(underlyingQueue: .main))
    #expect(main.label == DispatchQueue.main.label)
    let onMain = await withCheckedContinuation { continuation in
      DispatchQueue.main.async { continuation.resume(returning: IDQ.currentQueueIs(main)) }
    }
    #expect(onMain)
    #expect(await MainActor.run { IDQ.main.isCurrent })
    #expect(!DispatchQueue(label: "com.app.off-main").sync { main.isCurrent })
  }

  @Test func secondWrapperReusesTheIdentityInsteadOfClobbering() throws {
    let first = IdentifiableDispatchQueue(label: "com.app.shared")
    let second = try #require(IdentifiableDispatchQueue(underlyingQueue: first.queue, isConcurrent: true))
    let third = try #require(IdentifiableDispatchQueue(underlyingQueue: first.queue))
    let answers = first.queue.sync { [first.isCurrent, second.isCurrent, third.isCurrent] }
    #expect(answers == [true, true, true])
    // The first wrapper's knowledge (serial) wins over a later declaration.
    #expect(!second.isConcurrent)
    // A wrapper of another queue is not confused with it.
    let unrelated = IdentifiableDispatchQueue(label: "com.app.unrelated.serial")
    #expect(!unrelated.queue.sync { first.isCurrent || second.isCurrent })
  }

  @Test func concurrentAdoptionAgreesOnOneIdentity() {
    let raw = DispatchQueue(label: "com.app.adopted.concurrently")
    let wrappers = Shared<[IdentifiableDispatchQueue]>([])
    DispatchQueue.concurrentPerform(iterations: 16) { _ in
      if let wrapper = IdentifiableDispatchQueue(underlyingQueue: raw) { wrappers.update { $0.append(wrapper) } }
    }
    let all = wrappers.value
    #expect(all.count == 16)
    #expect(raw.sync { all.allSatisfy(\.isCurrent) })
  }

  // The README's "Deadlock prevention" pattern.
  @Test func deadlockPreventionPattern() {
    let writeQueue = IdentifiableDispatchQueue(label: "com.app.database-write.queue")
    let saved = Shared<[Bool]>([])
    @Sendable func save(_ object: Int) {
      saved.update { $0.append(IDQ.currentQueueIs(writeQueue)) }
    }
    @Sendable func write(_ object: Int) {
      if IdentifiableDispatchQueue.currentQueueIs(writeQueue) {
        save(object)
      } else {
        writeQueue.queue.sync { save(object) }
      }
    }
    let finished = runBounded {
      write(1)
      writeQueue.queue.sync { write(2) }
      return true
    }
    #expect(finished == true)
    #expect(saved.value == [true, true])
  }

  // The README's "Queue Assertion" pattern.
  @Test func queueAssertionPattern() async {
    let commandQueue = IdentifiableDispatchQueue(label: "com.app.command-processing.queue")
    let cache = Shared<[Int]>([])
    @Sendable func emptyOutdated() {
      precondition(IDQ.currentQueueIs(commandQueue), "This method should only be called on the commandQueue")
      cache.update { $0.removeAll() }
    }
    @Sendable func fillCache(_ object: Int) {
      precondition(IDQ.currentQueueIs(commandQueue), "This method should only be called on the commandQueue")
      cache.update { $0.append(object) }
    }
    await withCheckedContinuation { continuation in
      commandQueue.queue.async {
        emptyOutdated()
        fillCache(42)
        continuation.resume()
      }
    }
    #expect(cache.value == [42])
  }

  @Test func queueAssertionPatternStopsOffTheQueue() async {
    await #expect(processExitsWith: .failure) {
      let commandQueue = IdentifiableDispatchQueue(label: "com.app.command-processing.queue")
      precondition(IDQ.currentQueueIs(commandQueue), "This method should only be called on the commandQueue")
    }
  }
}
