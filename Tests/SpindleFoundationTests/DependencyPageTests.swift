import Dispatch
import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import SpindleFoundation

/// Page "NSOperation Dependencies": typed values passed along a chain built with `|>`.
@Suite struct NSOperationDependenciesPageTests {
  @Test func chainPassesTheImageAlong() throws {
    let imageLoad = ImageLoadOperation(imageName: "train_day.jpg")
    let filter = TiltShiftOperation(delay: 0.01)
    let chained = imageLoad |> filter
    #expect(chained === filter, "|> returns the right-hand operation")
    #expect(filter.dependencies == [imageLoad])
    let queue = OperationQueue()
    queue.addOperations([imageLoad, filter], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(filter.output == blur(makeImage(named: "train_day.jpg")))
  }

  @Test func operatorIsLeftAssociativeAndWiresEveryLink() throws {
    let load = ResultBlockOperation { [1, 2, 3] }
    let double = TransformOperation { (values: [Int]) in values.map { $0 * 2 } }
    let total = TransformOperation { (values: [Int]) in values.reduce(0, +) }
    let describe = TransformOperation { (sum: Int) in "sum \(sum)" }
    let last = load |> double |> total |> describe
    #expect(last === describe)
    #expect(double.dependencies == [load])
    #expect(total.dependencies == [double])
    #expect(describe.dependencies == [total])
    let queue = OperationQueue()
    // Added in reverse: the dependencies, not the order, decide.
    queue.addOperations([describe, total, double, load], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(describe.output == "sum 12")
  }

  @Test func untypedOperatorOnlyOrders() throws {
    let order = Locked<[String]>([])
    let first = BlockOperation { order.withLock { $0.append("first") } }
    let second = BlockOperation { order.withLock { $0.append("second") } }
    let third = ResultBlockOperation { order.withLock { $0.append("third") } }
    let result = first |> second |> third
    #expect(result === third)
    let queue = OperationQueue()
    queue.addOperations([third, second, first], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(order.withLock { $0 } == ["first", "second", "third"])
  }

  @Test func dependentWaitsForAnAsyncProviderToReallyFinish() throws {
    let gate = Gate()
    let load = AsyncBlockOperation<Image> { finish in
      DispatchQueue.global().async {
        gate.wait()
        finish(makeImage(named: "late"))
      }
    }
    let filter = TiltShiftOperation(delay: 0.01)
    load |> filter
    let queue = OperationQueue()
    queue.addOperations([load, filter], waitUntilFinished: false)
    Thread.sleep(forTimeInterval: 0.05)
    #expect(filter.runs.value == 0 && filter.state == .ready, "main() of the provider returned, its work did not")
    gate.open()
    try #require(drain(queue))
    #expect(filter.output == blur(makeImage(named: "late")))
  }

  @Test func failedProviderPassesItsErrorWithoutRunningTheDependent() throws {
    struct NotFound: Error, Equatable { let name: String }
    let load = AsyncBlockOperation<Image> { finish in
      DispatchQueue.global().async { finish.fail(NotFound(name: "missing.jpg")) }
    }
    let filter = TiltShiftOperation(delay: 0.01)
    let output = TransformOperation { (image: Image) in image.count }
    load |> filter |> output
    let queue = OperationQueue()
    queue.addOperations([load, filter, output], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(filter.runs.value == 0)
    #expect(throws: NotFound(name: "missing.jpg")) { try output.result?.get() }
    #expect(!output.isCancelled, "a failure is not a cancellation")
  }

  @Test func cancelledProviderNeverFeedsAStaleValue() throws {
    // The provider's body ignores cancellation and produces a value anyway.
    let started = Gate()
    let proceed = Gate()
    let load = AsyncBlockOperation<Image> { finish in
      DispatchQueue.global().async {
        started.open()
        proceed.wait()
        finish(makeImage(named: "stale"))
      }
    }
    let filter = TiltShiftOperation(delay: 0.01)
    load |> filter
    let queue = OperationQueue()
    queue.addOperations([load, filter], waitUntilFinished: false)
    try #require(started.wait())
    load.cancel()
    proceed.open()
    try #require(drain(queue))
    #expect(load.output == makeImage(named: "stale"))
    #expect(filter.runs.value == 0)
    #expect(filter.isCancelled, "cancellation flows down the chain")
    #expect(filter.output == nil)
    #expect(throws: OperationError.self) { try filter.result?.get() }
  }

  @Test func missingInputIsAClearError() throws {
    let lonely = TransformOperation { (image: Image) in image.count }
    lonely.name = "lonely"
    // A provider of the wrong type: the untyped |> only adds the dependency.
    let words = ResultBlockOperation { "not an image" }
    words |> lonely
    let queue = OperationQueue()
    queue.addOperations([words, lonely], waitUntilFinished: false)
    try #require(drain(queue))
    guard case .failure(let failure)? = lonely.result, let operationError = failure as? OperationError,
      case .missingInput(let name) = operationError
    else {
      Issue.record("expected OperationError.missingInput, got \(String(describing: lonely.result))")
      return
    }
    #expect(name.contains("'lonely'"))
    #expect(operationError.description.contains("setInput(from:)"))
  }

  @Test func inputSetDirectlyWinsOverTheProvider() throws {
    let load = ResultBlockOperation { [1, 1] }
    let count = TransformOperation { (values: [Int]) in values.count }
    load |> count
    count.input = [1, 2, 3]
    let queue = OperationQueue()
    queue.addOperations([load, count], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(count.output == 3)
  }
}
