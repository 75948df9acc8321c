import Foundation

/// An operation that produces a typed output for the operations that depend on it.
///
/// It replaces the playground's `FilterDataProvider` search through `dependencies`: a consumer is wired
/// to one provider, by type, with ``InputConsuming/setInput(from:)`` or the `|>` operator.
///
/// ``result`` is `nil` until the operation finishes. A provider that was cancelled never feeds its
/// consumers, even if its body produced a value before noticing the cancellation.
public protocol OutputProviding<Output>: Operation {
  /// The type of value the operation produces.
  associatedtype Output: Sendable

  /// The outcome once finished: the output or the error; `nil` before the operation finishes.
  var result: Result<Output, any Error>? { get }
}

/// An operation that takes its typed input from an ``OutputProviding`` dependency.
public protocol InputConsuming<Input>: Operation {
  /// The type of value the operation consumes.
  associatedtype Input: Sendable

  /// Makes `provider` a dependency of this operation and the source of its input.
  ///
  /// Call it before the operation is added to a queue. A later call replaces the source (the earlier
  /// provider stays a dependency).
  func setInput<Provider: OutputProviding>(from provider: Provider) where Provider.Output == Input
}
