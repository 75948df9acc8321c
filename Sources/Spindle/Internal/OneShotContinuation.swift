/// A continuation resumed exactly once, by whichever comes first: the outcome, or the waiter's cancellation.
final class OneShotContinuation<Value: Sendable>: Sendable {
  private enum State: Sendable {
    case waiting
    case armed(CheckedContinuation<Value, any Error>)
    case early(Result<Value, any Error>)
    case resumed
  }

  private let state = Locked<State>(.waiting)

  /// Gives the continuation; resumes it at once if the outcome (or the cancellation) came first.
  func arm(_ continuation: CheckedContinuation<Value, any Error>) {
    let early: Result<Value, any Error>? = state.withLock { state in
      switch state {
      case .waiting:
        state = .armed(continuation)
        return nil
      case .early(let result):
        state = .resumed
        return result
      case .armed, .resumed:
        preconditionFailure("Spindle: a one-shot continuation was armed twice")
      }
    }
    if let early { continuation.resume(with: early) }
  }

  /// Resumes with `result` unless already resumed; returns whether this call did it (or stored it for `arm`).
  @discardableResult
  func resume(with result: Result<Value, any Error>) -> Bool {
    let continuation: CheckedContinuation<Value, any Error>?
    let taken: Bool
    (continuation, taken) = state.withLock { state in
      switch state {
      case .waiting:
        state = .early(result)
        return (nil, true)
      case .armed(let continuation):
        state = .resumed
        return (continuation, true)
      case .early, .resumed:
        return (nil, false)
      }
    }
    continuation?.resume(with: result)
    return taken
  }
}
