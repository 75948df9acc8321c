import Dispatch
import Spindle
import Testing

/// An actor pinned to a serial identifiable queue.
actor QueueBoundCounter {
  let executor: QueueExecutor
  private(set) var count = 0

  init(label: String) { executor = QueueExecutor(label: label) }

  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

  func increment() -> Bool {
    count += 1
    return executor.queue.isCurrent
  }
}

@Suite struct QueueExecutorTests {
  @Test func actorMethodsRunOnTheQueue() async {
    let counter = QueueBoundCounter(label: "executor.counter")
    var allOnQueue = true
    for _ in 0..<10 { allOnQueue = await counter.increment() && allOnQueue }
    #expect(allOnQueue)
    #expect(await counter.count == 10)
  }

  @Test func assumeIsolatedWorksFromPlainQueueCode() async {
    let counter = QueueBoundCounter(label: "executor.assume")
    let seen = await withCheckedContinuation { continuation in
      counter.executor.queue.async {
        counter.preconditionIsolated()
        let count = counter.assumeIsolated { counter in
          _ = counter.increment()
          return counter.count
        }
        continuation.resume(returning: count)
      }
    }
    #expect(seen == 1)
    let viaSync = counter.executor.queue.sync { counter.assumeIsolated { $0.count } }
    #expect(viaSync == 1)
    #expect(await counter.count == 1)
  }

  @Test func assumeIsolatedFromAQueueTargetingTheExecutorQueue() {
    let counter = QueueBoundCounter(label: "executor.target")
    let child = DispatchQueue(label: "executor.target.child", target: counter.executor.queue.queue)
    let count = runBounded { child.sync { counter.assumeIsolated { $0.count } } }
    #expect(count == 0)
  }

  @Test func assumeIsolatedOffTheQueueStops() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let counter = QueueBoundCounter(label: "executor.off")
      DispatchQueue(label: "executor.elsewhere").sync { _ = counter.assumeIsolated { $0.count } }
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("expected to run on queue 'executor.off'"))
  }

  @Test func concurrentQueueIsRefusedWithAClearMessage() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      _ = QueueExecutor(queue: IDQ(label: "executor.concurrent", attributes: .concurrent))
    }
    let stderr = text(result?.standardErrorContent)
    #expect(stderr.contains("QueueExecutor needs a serial queue, but 'executor.concurrent' is concurrent"))
  }
}
