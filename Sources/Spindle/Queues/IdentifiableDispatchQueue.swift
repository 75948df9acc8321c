import Dispatch

/// A `DispatchQueue` wrapper that knows whether code is running on it.
///
/// Minimal parity placeholder; the full implementation lands with the queues issue.
public final class IdentifiableDispatchQueue: Sendable {
  /// The underlying dispatch queue.
  public let queue: DispatchQueue
  private let key = DispatchSpecificKey<ObjectIdentifier>()

  /// Creates a queue with the same parameters as `DispatchQueue.init`.
  public convenience init(
    label: String,
    qos: DispatchQoS = .unspecified,
    attributes: DispatchQueue.Attributes = [],
    autoreleaseFrequency: DispatchQueue.AutoreleaseFrequency = .inherit,
    target: DispatchQueue? = nil
  ) {
    self.init(
      checked: DispatchQueue(
        label: label,
        qos: qos,
        attributes: attributes,
        autoreleaseFrequency: autoreleaseFrequency,
        target: target
      )
    )
  }

  private init(checked queue: DispatchQueue) {
    self.queue = queue
    queue.setSpecific(key: key, value: ObjectIdentifier(self))
  }

  /// Whether the calling code runs on `queue`.
  public static func currentQueueIs(_ queue: IdentifiableDispatchQueue) -> Bool {
    DispatchQueue.getSpecific(key: queue.key) == ObjectIdentifier(queue)
  }
}

/// Short alias, as in the Spindle pod.
public typealias IDQ = IdentifiableDispatchQueue
