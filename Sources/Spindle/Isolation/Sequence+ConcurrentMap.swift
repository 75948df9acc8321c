extension Sequence where Element: Sendable {
  /// Transforms every element in child tasks, at most `maxConcurrent` at once, and returns the results in input order.
  ///
  /// Errors and cancellation behave as in `withThrowingTaskGroup`: the first error thrown by `transform`
  /// cancels the transforms still running, no further element starts, and the error propagates once the
  /// running ones have returned. If the calling task is cancelled, no further element starts and the call
  /// throws `CancellationError` (running transforms see the cancellation).
  ///
  /// ```swift
  /// let squares = try await (0..<100).concurrentMap(maxConcurrent: 4) { x in await square(x) }
  /// ```
  ///
  /// - Precondition: `maxConcurrent >= 1`; otherwise the program stops with a message naming the value.
  @inlinable
  nonisolated(nonsending) public func concurrentMap<T: Sendable>(
    maxConcurrent: Int,
    priority: TaskPriority? = nil,
    _ transform: @escaping @Sendable (Element) async throws -> T
  ) async throws -> [T] {
    precondition(maxConcurrent >= 1, "concurrentMap needs maxConcurrent >= 1, got \(maxConcurrent)")
    return try await withThrowingBoundedTaskGroup(maxConcurrent: maxConcurrent, of: (Int, T).self) { group in
      var results: [T?] = []
      results.reserveCapacity(underestimatedCount)
      for (index, element) in self.enumerated() {
        try Task.checkCancellation()
        let added = try await group.addTaskUnlessCancelled(priority: priority) { (index, try await transform(element)) }
        guard added else { break }
        results.append(nil)
        while let (done, value) = group.popCollected() { results[done] = value }
      }
      while let (done, value) = try await group.next() { results[done] = value }
      try Task.checkCancellation()
      return results.map { $0! }
    }
  }

  /// Transforms every element in child tasks, at most `maxConcurrent` at once, keeping non-`nil` results in input order.
  ///
  /// Errors and cancellation behave as in ``concurrentMap(maxConcurrent:priority:_:)``.
  @inlinable
  nonisolated(nonsending) public func concurrentCompactMap<T: Sendable>(
    maxConcurrent: Int,
    priority: TaskPriority? = nil,
    _ transform: @escaping @Sendable (Element) async throws -> T?
  ) async throws -> [T] {
    try await concurrentMap(maxConcurrent: maxConcurrent, priority: priority, transform).compactMap { $0 }
  }

  /// Runs `body` for every element in child tasks, at most `maxConcurrent` at once.
  ///
  /// Errors and cancellation behave as in ``concurrentMap(maxConcurrent:priority:_:)``.
  @inlinable
  nonisolated(nonsending) public func concurrentForEach(
    maxConcurrent: Int,
    priority: TaskPriority? = nil,
    _ body: @escaping @Sendable (Element) async throws -> Void
  ) async throws {
    precondition(maxConcurrent >= 1, "concurrentForEach needs maxConcurrent >= 1, got \(maxConcurrent)")
    try await withThrowingBoundedTaskGroup(maxConcurrent: maxConcurrent, of: Void.self) { group in
      for element in self {
        try Task.checkCancellation()
        guard try await group.addTaskUnlessCancelled(priority: priority, operation: { try await body(element) })
        else { break }
        while group.popCollected() != nil {}
      }
      try await group.waitForAll()
      try Task.checkCancellation()
    }
  }
}
