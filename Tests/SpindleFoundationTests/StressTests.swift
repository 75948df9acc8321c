import Dispatch
import Foundation
import SpindleTestSupport
import Testing

@testable import SpindleFoundation

/// Many async operations finishing from many threads; cancel racing finish; bounded by default.
@Suite(.offThePool) struct AsyncOperationStressTests {
  @Test func thousandsOfAsyncOperationsFinishFromManyThreads() throws {
    let count = Stress.scaled(2_000)
    let queue = OperationQueue()
    let completions = Counter()
    let operations = (0..<count).map { index in
      let operation = AsyncBlockOperation<Int> { finish in
        DispatchQueue.global().async { finish(index * 2) }
      }
      operation.completionBlock = { completions.increment() }
      return operation
    }
    queue.addOperations(operations, waitUntilFinished: false)
    try #require(drain(queue, within: 60))
    #expect(operations.allSatisfy { $0.isFinished && !$0.isExecuting })
    #expect(operations.enumerated().allSatisfy { $0.element.output == $0.offset * 2 })
    #expect(eventually { completions.value == count }, "each operation finished exactly once")
  }

  @Test func finishRacingFinishHasOneWinnerAndOneReport() throws {
    let count = Stress.scaled(500)
    let queue = OperationQueue()
    let operations = (0..<count).map { _ in
      ProbeOperation { op in
        // Two threads race to finish the same operation.
        DispatchQueue.global().async { op.finish() }
        DispatchQueue.global().async { op.finish() }
      }
    }
    let completions = Counter()
    for operation in operations { operation.completionBlock = { completions.increment() } }
    queue.addOperations(operations, waitUntilFinished: false)
    try #require(drain(queue, within: 60))
    #expect(operations.allSatisfy { $0.isFinished })
    // The loser reports just after the winner finished: allow it to land.
    #expect(eventually { operations.allSatisfy { $0.log.all.count == 1 } })
    #expect(operations.allSatisfy { $0.log.all.first?.kind == .finishedTwice })
    #expect(eventually { completions.value == count })
  }

  @Test func cancelRacingStartAndFinishAlwaysEndsFinished() throws {
    let count = Stress.scaled(1_000)
    let queue = OperationQueue()
    let operations = (0..<count).map { _ in
      ProbeOperation { op in
        DispatchQueue.global().async { op.finish() }
      }
    }
    let completions = Counter()
    for operation in operations { operation.completionBlock = { completions.increment() } }
    queue.addOperations(operations, waitUntilFinished: false)
    // Cancel from several threads while the queue starts and finishes them.
    let boxed = UncheckedBox(operations)
    DispatchQueue.concurrentPerform(iterations: 4) { lane in
      for index in stride(from: lane, to: count, by: 4) { boxed.value[index].cancel() }
    }
    try #require(drain(queue, within: 60))
    #expect(operations.allSatisfy { $0.isFinished && !$0.isExecuting })
    #expect(operations.allSatisfy { $0.log.all.isEmpty }, "no double finish, no double start")
    #expect(operations.allSatisfy { $0.mainRuns.value <= 1 })
    #expect(eventually { completions.value == count })
  }

  @Test func pipelinesCancelledAtRandomPointsAllDrain() throws {
    let count = Stress.scaled(200)
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 8
    var chains: [(ResultBlockOperation<Int>, TransformOperation<Int, Int>, TransformOperation<Int, Int>)] = []
    for index in 0..<count {
      let load = ResultBlockOperation { index }
      let square = TransformOperation { (value: Int) in value * value }
      let plusOne = TransformOperation { (value: Int) in value + 1 }
      load |> square |> plusOne
      chains.append((load, square, plusOne))
    }
    queue.addOperations(chains.flatMap { [$0.0, $0.1, $0.2] as [Operation] }, waitUntilFinished: false)
    var generator = SystemRandomNumberGenerator()
    for (load, square, plusOne) in chains {
      switch Int.random(in: 0..<4, using: &generator) {
      case 0: load.cancel()
      case 1: square.cancel()
      case 2: plusOne.cancel()
      default: break
      }
    }
    try #require(drain(queue, within: 60))
    for (index, (load, square, plusOne)) in chains.enumerated() {
      #expect(load.isFinished && square.isFinished && plusOne.isFinished)
      if load.isCancelled || square.isCancelled || plusOne.isCancelled {
        // Whatever was cancelled, the end of the chain never carries a stale or partial value. (Whether a cancelled
        // link fed the next one depends on timing: a `cancel()` that began while `load` was finishing can mark it
        // cancelled after `square` read its value; DependencyPageTests checks the no-feed rule deterministically.)
        if let output = plusOne.output { #expect(output == index * index + 1) }
      } else {
        #expect(plusOne.output == index * index + 1)
      }
    }
  }
}
