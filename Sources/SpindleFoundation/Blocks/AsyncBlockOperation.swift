import Foundation
import Spindle

/// An operation that wraps a callback API: its closure starts the work and calls `finish` when it ends.
///
/// The closure receives a ``Completion``; call it exactly once, from any thread, with the value
/// (`finish(value)`), an error (`finish.fail(error)`) or a `Result`. A second call is reported as a
/// misuse and ignored. The closure should check ``Completion/isCancelled`` or register
/// ``Completion/onCancel(_:)`` to stop the wrapped work early, and still call `finish` (with anything:
/// a cancelled operation never feeds a ``TransformOperation``). If the operation is cancelled before it
/// starts, the closure never runs.
///
/// ```swift
/// let load = AsyncBlockOperation<[UInt8]> { finish in
///   legacyLoad(named: "train_day") { bytes in finish(bytes) }
/// }
/// ```
// `body` (a lock) protects the closure, taken once; the superclasses protect the rest.
public final class AsyncBlockOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
  /// The handle a wrapped callback calls to finish an ``AsyncBlockOperation``.
  public struct Completion: Sendable {
    let operation: AsyncBlockOperation<Output>

    /// Finishes the operation with `value`.
    public func callAsFunction(_ value: Output, file: StaticString = #fileID, line: UInt = #line) {
      operation.finish(returning: value, file: file, line: line)
    }

    /// Finishes the operation with `result`.
    public func callAsFunction(
      _ result: Result<Output, any Error>,
      file: StaticString = #fileID,
      line: UInt = #line
    ) {
      operation.finish(with: result, file: file, line: line)
    }

    /// Finishes the operation with `error`.
    public func fail(_ error: any Error, file: StaticString = #fileID, line: UInt = #line) {
      operation.finish(throwing: error, file: file, line: line)
    }

    /// Whether the operation was cancelled; poll it to stop the wrapped work early.
    public var isCancelled: Bool { operation.isCancelled }

    /// Runs `handler` once when the operation is cancelled (see ``AsyncOperation/onCancel(_:)``).
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
      operation.onCancel(handler)
    }
  }

  private let body: Locked<(@Sendable (Completion) -> Void)?>

  /// Creates an operation whose `body` starts the work and calls the ``Completion`` when it ends.
  public init(_ body: @escaping @Sendable (_ finish: Completion) -> Void) {
    self.body = Locked(body)
    super.init()
  }

  /// Runs the closure once with this operation's ``Completion``.
  public override func main() {
    guard let work = body.withLock({ $0.take() }) else {
      finish(throwing: OperationError.transformNotImplemented(operation: misuseName))
      return
    }
    work(Completion(operation: self))
  }
}

extension AsyncBlockOperation.Completion where Output == Void {
  /// Finishes an operation that produces no value.
  public func callAsFunction(file: StaticString = #fileID, line: UInt = #line) {
    operation.finish(returning: (), file: file, line: line)
  }
}
