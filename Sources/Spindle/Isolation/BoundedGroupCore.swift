/// A task group that ``BoundedGroupCore`` can drive: `TaskGroup` (never fails) and `ThrowingTaskGroup`.
@usableFromInline
protocol BoundableTaskGroup {
  associatedtype ChildResult: Sendable
  associatedtype Failure: Error

  /// The next finished child's result, or nil when no child is left.
  nonisolated(nonsending) mutating func nextChild() async throws(Failure) -> ChildResult?
  /// Waits for every child, discarding results.
  nonisolated(nonsending) mutating func waitForAllChildren() async throws(Failure)
  /// Whether no child is running or unread.
  var isEmpty: Bool { get }
}

extension TaskGroup: BoundableTaskGroup {
  @usableFromInline typealias Failure = Never

  @inlinable
  nonisolated(nonsending) mutating func nextChild() async -> ChildTaskResult? { await next() }
  @inlinable
  nonisolated(nonsending) mutating func waitForAllChildren() async { await waitForAll() }
}

extension ThrowingTaskGroup: BoundableTaskGroup where Failure == any Error {
  @inlinable
  nonisolated(nonsending) mutating func nextChild() async throws -> ChildTaskResult? { try await next() }
  @inlinable
  nonisolated(nonsending) mutating func waitForAllChildren() async throws { try await waitForAll() }
}

/// The concurrency bound shared by ``BoundedTaskGroup``, ``ThrowingBoundedTaskGroup`` and
/// `concurrentMap`/`concurrentCompactMap`/`concurrentForEach`: it counts running children and, when
/// `maxConcurrent` run, waits for one to finish and keeps its result, in completion order, for `next()`.
///
/// The owner adds children to ``group`` itself (the two group kinds take different closures), calling
/// ``makeRoom()`` before and ``childAdded()`` after each one.
///
/// ```swift
/// var core = BoundedGroupCore(group, maxConcurrent: 4)
/// try await core.makeRoom()
/// core.group.addTask { work() }
/// core.childAdded()
/// while let result = try await core.next() { use(result) }
/// ```
@usableFromInline
struct BoundedGroupCore<Group: BoundableTaskGroup> {
  /// The underlying task group; add children to it directly.
  @usableFromInline var group: Group
  /// The most children that run at once (at least 1).
  @usableFromInline let maxConcurrent: Int
  /// Children added and not yet read back (running, or finished in the group).
  @usableFromInline var running = 0
  /// Results collected while making room, not yet returned by ``next()``.
  @usableFromInline var finished = RingBuffer<Group.ChildResult>()

  @inlinable
  init(_ group: Group, maxConcurrent: Int) {
    self.group = group
    self.maxConcurrent = maxConcurrent
  }

  /// Suspends until fewer than ``maxConcurrent`` children run, keeping the results of those that finished.
  ///
  /// - Throws: The error of a child that failed meanwhile (its slot is free).
  @inlinable
  nonisolated(nonsending) mutating func makeRoom() async throws(Group.Failure) {
    while running >= maxConcurrent {
      running -= 1
      guard let result = try await group.nextChild() else {
        running = 0
        return
      }
      finished.append(result)
    }
  }

  /// Records a child just added to ``group``.
  @inlinable
  mutating func childAdded() { running += 1 }

  /// The oldest result collected by ``makeRoom()``, without waiting; nil if none is kept.
  @inlinable
  mutating func popCollected() -> Group.ChildResult? { finished.popFirst() }

  /// The next finished child's result (collected ones first), or nil when no child is left.
  @inlinable
  nonisolated(nonsending) mutating func next() async throws(Group.Failure) -> Group.ChildResult? {
    if let result = finished.popFirst() { return result }
    guard running > 0 else { return nil }
    running -= 1
    return try await group.nextChild()
  }

  /// Waits for every child, discarding results.
  @inlinable
  nonisolated(nonsending) mutating func waitForAll() async throws(Group.Failure) {
    finished.removeAllKeepingCapacity()
    running = 0
    try await group.waitForAllChildren()
  }

  /// Whether no child runs and no result is unread.
  @inlinable
  var isEmpty: Bool { finished.isEmpty && group.isEmpty }
}
