import Foundation
import Spindle

/// An operation that runs a synchronous closure and keeps its typed result: `BlockOperation` with an output.
///
/// If the operation is cancelled before it starts, the closure never runs and the result is
/// `.failure(OperationError.cancelled)`. A thrown error becomes the result. The closure is released once
/// it has run.
///
/// ```swift
/// let sum = ResultBlockOperation { (1...100).reduce(0, +) }
/// queue.addOperations([sum], waitUntilFinished: true)
/// sum.output  // 5050
/// ```
// `body` (a lock) protects the closure, taken once; the superclasses protect the rest.
public final class ResultBlockOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
  private let body: Locked<(@Sendable () throws -> Output)?>

  /// Creates an operation that runs `body` once and keeps what it returns or throws.
  public init(_ body: @escaping @Sendable () throws -> Output) {
    self.body = Locked(body)
    super.init()
  }

  /// Runs the closure and finishes with its result.
  public override func main() {
    guard let work = body.withLock({ $0.take() }) else {
      finish(throwing: OperationError.transformNotImplemented(operation: misuseName))
      return
    }
    finish(with: Result { try work() })
  }
}
