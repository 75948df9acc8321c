import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import SpindleFoundation

/// Outcomes of typed operations that end without a normal value.
@Suite struct ResultOperationTests {
  // Finishes with the plain finish(), without a value. ResultOperation's lock protects its state; this subclass
  // adds none.
  final class Forgetful: ResultOperation<Int>, @unchecked Sendable {
    override func main() { finish() }
  }

  // Finishes twice with different values; only the first counts. ResultOperation's lock protects its state;
  // `log` is immutable and locks its own entries.
  final class Twice: ResultOperation<Int>, @unchecked Sendable {
    let log = MisuseLog()
    override func main() {
      finish(returning: 1)
      finish(returning: 2)
    }
    override func reportMisuse(_ misuse: Misuse) { log.record(misuse) }
  }

  @Test func plainFinishWithoutAValueIsAnError() {
    let operation = Forgetful()
    operation.name = "forgetful"
    operation.start()
    #expect(operation.isFinished)
    #expect(throws: OperationError.finishedWithoutOutput(operation: operation.misuseName)) {
      try operation.result?.get()
    }
  }

  @Test func secondFinishDoesNotReplaceTheResult() {
    let operation = Twice()
    operation.start()
    #expect(operation.output == 1)
    #expect(operation.log.all.map(\.kind) == [.finishedTwice])
  }

  @Test func cancelledBeforeStartEndsWithCancelledAndNeverRunsTheBody() throws {
    let ran = Counter()
    let operation = ResultBlockOperation {
      ran.increment()
      return 42
    }
    operation.cancel()
    let queue = OperationQueue()
    queue.addOperation(operation)
    try #require(drain(queue))
    #expect(ran.value == 0)
    #expect(operation.output == nil)
    #expect(throws: OperationError.self) { try operation.result?.get() }
  }

  @Test func resultIsNilUntilFinished() throws {
    let gate = Gate()
    let operation = AsyncBlockOperation<String> { finish in
      DispatchQueue.global().async {
        gate.wait()
        finish("done")
      }
    }
    let queue = OperationQueue()
    queue.addOperation(operation)
    #expect(eventually { operation.isExecuting })
    #expect(operation.result == nil)
    gate.open()
    try #require(drain(queue))
    #expect(operation.output == "done")
  }
}

/// `TaskOperation`: async bodies on an OperationQueue. The tests are `async` and never block a thread of
/// the cooperative pool, which the operations' tasks need. Synchronous tests running in parallel do block
/// it (a machine with 2 cores has 2 such threads), so the bounds are long: they only catch a hang.
@Suite struct TaskOperationTests {
  @Test func asyncBodyFeedsAChain() async throws {
    let fetch = TaskOperation { () async throws -> Image in
      try await Task.sleep(for: .milliseconds(10))
      return makeImage(named: "async")
    }
    let filter = TiltShiftOperation(delay: 0.01)
    fetch |> filter
    let queue = OperationQueue()
    queue.addOperation(fetch)
    queue.addOperation(filter)
    #expect(await drainWithoutBlocking(queue, within: 60))
    #expect(filter.output == blur(makeImage(named: "async")))
  }

  @Test func cancellingTheOperationCancelsTheTask() async throws {
    let started = Counter()
    let fetch = TaskOperation { () async throws -> Image in
      started.increment()
      // Longer than any starved pool can hold the test before it cancels: only the cancellation ends this sleep.
      try await Task.sleep(for: .seconds(3600))
      return makeImage(named: "never")
    }
    let filter = TiltShiftOperation(delay: 0.01)
    fetch |> filter
    let queue = OperationQueue()
    queue.addOperation(fetch)
    queue.addOperation(filter)
    try #require(await eventuallyAsync(within: 60) { started.value == 1 })
    fetch.cancel()
    #expect(await drainWithoutBlocking(queue, within: 60))
    #expect(throws: CancellationError.self) { try fetch.result?.get() }
    #expect(filter.isCancelled && filter.runs.value == 0)
  }
}
