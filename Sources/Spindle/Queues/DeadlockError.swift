/// A synchronous dispatch that would never return, reported instead of hanging.
///
/// Thrown by ``IdentifiableDispatchQueue/syncChecked(flags:execute:)``; the trapping
/// ``IdentifiableDispatchQueue/sync(flags:execute:)`` stops the process with the same ``description``.
///
/// ```swift
/// do {
///   try a.sync { try b.sync { try a.syncChecked { work() } } }
/// } catch let error as DeadlockError {
///   print(error)  // sync cycle: a → b → a; 'a' is held by a caller blocked further up this chain ...
/// }
/// ```
public struct DeadlockError: Error, CustomStringConvertible, Sendable, Equatable {
  /// Why the dispatch cannot complete.
  public enum Reason: Sendable, Equatable {
    /// The queue (or a serial queue it targets) is held by a caller blocked in `sync` further up the chain, or the
    /// queue (or a concurrent queue it targets) is running a barrier block further up the chain.
    case cycle
    /// A barrier `sync` was requested from a block already running on the same concurrent queue.
    case barrierFromInside
  }

  /// The labels of the queues involved, outermost caller first, ending with the queue that was asked for.
  public let chain: [String]
  /// The label of the queue that is already held (the requested queue, or a serial queue it targets).
  public let heldQueue: String
  /// Why the dispatch cannot complete.
  public let reason: Reason

  /// Creates an error; the chain lists labels outermost first and ends with the requested queue.
  public init(chain: [String], heldQueue: String, reason: Reason) {
    self.chain = chain
    self.heldQueue = heldQueue
    self.reason = reason
  }

  /// A one-line explanation naming the chain of labels, e.g. `sync cycle: a → b → a; ...`.
  public var description: String {
    let path = chain.map { "'\($0)'" }.joined(separator: " → ")
    let requested = chain.last ?? heldQueue
    switch reason {
    case .cycle:
      let held =
        requested == heldQueue
        ? "'\(heldQueue)' is held by a caller blocked further up this chain"
        : "'\(requested)' targets '\(heldQueue)', which is held by a caller blocked further up this chain"
      return "Spindle deadlock: sync cycle \(path); \(held), so this sync would never return"
    case .barrierFromInside:
      return
        "Spindle deadlock: barrier sync \(path); a barrier on concurrent queue '\(heldQueue)' waits for the "
        + "running block that requested it, so this sync would never return"
    }
  }
}
