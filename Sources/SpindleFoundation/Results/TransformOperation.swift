import Foundation
import Spindle

/// A ``ResultOperation`` that turns a typed input, usually the output of a dependency, into an output.
///
/// Wire the input with ``setInput(from:)`` or `provider |> transform` (which also adds the dependency),
/// or set ``input`` directly before the operation is added to a queue; a value set directly wins, as
/// the playground's `inputImage` did.
///
/// When the operation starts, before running any body:
/// - if the provider was **cancelled**, this operation cancels itself and finishes with
///   `.failure(OperationError.cancelled)` — so cancellation flows down a pipeline;
/// - if the provider **failed**, this operation finishes with the provider's error, unchanged;
/// - if there is no input at all, it finishes with `.failure(OperationError.missingInput)`;
/// - if this operation itself was cancelled while waiting, it finishes with `OperationError.cancelled`.
///
/// Only when a value is present does it call ``main(input:)``, which by default runs ``transform(_:)``
/// and finishes with its result. Override `transform(_:)` for synchronous work, or `main(input:)` for
/// asynchronous work (which must then call a `finish` method once).
///
/// ```swift
/// let load = ResultBlockOperation { loadImage(named: "train_day") }
/// let tiltShift = TransformOperation { (image: Image) in tiltShift(image) }
/// load |> tiltShift
/// queue.addOperations([load, tiltShift], waitUntilFinished: true)
/// tiltShift.output  // the filtered image, or nil if load failed or was cancelled
/// ```
// `source` (a lock) protects the input source; `body` is immutable; the superclass protects the rest.
open class TransformOperation<Input: Sendable, Output: Sendable>: ResultOperation<Output>, InputConsuming,
  // `source` (a lock) protects the input source; `body` is immutable; the superclass protects the rest.
  @unchecked Sendable
{
  private let source = Locked(InputSource<Input>())
  private let body: (@Sendable (Input) throws -> Output)?

  /// Creates an operation for a subclass that overrides ``transform(_:)`` or ``main(input:)``.
  public override init() {
    body = nil
    super.init()
  }

  /// Creates an operation that runs `transform` on its input.
  ///
  /// A thrown error becomes the operation's result.
  public init(_ transform: @escaping @Sendable (Input) throws -> Output) {
    body = transform
    super.init()
  }

  /// A value to use instead of the provider's output; set it before the operation is added to a queue.
  public final var input: Input? {
    get { source.withLock { $0.value } }
    set { source.withLock { $0.value = newValue } }
  }

  /// Makes `provider` a dependency and the source of this operation's input.
  public final func setInput<Provider: OutputProviding>(from provider: Provider) where Provider.Output == Input {
    addDependency(provider)
    source.withLock { $0.provider = ProviderLink(provider) }
  }

  /// Produces the output from `input`; the default runs the closure given to ``init(_:)``.
  ///
  /// Check `isCancelled` in long work and throw to stop early.
  open func transform(_ input: Input) throws -> Output {
    guard let body else { throw OperationError.transformNotImplemented(operation: misuseName) }
    return try body(input)
  }

  /// Runs the work for `input` and finishes; the default finishes with the result of ``transform(_:)``.
  ///
  /// Override it for asynchronous work: start the work and call a `finish` method once it ends.
  open func main(input: Input) {
    finish(with: Result { try transform(input) })
  }

  /// Resolves the input (see the type's documentation) and calls ``main(input:)`` only with a value.
  public final override func main() {
    if isCancelled {
      finish(throwing: OperationError.cancelled(operation: misuseName))
      return
    }
    switch source.withLock({ $0.resolve() }) {
    case .value(let value):
      main(input: value)
    case .providerCancelled:
      cancel()
      finish(throwing: OperationError.cancelled(operation: misuseName))
    case .providerFailed(let error):
      finish(throwing: error)
    case .missing:
      finish(throwing: OperationError.missingInput(operation: misuseName))
    }
  }
}

/// Reads a provider's outcome without knowing its concrete type.
private struct ProviderLink<Value: Sendable>: Sendable {
  let isCancelled: @Sendable () -> Bool
  let result: @Sendable () -> Result<Value, any Error>?

  init<Provider: OutputProviding>(_ provider: Provider) where Provider.Output == Value {
    isCancelled = { provider.isCancelled }
    result = { provider.result }
  }
}

private enum Resolution<Value> {
  case value(Value)
  case providerCancelled
  case providerFailed(any Error)
  case missing
}

private struct InputSource<Value: Sendable> {
  var value: Value?
  var provider: ProviderLink<Value>?

  func resolve() -> Resolution<Value> {
    if let value { return .value(value) }
    guard let provider else { return .missing }
    // A cancelled provider never feeds its consumer, even if its body produced a value.
    if provider.isCancelled() { return .providerCancelled }
    switch provider.result() {
    case .success(let value)?: return .value(value)
    case .failure(let error)?: return .providerFailed(error)
    case nil: return .missing
    }
  }
}
