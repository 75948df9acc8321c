import Dispatch
import Foundation
import SpindleFoundation
import Testing

/// The README's SpindleFoundation example, verbatim between the markers, and what it must produce.
@Suite struct ReadmeExampleTests {
  @Test func typedOperations() throws {
    // README: operations
    let load = AsyncBlockOperation<[UInt8]> { finish in
      DispatchQueue.global().async { finish([3, 1, 2]) }  // a callback API that answers later, elsewhere
    }
    let sort = TransformOperation { (bytes: [UInt8]) in bytes.sorted() }
    let total = TransformOperation { (bytes: [UInt8]) in bytes.reduce(0) { $0 + Int($1) } }
    load |> sort |> total  // dependencies *and* typed inputs
    let queue = OperationQueue()
    queue.addOperations([load, sort, total], waitUntilFinished: true)
    let sorted = sort.output  // [1, 2, 3]
    let sum = total.output  // 6
    // END README
    #expect(sorted == [1, 2, 3])
    #expect(sum == 6)
  }
}
