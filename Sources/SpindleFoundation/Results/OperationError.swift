/// Why a typed operation ended without an output.
public enum OperationError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The operation, or the dependency that would have fed it, was cancelled.
  case cancelled(operation: String)
  /// The body called `finish()` without a value (use `finish(with:)`/`finish(returning:)` instead).
  case finishedWithoutOutput(operation: String)
  /// A ``TransformOperation`` started with no input: no value was set and no provider was wired.
  case missingInput(operation: String)
  /// A ``TransformOperation`` created without a closure must override `transform(_:)` or `main(input:)`.
  case transformNotImplemented(operation: String)

  /// A sentence naming the operation and what went wrong.
  public var description: String {
    switch self {
    case .cancelled(let operation):
      "\(operation) was cancelled (or its input dependency was) before producing an output"
    case .finishedWithoutOutput(let operation):
      "\(operation) called finish() without an output; call finish(with:) or finish(returning:)"
    case .missingInput(let operation):
      "\(operation) has no input: set `input` or wire a provider with setInput(from:) or |> before adding it"
    case .transformNotImplemented(let operation):
      "\(operation) has no transform: pass a closure to init(_:) or override transform(_:) or main(input:)"
    }
  }
}
