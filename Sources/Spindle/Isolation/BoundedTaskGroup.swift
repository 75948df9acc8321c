/// A task group that runs at most `maxConcurrent` child tasks at once; adding more suspends until one finishes.
///
/// Created by ``withBoundedTaskGroup(maxConcurrent:of:returning:isolation:body:)``. When the group is full,
/// ``addTask(priority:operation:)`` waits for a running child to finish and keeps its result for
/// ``next()``, so no result is lost and results arrive in completion order, as with `TaskGroup`.
public struct BoundedTaskGroup<ChildTaskResult: Sendable>: ~Copyable {
  @usableFromInline var core: BoundedGroupCore<TaskGroup<ChildTaskResult>>

  /// The most child tasks that run at once.
  @inlinable
  public var maxConcurrent: Int { core.maxConcurrent }

  @inlinable
  init(_ group: TaskGroup<ChildTaskResult>, maxConcurrent: Int) {
    core = BoundedGroupCore(group, maxConcurrent: maxConcurrent)
  }

  /// Adds a child task, first suspending until fewer than ``maxConcurrent`` children run.
  @inlinable
  nonisolated(nonsending) public mutating func addTask(
    priority: TaskPriority? = nil,
    operation: sending @escaping @isolated(any) () async -> ChildTaskResult
  ) async {
    await core.makeRoom()
    core.group.addTask(priority: priority, operation: operation)
    core.childAdded()
  }

  /// Adds a child task unless the group is cancelled, first suspending until a slot is free.
  ///
  /// - Returns: `false` if the group was cancelled and no task was added.
  @inlinable
  nonisolated(nonsending) public mutating func addTaskUnlessCancelled(
    priority: TaskPriority? = nil,
    operation: sending @escaping @isolated(any) () async -> ChildTaskResult
  ) async -> Bool {
    await core.makeRoom()
    guard core.group.addTaskUnlessCancelled(priority: priority, operation: operation) else { return false }
    core.childAdded()
    return true
  }

  /// The next finished child's result (in completion order), or `nil` when no child is left.
  @inlinable
  nonisolated(nonsending) public mutating func next() async -> ChildTaskResult? {
    await core.next()
  }

  /// Waits for every child, discarding results.
  @inlinable
  nonisolated(nonsending) public mutating func waitForAll() async {
    await core.waitForAll()
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

/// Like `withTaskGroup`, but at most `maxConcurrent` child tasks run at once.
///
/// Inside `body`, ``BoundedTaskGroup/addTask(priority:operation:)`` suspends while `maxConcurrent`
/// children run. Cancelling the enclosing task cancels every child, as with `withTaskGroup`; the group
/// waits for all children before returning.
///
/// ```swift
/// let total = await withBoundedTaskGroup(maxConcurrent: 4, of: Int.self) { group in
///   for file in files { await group.addTask { await size(of: file) } }
///   var sum = 0
///   while let size = await group.next() { sum += size }
///   return sum
/// }
/// ```
///
/// - Precondition: `maxConcurrent >= 1`; otherwise the program stops with a message naming the value.
@inlinable
public func withBoundedTaskGroup<ChildTaskResult: Sendable, GroupResult>(
  maxConcurrent: Int,
  of childTaskResultType: ChildTaskResult.Type = ChildTaskResult.self,
  returning returnType: GroupResult.Type = GroupResult.self,
  isolation: isolated (any Actor)? = #isolation,
  body: (inout BoundedTaskGroup<ChildTaskResult>) async -> GroupResult
) async -> GroupResult {
  precondition(maxConcurrent >= 1, "withBoundedTaskGroup needs maxConcurrent >= 1, got \(maxConcurrent)")
  return await withTaskGroup(of: ChildTaskResult.self, returning: GroupResult.self, isolation: isolation) {
    group in
    var bounded = BoundedTaskGroup(group, maxConcurrent: maxConcurrent)
    return await body(&bounded)
  }
}
