// Overloads of `add` and `addCallback`: one per dependency arity (1 to 4), synchronous or `async`,
// values or `Result` inputs. Keep them in step with each other when changing one.

extension WorkQueue {
  /// Adds work that runs a synchronous body once its dependencies (if any) finished.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// ```swift
  /// let load = queue.add(name: "load") { try decode(path) }   // Work<Image>
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable () throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .sync { [type] work in type.runSync(work, body) }
    )
  }

  /// Adds work that runs an `async` body once its dependencies (if any) finished.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable () async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .async { [type] work in await type.runAsync(work) { try await body() } }
    )
  }

  /// Adds work whose body receives the values of `a` once they finished.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a] + dependencies,
      acceptsFailedDependencies: false,
      body: .sync { [type] work in type.runSync(work) { try body(a.dependencyValue()) } }
    )
  }

  /// Adds work whose `async` body receives the values of `a` once they finished.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// ```swift
  /// let save = queue.add(after: blur) { image async throws in try await store(image) }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a] + dependencies,
      acceptsFailedDependencies: false,
      body: .async { [type] work in await type.runAsync(work) { try await body(a.dependencyValue()) } }
    )
  }

  /// Adds work whose body receives the values of `a`, `b` once they finished.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// ```swift
  /// let pair = queue.add(after: width, height) { w, h in w * h }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b] + dependencies,
      acceptsFailedDependencies: false,
      body: .sync { [type] work in type.runSync(work) { try body(a.dependencyValue(), b.dependencyValue()) } }
    )
  }

  /// Adds work whose `async` body receives the values of `a`, `b` once they finished.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b] + dependencies,
      acceptsFailedDependencies: false,
      body: .async { [type] work in
        await type.runAsync(work) { try await body(a.dependencyValue(), b.dependencyValue()) }
      }
    )
  }

  /// Adds work whose body receives the values of `a`, `b`, `c` once they finished.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - c: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B, C) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c] + dependencies,
      acceptsFailedDependencies: false,
      body: .sync { [type] work in
        type.runSync(work) { try body(a.dependencyValue(), b.dependencyValue(), c.dependencyValue()) }
      }
    )
  }

  /// Adds work whose `async` body receives the values of `a`, `b`, `c` once they finished.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - c: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B, C) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c] + dependencies,
      acceptsFailedDependencies: false,
      body: .async { [type] work in
        await type.runAsync(work) { try await body(a.dependencyValue(), b.dependencyValue(), c.dependencyValue()) }
      }
    )
  }

  /// Adds work whose body receives the values of `a`, `b`, `c`, `d` once they finished.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - c: Another dependency whose value the body receives.
  ///   - d: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, D: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    _ d: Work<D>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B, C, D) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c, d] + dependencies,
      acceptsFailedDependencies: false,
      body: .sync { [type] work in
        type.runSync(work) {
          try body(a.dependencyValue(), b.dependencyValue(), c.dependencyValue(), d.dependencyValue())
        }
      }
    )
  }

  /// Adds work whose `async` body receives the values of `a`, `b`, `c`, `d` once they finished.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose value the body receives.
  ///   - b: Another dependency whose value the body receives.
  ///   - c: Another dependency whose value the body receives.
  ///   - d: Another dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, D: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    _ d: Work<D>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, B, C, D) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c, d] + dependencies,
      acceptsFailedDependencies: false,
      body: .async { [type] work in
        await type.runAsync(work) {
          try await body(a.dependencyValue(), b.dependencyValue(), c.dependencyValue(), d.dependencyValue())
        }
      }
    )
  }

  /// Adds work whose body receives the outcomes of `a`, whatever they are.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// ```swift
  /// let report = queue.add(afterResults: upload) { result in
  ///   switch result {
  ///   case .success(let url): "uploaded to \(url)"
  ///   case .failure(let error): "upload failed: \(error)"
  ///   }
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a] + dependencies,
      acceptsFailedDependencies: true,
      body: .sync { [type] work in type.runSync(work) { try body(a.dependencyResult()) } }
    )
  }

  /// Adds work whose `async` body receives the outcomes of `a`, whatever they are.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a] + dependencies,
      acceptsFailedDependencies: true,
      body: .async { [type] work in await type.runAsync(work) { try await body(a.dependencyResult()) } }
    )
  }

  /// Adds work whose body receives the outcomes of `a`, `b`, whatever they are.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>, Result<B, any Error>) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b] + dependencies,
      acceptsFailedDependencies: true,
      body: .sync { [type] work in type.runSync(work) { try body(a.dependencyResult(), b.dependencyResult()) } }
    )
  }

  /// Adds work whose `async` body receives the outcomes of `a`, `b`, whatever they are.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>, Result<B, any Error>) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b] + dependencies,
      acceptsFailedDependencies: true,
      body: .async { [type] work in
        await type.runAsync(work) { try await body(a.dependencyResult(), b.dependencyResult()) }
      }
    )
  }

  /// Adds work whose body receives the outcomes of `a`, `b`, `c`, whatever they are.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - c: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>, Result<B, any Error>, Result<C, any Error>) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c] + dependencies,
      acceptsFailedDependencies: true,
      body: .sync { [type] work in
        type.runSync(work) { try body(a.dependencyResult(), b.dependencyResult(), c.dependencyResult()) }
      }
    )
  }

  /// Adds work whose `async` body receives the outcomes of `a`, `b`, `c`, whatever they are.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - c: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (Result<A, any Error>, Result<B, any Error>, Result<C, any Error>) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c] + dependencies,
      acceptsFailedDependencies: true,
      body: .async { [type] work in
        await type.runAsync(work) { try await body(a.dependencyResult(), b.dependencyResult(), c.dependencyResult()) }
      }
    )
  }

  /// Adds work whose body receives the outcomes of `a`, `b`, `c`, `d`, whatever they are.
  ///
  /// The body runs on a Dispatch thread of the queue's quality of service and may throw: the work then fails
  /// with that error (or ends cancelled for `CancellationError`). A running body learns of cancellation through
  /// ``WorkContext/current``.
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - c: Another dependency whose outcome the body receives.
  ///   - d: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, D: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    _ d: Work<D>,
    dependencies: [AnyWork] = [],
    _ body:
      @escaping @Sendable (Result<A, any Error>, Result<B, any Error>, Result<C, any Error>, Result<D, any Error>)
      throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c, d] + dependencies,
      acceptsFailedDependencies: true,
      body: .sync { [type] work in
        type.runSync(work) {
          try body(a.dependencyResult(), b.dependencyResult(), c.dependencyResult(), d.dependencyResult())
        }
      }
    )
  }

  /// Adds work whose `async` body receives the outcomes of `a`, `b`, `c`, `d`, whatever they are.
  ///
  /// The body runs in a `Task` and holds a slot of the queue until it returns; cancelling the work cancels
  /// that task. It may throw: the work then fails with that error (or ends cancelled for `CancellationError`).
  ///
  /// The body runs once every dependency completed, even if some failed or were cancelled (a cancelled
  /// dependency arrives as `.failure(CancellationError())`). Use it to clean up or to recover.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: A dependency whose outcome the body receives.
  ///   - b: Another dependency whose outcome the body receives.
  ///   - c: Another dependency whose outcome the body receives.
  ///   - d: Another dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type,
  ///     any queue).
  ///   - body: The work to do, given the dependencies’ outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, B: Sendable, C: Sendable, D: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    afterResults a: Work<A>,
    _ b: Work<B>,
    _ c: Work<C>,
    _ d: Work<D>,
    dependencies: [AnyWork] = [],
    _ body:
      @escaping @Sendable (Result<A, any Error>, Result<B, any Error>, Result<C, any Error>, Result<D, any Error>)
      async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a, b, c, d] + dependencies,
      acceptsFailedDependencies: true,
      body: .async { [type] work in
        await type.runAsync(work) {
          try await body(a.dependencyResult(), b.dependencyResult(), c.dependencyResult(), d.dependencyResult())
        }
      }
    )
  }

  /// Adds work with a callback-style body, which completes the work by calling `finish` once, from any thread.
  ///
  /// The body runs on a Dispatch thread of the queue; the work holds its slot until `finish` is called with
  /// a value, a `Result` or an error. A second call of `finish` is ignored and reported through
  /// ``WorkQueue/misuseHandler``. Poll `finish.isCancelled` to learn of cancellation.
  ///
  /// ```swift
  /// let old = queue.addCallback { finish in legacyFetch { finish($0) } }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - dependencies: Work to wait for without receiving its value (ordering only).
  ///   - body: Starts the work and arranges for `finish` to be called.
  /// - Returns: The work item.
  @discardableResult
  public func addCallback<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (WorkFinish<Value>) -> Void
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .callback { [type] work in body(type.finishHandle(work)) }
    )
  }

  /// Adds work with a callback-style body that receives the value of `a` once it finished.
  ///
  /// Like ``addCallback(name:priority:dependencies:_:)``; if `a` fails or is cancelled, this work ends the
  /// same way without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - a: The dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only).
  ///   - body: Starts the work with the value of `a` and arranges for `finish` to be called.
  /// - Returns: The work item.
  @discardableResult
  public func addCallback<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    _ body: @escaping @Sendable (A, WorkFinish<Value>) -> Void
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: [a] + dependencies,
      acceptsFailedDependencies: false,
      body: .callback { [type] work in body(a.dependencyValue(), type.finishHandle(work)) }
    )
  }
}
