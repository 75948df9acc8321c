import Dispatch

/// A `DispatchQueue` wrapper that knows whether code is running on it.
///
/// Create it with the same parameters as `DispatchQueue`, or adopt an existing queue with
/// ``init(underlyingQueue:isConcurrent:)`` (or the pod's spelling, ``init(queue:isConcurrent:)``). ``currentQueueIs(_:)`` and ``isCurrent`` answer whether the calling code
/// runs on the queue: inside one of its blocks, inside a block of a queue that targets it, or inside a
/// ``sync(flags:execute:)`` whose caller runs on it (`a.sync { b.sync { IDQ.currentQueueIs(a) } }` is `true`).
///
/// ```swift
/// let writeQueue = IdentifiableDispatchQueue(label: "com.app.database-write.queue")
///
/// func write(_ object: Record) {
///   writeQueue.sync { save(object) }  // runs inline when already on writeQueue
/// }
///
/// func save(_ object: Record) {
///   writeQueue.preconditionCurrent()
///   // ...
/// }
/// ```
///
/// All wrappers of one underlying queue share one identity: wrapping a queue twice never makes the first wrapper
/// forget its queue.
public final class IdentifiableDispatchQueue: Sendable {
  /// The underlying dispatch queue; dispatching to it directly is allowed and is still recognised.
  public let queue: DispatchQueue
  /// The identity shared by every wrapper of `queue`.
  @usableFromInline let identity: QueueIdentity

  /// Creates a queue with the same parameters as `DispatchQueue.init`.
  ///
  /// When `target` is itself identifiable, code running on the new queue is also recognised as running on the target
  /// (libdispatch's target walk), and a `sync` onto the new queue from a chain that holds a serial target, or that
  /// runs a barrier block of a concurrent target, is reported as a deadlock.
  public convenience init(
    label: String,
    qos: DispatchQoS = .unspecified,
    attributes: DispatchQueue.Attributes = [],
    autoreleaseFrequency: DispatchQueue.AutoreleaseFrequency = .inherit,
    target: DispatchQueue? = nil
  ) {
    let queue = DispatchQueue(
      label: label,
      qos: qos,
      attributes: attributes,
      autoreleaseFrequency: autoreleaseFrequency,
      target: target
    )
    self.init(
      queue: queue,
      identity: QueueIdentity.adopt(queue, isConcurrent: attributes.contains(.concurrent), target: target)
    )
  }

  /// Wraps an existing queue, or returns nil when `underlyingQueue` is a global (root) queue.
  ///
  /// Global queues are refused because every queue without an explicit target ends up targeting one: marking a
  /// global queue would make ``currentQueueIs(_:)`` true on unrelated queues of the same quality of service.
  /// The main queue is accepted (see ``main``). Global queues are recognised by identity and by libdispatch's
  /// `com.apple.root.` label prefix, so a private queue must not use that prefix.
  ///
  /// If the queue is already identifiable (created by this type or adopted before), the new wrapper reuses that
  /// identity: every wrapper answers ``isCurrent`` the same way, and `isConcurrent` is taken from the first wrapper.
  /// The queue's own target is not visible through `DispatchQueue`, so an adopted queue is not known to target other
  /// identifiable queues for deadlock detection (``isCurrent`` still follows the real target chain).
  ///
  /// - Parameters:
  ///   - underlyingQueue: The queue to wrap; it must not be a global queue.
  ///   - isConcurrent: Whether `underlyingQueue` was created with `.concurrent` (`DispatchQueue` does not say). It
  ///     decides whether re-entering the queue from a sync chain is a deadlock and whether ``QueueExecutor`` accepts
  ///     it.
  public convenience init?(underlyingQueue: DispatchQueue, isConcurrent: Bool = false) {
    guard !Self.isGlobal(underlyingQueue) else { return nil }
    self.init(
      queue: underlyingQueue,
      identity: QueueIdentity.adopt(underlyingQueue, isConcurrent: isConcurrent, target: nil)
    )
  }

  /// Wraps an existing queue, or returns nil when `queue` is a global queue: the Spindle pod's spelling.
  ///
  /// The same as ``init(underlyingQueue:isConcurrent:)``; code written against the Spindle pod
  /// (`IdentifiableDispatchQueue(queue:)`) compiles unchanged.
  ///
  /// ```swift
  /// let legacy = DispatchQueue(label: "com.app.legacy")
  /// guard let identifiable = IdentifiableDispatchQueue(queue: legacy) else { return }
  /// legacy.async { assert(IDQ.currentQueueIs(identifiable)) }
  /// ```
  ///
  /// - Parameters:
  ///   - queue: The queue to wrap; it must not be a global queue.
  ///   - isConcurrent: Whether `queue` was created with `.concurrent`; see ``init(underlyingQueue:isConcurrent:)``.
  public convenience init?(queue: DispatchQueue, isConcurrent: Bool = false) {
    self.init(underlyingQueue: queue, isConcurrent: isConcurrent)
  }

  private init(queue: DispatchQueue, identity: QueueIdentity) {
    self.queue = queue
    self.identity = identity
  }

  /// The main queue, identifiable (code run by `DispatchQueue.main` and by the main actor is on it).
  public static let main: IdentifiableDispatchQueue = {
    guard let main = IdentifiableDispatchQueue(underlyingQueue: .main) else {
      preconditionFailure("Spindle: the main queue was mistaken for a global queue")
    }
    return main
  }()

  /// The queue's label.
  public var label: String { identity.label }

  /// Whether several blocks of the queue may run at once (known for queues created with `.concurrent`, declared for
  /// adopted ones).
  public var isConcurrent: Bool { identity.isConcurrent }

  /// Whether the calling code runs on `queue`.
  ///
  /// True inside a block of `queue`, inside a block of any queue whose target chain includes `queue` (as libdispatch
  /// sees it at the time of the call), and inside a ``sync(flags:execute:)`` (of any identifiable queue) whose blocked
  /// caller runs on `queue`. A block submitted with plain `DispatchQueue.sync` from code on `queue` is recognised
  /// when it runs on the caller's thread (every queue but the main queue), because the chain is per thread.
  ///
  /// ```swift
  /// precondition(IDQ.currentQueueIs(commandQueue), "This method should only be called on the commandQueue")
  /// ```
  public static func currentQueueIs(_ queue: IdentifiableDispatchQueue) -> Bool {
    queue.isCurrent
  }

  /// Whether the calling code runs on this queue; see ``currentQueueIs(_:)``.
  public var isCurrent: Bool {
    if identity.isInCurrentTargetChain { return true }
    guard let top = SyncChain.top(identity.chainSlot) else { return false }
    return SyncChain.holds(identity, from: top)
  }

  /// Whether `queue` is one of the global (root) queues.
  ///
  /// On Linux every `DispatchQueue.global(qos:)` call returns a new wrapper object, so identity alone cannot tell;
  /// libdispatch names every root queue `com.apple.root.…` (including the overcommit ones Swift cannot ask for).
  static func isGlobal(_ queue: DispatchQueue) -> Bool {
    let classes: [DispatchQoS.QoSClass] = [
      .background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
    ]
    if classes.contains(where: { DispatchQueue.global(qos: $0) === queue }) { return true }
    return queue.label.hasPrefix("com.apple.root.")
  }
}

/// Short alias, as in the Spindle pod.
public typealias IDQ = IdentifiableDispatchQueue
