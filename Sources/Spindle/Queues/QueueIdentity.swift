import Dispatch
import Synchronization

/// Who a dispatch queue is: one instance per underlying queue, shared by every wrapper of that queue.
///
/// The identity is stored on its queue twice: under the package-wide ``registryKey`` (so the nearest identifiable
/// queue of the running code can be found, and a second wrapper reuses the identity instead of clobbering it) and
/// under its own ``marker`` key (so `DispatchQueue.getSpecific(key:)`, which walks the target hierarchy, answers
/// "is this queue anywhere in the current queue's target chain?").
@usableFromInline
final class QueueIdentity: Sendable {
  /// Set on the queue; found by `DispatchQueue.getSpecific` from the queue and from every queue that targets it.
  @usableFromInline let marker = DispatchSpecificKey<Bool>()
  /// The queue's label, read once.
  let label: String
  /// Whether several blocks of the queue may run at once.
  @usableFromInline let isConcurrent: Bool
  /// The identifiable queue this queue targeted when it was created, if any (the chain is known only that far).
  @usableFromInline let parent: QueueIdentity?

  /// ``registryKey``, copied per instance so the `sync` fast path skips the lazy-global check.
  @usableFromInline let registry = QueueIdentity.registryKey
  /// ``SyncChain/slot``, copied per instance for the same reason.
  @usableFromInline let chainSlot = SyncChain.slot
  /// libdispatch's `dispatch_get_specific`, when it could be found and verified (see ``RawSpecific``).
  @usableFromInline let rawGet = RawSpecific.get
  /// The address the overlay uses as the C key of ``registry``.
  @inlinable var registryAddress: UnsafeRawPointer { UnsafeRawPointer(Unmanaged.passUnretained(registry).toOpaque()) }
  /// The address the overlay uses as the C key of ``marker``.
  @inlinable var markerAddress: UnsafeRawPointer { UnsafeRawPointer(Unmanaged.passUnretained(marker).toOpaque()) }

  /// The key under which every identifiable queue stores its identity.
  @usableFromInline static let registryKey = DispatchSpecificKey<QueueIdentity>()
  /// Serialises adoption of queues created elsewhere, so two wrappers never race to set an identity.
  private static let adoption = TSanVisibleMutex(())

  private init(label: String, isConcurrent: Bool, parent: QueueIdentity?) {
    self.label = label
    self.isConcurrent = isConcurrent
    self.parent = parent
  }

  /// The identity stored on `queue` itself (not on its targets), if it has one.
  static func existing(on queue: DispatchQueue) -> QueueIdentity? {
    queue.getSpecific(key: registryKey)
  }

  /// Whether any identifiable queue is in the current queue's target chain (one direct libdispatch lookup).
  @inlinable @inline(__always)
  var anyIsCurrent: Bool {
    if let rawGet { return rawGet(registryAddress) != nil }
    return DispatchQueue.getSpecific(key: registry) != nil
  }

  /// The identity of the nearest identifiable queue in the current queue's target chain, if any (via this instance's
  /// copy of the registry key).
  @inlinable @inline(__always)
  var nearest: QueueIdentity? {
    // Asking libdispatch directly first spares the generic overlay call when no identifiable queue is current.
    if let rawGet, rawGet(registryAddress) == nil { return nil }
    return DispatchQueue.getSpecific(key: registry)
  }

  /// The identity of the nearest identifiable queue in the current queue's target chain, if any.
  @inlinable @inline(__always)
  static var nearest: QueueIdentity? {
    DispatchQueue.getSpecific(key: registryKey)
  }

  /// Returns the identity of `queue`, creating and attaching one unless another wrapper already did.
  ///
  /// When `queue` already carries an identity, that identity is returned unchanged (its `isConcurrent` and
  /// `parent` win over the arguments): all wrappers of one queue agree on who it is.
  static func adopt(_ queue: DispatchQueue, isConcurrent: Bool, target: DispatchQueue?) -> QueueIdentity {
    adoption.withLock { _ in
      if let identity = existing(on: queue) { return identity }
      let parent = target.flatMap { existing(on: $0) }
      let identity = QueueIdentity(label: queue.label, isConcurrent: isConcurrent, parent: parent)
      queue.setSpecific(key: registryKey, value: identity)
      queue.setSpecific(key: identity.marker, value: true)
      return identity
    }
  }

  /// Whether this queue is, or (as far as recorded) targets, `other`.
  @inline(__always)
  func isOrTargets(_ other: QueueIdentity) -> Bool {
    var candidate: QueueIdentity? = self
    while let current = candidate {
      if current === other { return true }
      candidate = current.parent
    }
    return false
  }

  /// Whether code running on this queue is running on `self` according to libdispatch's target walk.
  @inlinable @inline(__always)
  var isInCurrentTargetChain: Bool {
    if let rawGet { return rawGet(markerAddress) != nil }
    return DispatchQueue.getSpecific(key: marker) != nil
  }
}

/// libdispatch's `dispatch_get_specific`, called without the overlay's generic wrapper.
///
/// `DispatchQueue.setSpecific(key:value:)` uses the key object's address as the C key; looking that address up with
/// the C function answers "is a value set?" without the overlay's per-call generic metadata lookup and retains. The
/// symbol is found with `Platform.lookUpFunction` (`dlsym`; the core target does not import libdispatch's C module) and checked once against the
/// overlay on a private queue; if either step fails, ``get`` is nil and every lookup goes through the overlay.
@usableFromInline
enum RawSpecific {
  /// The C signature of `dispatch_get_specific`.
  @usableFromInline typealias Get = @convention(c) (UnsafeRawPointer?) -> UnsafeMutableRawPointer?

  /// The verified function, or nil.
  static let get: Get? = {
    guard let get = Platform.lookUpFunction("dispatch_get_specific", as: Get.self) else { return nil }
    // Verify the key convention on a private queue: unset outside it, set inside it.
    let key = DispatchSpecificKey<Bool>()
    let probe = DispatchQueue(label: "org.spindle.specific-probe")
    probe.setSpecific(key: key, value: true)
    let address = UnsafeRawPointer(Unmanaged.passUnretained(key).toOpaque())
    let outside = get(address) == nil
    let inside = probe.sync { get(address) != nil && DispatchQueue.getSpecific(key: key) == true }
    return withExtendedLifetime(key) { outside && inside ? get : nil }
  }()
}
