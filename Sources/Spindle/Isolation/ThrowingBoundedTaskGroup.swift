/// A throwing task group that runs at most `maxConcurrent` child tasks at once.
///
/// Created by ``withThrowingBoundedTaskGroup(maxConcurrent:of:returning:isolation:body:)``. When the group
/// is full, ``addTask(priority:operation:)`` waits for a running child; if that child threw, `addTask`
/// rethrows its error at once instead of starting more work, so the first failure ends the loop that
/// feeds the group. Results of children that succeeded are kept for ``next()``.
public struct ThrowingBoundedTaskGroup<ChildTaskResult: Sendable>: ~Copyable {
  @usableFromInline var core: BoundedGroupCore<ThrowingTaskGroup<ChildTaskResult, any Error>>

  /// The most child tasks that run at once.
  @inlinable
  public var maxConcurrent: Int { core.maxConcurrent }

  @inlinable
  init(_ group: ThrowingTaskGroup<ChildTaskResult, any Error>, maxConcurrent: Int) {
    core = BoundedGroupCore(group, maxConcurrent: maxConcurrent)
  }

  /// Adds a child task, first suspending until fewer than ``maxConcurrent`` children run.
  ///
  /// - Throws: The error of a child that failed while this call waited for a free slot.
  @inlinable
  nonisolated(nonsending) public mutating func addTask(
    priority: TaskPriority? = nil,
    operation: sending @escaping @isolated(any) () async throws -> ChildTaskResult
  ) async throws {
    try await core.makeRoom()
    core.group.addTask(priority: priority, operation: operation)
    core.childAdded()
  }

  /// Adds a child task unless the group is cancelled, first suspending until a slot is free.
  ///
  /// - Returns: `false` if the group was cancelled and no task was added.
  /// - Throws: The error of a child that failed while this call waited for a free slot.
  @inlinable
  nonisolated(nonsending) public mutating func addTaskUnlessCancelled(
    priority: TaskPriority? = nil,
    operation: sending @escaping @isolated(any) () async throws -> ChildTaskResult
  ) async throws -> Bool {
    try await core.makeRoom()
    guard core.group.addTaskUnlessCancelled(priority: priority, operation: operation) else { return false }
    core.childAdded()
    return true
  }

  /// The next finished child's result (in completion order), or `nil` when no child is left.
  ///
  /// - Throws: The error of the next child that failed.
  @inlinable
  nonisolated(nonsending) public mutating func next() async throws -> ChildTaskResult? {
    try await core.next()
  }

  /// A result collected while an `addTask` call made room, without waiting; nil if none is kept.
  ///
  /// `concurrentMap` reads these between additions, so results do not pile up until the end.
  @inlinable
  mutating func popCollected() -> ChildTaskResult? { core.popCollected() }

  /// Waits for every child, discarding results, and throws the first error a child threw.
  @inlinable
  nonisolated(nonsending) public mutating func waitForAll() async throws {
    try await core.waitForAll()
  }

  /// Whether the group has no running child and no unread result.
  @inlinable
  public var isEmpty: Bool { core.isEmpty }

  /// Cancels every running child; later ``addTaskUnlessCancelled(priority:operation:)`` calls add nothing.
  @inlinable
  public func cancelAll() { core.group.cancelAll() }

  /// Whether the group was cancelled.
  @inlinable
  public var isCancelled: Bool { core.group.isCancelled }
}

/// Like `withThrowingTaskGroup`, but at most `maxConcurrent` child tasks run at once.
///
/// Error propagation follows `withThrowingTaskGroup`: a child's error surfaces from
/// ``ThrowingBoundedTaskGroup/next()`` (or from `addTask` while it waits for a slot); if `body` throws,
/// the remaining children are cancelled and awaited before the error propagates. Cancelling the
/// enclosing task cancels every child.
///
/// ```swift
/// try await withThrowingBoundedTaskGroup(maxConcurrent: 8, of: Void.self) { group in
///   for url in urls { try await group.addTask { try await download(url) } }
///   try await group.waitForAll()
/// }
/// ```
///
/// - Precondition: `maxConcurrent >= 1`; otherwise the program stops with a message naming the value.
@inlinable
public func withThrowingBoundedTaskGroup<ChildTaskResult: Sendable, GroupResult>(
  maxConcurrent: Int,
  of childTaskResultType: ChildTaskResult.Type = ChildTaskResult.self,
  returning returnType: GroupResult.Type = GroupResult.self,
  isolation: isolated (any Actor)? = #isolation,
  body: (inout ThrowingBoundedTaskGroup<ChildTaskResult>) async throws -> GroupResult
) async throws -> GroupResult {
  precondition(maxConcurrent >= 1, "withThrowingBoundedTaskGroup needs maxConcurrent >= 1, got \(maxConcurrent)")
  return try await withThrowingTaskGroup(of: ChildTaskResult.self, returning: GroupResult.self, isolation: isolation) {
    group in
    var bounded = ThrowingBoundedTaskGroup(group, maxConcurrent: maxConcurrent)
    return try await body(&bounded)
  }
}
