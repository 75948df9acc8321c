import Foundation

/// The precedence of `|>`: left-associative, binding tighter than comparison and assignment.
///
/// `load |> filter |> output` groups as `(load |> filter) |> output`.
precedencegroup OperationChainingPrecedence {
  associativity: left
  higherThan: ComparisonPrecedence
}

/// Chains operations: the right-hand operation depends on the left-hand one.
infix operator |> : OperationChainingPrecedence

/// Makes `rhs` depend on `lhs` and returns `rhs`, so chains read left to right.
///
/// ```swift
/// load |> filter |> output   // output depends on filter, which depends on load
/// ```
@discardableResult
public func |> <Previous: Operation, Next: Operation>(lhs: Previous, rhs: Next) -> Next {
  rhs.addDependency(lhs)
  return rhs
}

/// Makes `rhs` depend on `lhs` *and* take its typed input from `lhs`'s output; returns `rhs`.
///
/// Chosen over the untyped `|>` whenever the output type of `lhs` matches the input type of `rhs`.
/// If the types differ, the untyped overload applies: only the dependency is added, and `rhs` ends with
/// ``OperationError/missingInput(operation:)`` unless its input is set some other way.
///
/// ```swift
/// let load = ResultBlockOperation { [1, 2, 3] }
/// let double = TransformOperation { (values: [Int]) in values.map { $0 * 2 } }
/// let total = TransformOperation { (values: [Int]) in values.reduce(0, +) }
/// load |> double |> total
/// ```
@discardableResult
public func |> <Previous: OutputProviding, Next: InputConsuming>(lhs: Previous, rhs: Next) -> Next
where Next.Input == Previous.Output {
  rhs.setInput(from: lhs)
  return rhs
}
