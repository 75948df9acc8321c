import Foundation
import Spindle

/// An ``AsyncOperation`` that produces a typed ``OutputProviding/Output``, or an error.
///
/// Override `main()`, do the work (synchronously or not), and end with ``finish(with:file:line:)``,
/// ``finish(returning:file:line:)`` or ``finish(throwing:file:line:)``. Only the first finishing call
/// counts; a later one is reported as a misuse and does not replace the result.
///
/// The result is set before `isFinished` becomes `true`, so a dependent that starts after this operation
/// always sees it. If the operation is cancelled before it starts, ``result`` becomes
/// `.failure(OperationError.cancelled)`; if the body calls the plain ``AsyncOperation/finish(file:line:)``,
/// `.failure(OperationError.finishedWithoutOutput)`.
///
/// ```swift
/// final class LoadOperation: ResultOperation<[UInt8]>, @unchecked Sendable {
///   override func main() {
///     legacyLoad { bytes in self.finish(returning: bytes) }
///   }
/// }
/// ```
// `storage` (a lock) protects the result; the superclass protects the life cycle.
open class ResultOperation<Output: Sendable>: AsyncOperation, OutputProviding, @unchecked Sendable {
  private let storage = Locked<Result<Output, any Error>?>(nil)

  /// Creates an operation with no result yet.
  public override init() {
    super.init()
  }

  /// The outcome once finished; `nil` before. Safe to read from any thread.
  public final var result: Result<Output, any Error>? { storage.withLock { $0 } }

  /// The output if the operation finished successfully; `nil` otherwise (the playground's `outputImage`).
  public final var output: Output? {
    guard case .success(let value)? = result else { return nil }
    return value
  }

  /// Finishes the operation with `result`; only the first finishing call counts.
  public final func finish(with result: Result<Output, any Error>, file: StaticString = #fileID, line: UInt = #line) {
    finish(at: Misuse.Location(file: file, line: line)) { self.storage.withLock { $0 = result } }
  }

  /// Finishes the operation with an output.
  public final func finish(returning output: Output, file: StaticString = #fileID, line: UInt = #line) {
    finish(with: .success(output), file: file, line: line)
  }

  /// Finishes the operation with an error.
  public final func finish(throwing error: any Error, file: StaticString = #fileID, line: UInt = #line) {
    finish(with: .failure(error), file: file, line: line)
  }

  override func willFinishAfterRunning() {
    // Only the winning finish gets here, so a result stored by finish(with:) is already in place.
    guard storage.withLock({ $0 == nil }) else { return }
    let name = misuseName
    let error =
      isCancelled ? OperationError.cancelled(operation: name) : OperationError.finishedWithoutOutput(operation: name)
    storage.withLock { $0 = .failure(error) }
  }

  override func willFinishWithoutRunning() {
    let error = OperationError.cancelled(operation: misuseName)
    storage.withLock { $0 = .failure(error) }
  }
}
