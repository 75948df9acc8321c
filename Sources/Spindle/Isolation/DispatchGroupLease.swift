import Dispatch
import Synchronization

/// A one-shot membership of a `DispatchGroup`: created by entering the group, it leaves the group exactly once.
///
/// Wrapping a callback API in a group by hand (`enter()` before the call, `leave()` in the callback) breaks
/// when the callback fires twice (the group's count goes negative and Dispatch crashes) or never fires (the
/// group never empties). A lease makes both safe: ``leave()`` leaves on the first call from any thread and
/// ignores and reports (returns `false`, counts in ``redundantLeaves``) every later call; if the lease is
/// deallocated without leaving (the callback was dropped unfired), it leaves then.
///
/// ```swift
/// let group = DispatchGroup()
/// group.enter { lease in
///   legacyAnimate(duration: 1) { _ in lease.leave() }
/// }
/// group.notifyOnMainActor { print("Animations completed!") }
/// ```
public final class DispatchGroupLease: Sendable {
  private let group: DispatchGroup
  /// 0 while inside the group; then the number of `leave()` calls, counting the one that left.
  private let leaves = Atomic<Int>(0)

  /// Enters `group`; the lease leaves it exactly once.
  public init(entering group: DispatchGroup) {
    self.group = group
    group.enter()
  }

  deinit {
    if leaves.load(ordering: .relaxed) == 0 { group.leave() }
  }

  /// Leaves the group on the first call; later calls do nothing.
  ///
  /// Safe to call from any thread, concurrently.
  ///
  /// - Returns: `true` if this call left the group, `false` if the lease had already left (the call is ignored).
  @discardableResult
  public func leave() -> Bool {
    let previous = leaves.add(1, ordering: .acquiringAndReleasing).oldValue
    guard previous == 0 else { return false }
    group.leave()
    return true
  }

  /// Whether the lease has left the group.
  public var hasLeft: Bool { leaves.load(ordering: .acquiring) > 0 }

  /// How many ``leave()`` calls were ignored because the lease had already left (a callback that fired twice).
  public var redundantLeaves: Int { max(0, leaves.load(ordering: .acquiring) - 1) }
}

extension DispatchGroup {
  /// Enters the group and hands `body` a lease that leaves it exactly once, however often it is called.
  ///
  /// Call ``DispatchGroupLease/leave()`` from the wrapped API's callback. If `body` throws, the lease
  /// leaves at once (the callback will presumably never run) and the error propagates. If the lease is
  /// dropped without leaving, it leaves when deallocated.
  ///
  /// ```swift
  /// group.enter { lease in
  ///   legacyDownload(url) { data in results.write { $0.append(data) }; lease.leave() }
  /// }
  /// await group.wait()
  /// ```
  ///
  /// - Returns: The lease, to inspect or to leave early; usually ignored.
  @discardableResult
  public func enter<Failure: Error>(_ body: (DispatchGroupLease) throws(Failure) -> Void) throws(Failure)
    -> DispatchGroupLease
  {
    let lease = DispatchGroupLease(entering: self)
    do {
      try body(lease)
    } catch {
      lease.leave()
      throw error
    }
    return lease
  }
}
