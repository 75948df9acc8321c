import Dispatch

/// One link of the chain of `IdentifiableDispatchQueue.sync` calls whose callers are blocked waiting.
///
/// Frames live on the stack of the blocked caller (which cannot return before the block finishes), and the
/// innermost one is published in a thread-local slot for the duration of the block, on whatever thread the block
/// runs (the caller's thread for ordinary queues, the main thread for the main queue). A barrier block submitted with
/// `IdentifiableDispatchQueue.async` or `asyncAfter` to a concurrent queue also runs under a frame (no caller, on the
/// block's own stack), so the chain knows which concurrent queues the thread holds exclusively.
@usableFromInline
struct SyncFrame {
  /// The queue the `sync` went to.
  @usableFromInline var queue: Unmanaged<QueueIdentity>
  /// The nearest identifiable queue the caller was running on when it called `sync`, if any.
  @usableFromInline var caller: Unmanaged<QueueIdentity>?
  /// The frame of the enclosing `sync`, if any.
  @usableFromInline var next: UnsafePointer<SyncFrame>?
  /// Whether the block was submitted with `.barrier`: on a concurrent queue, nothing else of the queue runs until the
  /// block ends.
  @usableFromInline var barrier: Bool

  @inlinable
  init(
    queue: Unmanaged<QueueIdentity>,
    caller: Unmanaged<QueueIdentity>?,
    next: UnsafePointer<SyncFrame>?,
    barrier: Bool = false
  ) {
    self.queue = queue
    self.caller = caller
    self.next = next
    self.barrier = barrier
  }
}

/// The thread-local chain of blocked `sync` callers.
@usableFromInline
enum SyncChain {
  /// The thread-local slot holding the innermost frame.
  @usableFromInline static let slot = ThreadLocalKey()

  /// The innermost frame of the current thread, or nil outside any tracked `sync`.
  @inlinable @inline(__always)
  static var top: UnsafePointer<SyncFrame>? { top(slot) }

  /// The innermost frame, read from `slot` (a copy of ``slot``).
  @inlinable @inline(__always)
  static func top(_ slot: ThreadLocalKey) -> UnsafePointer<SyncFrame>? {
    UnsafeRawPointer(slot.value)?.assumingMemoryBound(to: SyncFrame.self)
  }

  /// Runs `body` with `frame` published in `slot` (a copy of ``slot``) as the innermost frame, restoring the previous
  /// one afterwards.
  @inlinable @inline(__always)
  static func withFrame<T>(
    _ frame: UnsafePointer<SyncFrame>,
    slot: ThreadLocalKey,
    _ body: () throws -> T
  ) rethrows -> T {
    let saved = slot.value
    slot.value = UnsafeMutableRawPointer(mutating: frame)
    defer { slot.value = saved }
    return try body()
  }

  /// Whether a blocked caller in the chain starting at `top` holds `identity`: it ran on `identity`, or on a queue
  /// recorded as targeting it.
  @usableFromInline
  static func holds(_ identity: QueueIdentity, from top: UnsafePointer<SyncFrame>?) -> Bool {
    var frame = top
    while let current = frame {
      if current.pointee.queue._withUnsafeGuaranteedRef({ $0.isOrTargets(identity) }) { return true }
      if let caller = current.pointee.caller, caller._withUnsafeGuaranteedRef({ $0.isOrTargets(identity) }) {
        return true
      }
      frame = current.pointee.next
    }
    return false
  }

  /// Whether a frame in the chain starting at `top` is a barrier block of `identity` itself, which then holds the
  /// queue exclusively (a barrier on a queue that targets `identity` holds only that queue).
  static func holdsExclusively(_ identity: QueueIdentity, from top: UnsafePointer<SyncFrame>?) -> Bool {
    let wanted = Unmanaged.passUnretained(identity).toOpaque()
    var frame = top
    while let current = frame {
      if current.pointee.barrier && current.pointee.queue.toOpaque() == wanted { return true }
      frame = current.pointee.next
    }
    return false
  }

  /// The labels of the chain, outermost first, ending with the current queue; consecutive repeats are merged.
  static func labels(from top: UnsafePointer<SyncFrame>?, current: String?) -> [String] {
    var reversed: [String] = []
    func append(_ label: String) {
      if reversed.last != label { reversed.append(label) }
    }
    if let current { append(current) }
    var frame = top
    while let link = frame {
      append(link.pointee.queue.takeUnretainedValue().label)
      if let caller = link.pointee.caller { append(caller.takeUnretainedValue().label) }
      frame = link.pointee.next
    }
    return reversed.reversed()
  }
}
