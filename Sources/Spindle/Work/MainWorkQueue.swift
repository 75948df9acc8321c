import Dispatch

extension WorkQueue {
  /// The queue of work whose bodies run on the main actor (the main dispatch queue), one at a time.
  ///
  /// ```swift
  /// let thumbnail = queue.add { try render(photo) }
  /// let ui = WorkQueue.main.add(after: thumbnail) { @MainActor image in imageView.image = image }
  /// ```
  ///
  /// It works after an `async` `main` and after `dispatchMain()` alike: it needs the main queue to be
  /// serviced. Work on it takes part in dependencies, cancellation, barriers and observers like any work.
  public static let main = MainWorkQueue()
}

/// A serial queue of work whose bodies run on the main actor: ``WorkQueue/main``.
///
/// Its bodies are `@MainActor` closures; everything else (dependencies on any queue, cancellation, waiting,
/// observers) is the same as for a ``WorkQueue``, reachable through ``queue``.
public final class MainWorkQueue: Sendable {
  /// The underlying queue (width 1, workers on the main queue), for its controls and observers.
  public let queue = WorkQueue(mainQueueNamed: "main")

  init() {}

  /// Adds work whose body runs on the main actor once its dependencies finished.
  ///
  /// ```swift
  /// WorkQueue.main.add { @MainActor in label.text = "done" }
  /// ```
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    _ body: @escaping @MainActor @Sendable () throws -> Value
  ) -> Work<Value> {
    queue.add(name: name, priority: priority, dependencies: dependencies) {
      try MainActor.assumeIsolated { try body() }
    }
  }

  /// Adds work whose body runs on the main actor with the value of `a`, once it finished.
  ///
  /// If `a` fails or is cancelled, this work ends the same way without running.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @MainActor @Sendable (A) throws -> Value
  ) -> Work<Value> {
    queue.add(name: name, priority: priority, after: a, dependencies: dependencies) { value in
      try MainActor.assumeIsolated { try body(value) }
    }
  }

  /// Adds work whose `async` body runs on the main actor once its dependencies finished; it holds the
  /// queue's one slot until it returns.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    _ body: @escaping @MainActor @Sendable () async throws -> Value
  ) -> Work<Value> {
    queue.add(name: name, priority: priority, dependencies: dependencies) { () async throws -> Value in
      try await body()
    }
  }
}
