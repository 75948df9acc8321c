import Dispatch

// The `add` and `addCallback` forms: no dependency, one typed dependency (a form of its own, without parameter
// packs, because chains are the hottest path), two or more typed dependencies (parameter packs), and a dynamic
// number of dependencies of one type (`afterAll:`). Each comes with a synchronous and an `async` body, and with
// values or with `Result` inputs (`afterResults:`, `afterAllResults:`).

extension WorkQueue {
  /// Adds work that runs a synchronous body once its ordering-only dependencies (if any) finished.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// ```swift
  /// let load = queue.add(name: "load") { try decode(path) }   // Work<Image>
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  // Inlinable, as the one-dependency form below: the caller's code then specializes it. Unspecialized, every add
  // looked up the metadata of `Work<Value>` and `Value?` at run time (`swift_getGenericMetadata`, about 5 % of an
  // empty item under `perf`); specialized, adding to a suspended queue became 0.84-0.87x the engine before part two.
  @discardableResult
  @inlinable
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable () throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    let extras = Self.extras(type, qos, condition, delay, timeout, retry, exclusive)
    guard extras == nil else {
      // Conditions, retries and exclusivity may run the body again or not at all: the wrapper keeps it.
      return makeWork(
        type,
        name: name,
        priority: priority,
        dependencies: dependencies,
        acceptsFailedDependencies: false,
        extras: extras,
        body: .sync { [type] work in type.runSync(work) { try body() } }
      )
    }
    return makeWork(
      WorkSync<Value>.self,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .sync { work in WorkSync<Value>.runStoredBody(work) }
    ) { work in unsafeDowncast(work, to: WorkSync<Value>.self).syncBody = body }
  }

  /// Adds work that runs an `async` body once its ordering-only dependencies (if any) finished.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// ```swift
  /// let page = queue.add(name: "page") { try await fetch(url) }   // Work<Data>
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable () async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in await type.runAsync(work) { try await body() } }
    )
  }

  /// Adds work whose body receives the value of `a` once it finished.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// ```swift
  /// let blur = queue.add(name: "blur", after: load) { image in tiltShift(image) }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - a: The dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the value of `a`.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @inlinable @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (A) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    let extras = Self.extras(type, qos, condition, delay, timeout, retry, exclusive)
    // `a` is held by the item (`valueSource`), not captured by the body: the worker that ran the item lets go of it
    // there, and may hand it back to the adding thread to free (see `WorkEngine.handBack`).
    guard extras == nil else {
      // Conditions, retries and exclusivity may run the body again or not at all: the wrapper keeps it.
      return makeWork(
        type,
        name: name,
        priority: priority,
        first: a,
        dependencies: dependencies,
        acceptsFailedDependencies: false,
        extras: extras,
        body: .sync { [type] work in type.runSync(work) { try body(Work<A>.valueOfSource(of: work)) } },
        valueSource: a
      )
    }
    // Plain work keeps its body typed in the item (`WorkAfter`): no wrapper closure, one allocation per item.
    return makeWork(
      WorkAfter<A, Value>.self,
      name: name,
      priority: priority,
      first: a,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .sync { work in WorkAfter<A, Value>.runStoredAfterBody(work) },
      valueSource: a
    ) { work in unsafeDowncast(work, to: WorkAfter<A, Value>.self).afterBody = body }
  }

  /// Adds work whose `async` body receives the value of `a` once it finished.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
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
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - a: The dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the value of `a`.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (A) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      first: a,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in await type.runAsync(work) { try await body(a.dependencyValue()) } }
    )
  }

  /// Adds work whose body receives the values of two or more dependencies once they finished.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// ```swift
  /// let area = queue.add(after: width, height) { w, h in w * h }
  /// let all = queue.add(after: a, b, c, d, e) { a, b, c, d, e in [a, b, c, d, e] }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - first: A dependency whose value the body receives first.
  ///   - second: A dependency whose value the body receives second.
  ///   - rest: More dependencies whose values the body receives, in order.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the dependencies' values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<First: Sendable, Second: Sendable, each Rest: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    after first: Work<First>,
    _ second: Work<Second>,
    _ rest: repeat Work<each Rest>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    body: @escaping @Sendable (First, Second, repeat each Rest) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: Self.dependencyList(first, second, repeat each rest, more: dependencies),
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .sync { [type] work in
        type.runSync(work) {
          try body(first.dependencyValue(), second.dependencyValue(), repeat (each rest).dependencyValue())
        }
      }
    )
  }

  /// Adds work whose `async` body receives the values of two or more dependencies once they finished.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - first: A dependency whose value the body receives first.
  ///   - second: A dependency whose value the body receives second.
  ///   - rest: More dependencies whose values the body receives, in order.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the dependencies' values in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<First: Sendable, Second: Sendable, each Rest: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    after first: Work<First>,
    _ second: Work<Second>,
    _ rest: repeat Work<each Rest>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    body: @escaping @Sendable (First, Second, repeat each Rest) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: Self.dependencyList(first, second, repeat each rest, more: dependencies),
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in
        await type.runAsync(work) {
          try await body(first.dependencyValue(), second.dependencyValue(), repeat (each rest).dependencyValue())
        }
      }
    )
  }

  /// Adds work whose body receives the outcome of `a` once it completed, however it ended.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// ```swift
  /// let report = queue.add(afterResults: upload) { result in
  ///   switch result { case .success: "sent"; case .failure(let error): "failed: \(error)" }
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - a: The dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the outcome of `a`.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterResults a: Work<A>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (Result<A, any Error>) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      first: a,
      dependencies: dependencies,
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .sync { [type] work in type.runSync(work) { try body(a.dependencyResult()) } }
    )
  }

  /// Adds work whose `async` body receives the outcome of `a` once it completed, however it ended.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - a: The dependency whose outcome the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the outcome of `a`.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterResults a: Work<A>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (Result<A, any Error>) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      first: a,
      dependencies: dependencies,
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in await type.runAsync(work) { try await body(a.dependencyResult()) } }
    )
  }

  /// Adds work whose body receives the outcomes of two or more dependencies once they completed.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - first: A dependency whose outcome the body receives first.
  ///   - second: A dependency whose outcome the body receives second.
  ///   - rest: More dependencies whose outcomes the body receives, in order.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the dependencies' outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<First: Sendable, Second: Sendable, each Rest: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterResults first: Work<First>,
    _ second: Work<Second>,
    _ rest: repeat Work<each Rest>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    body:
      @escaping @Sendable (Result<First, any Error>, Result<Second, any Error>, repeat Result<each Rest, any Error>)
      throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: Self.dependencyList(first, second, repeat each rest, more: dependencies),
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .sync { [type] work in
        type.runSync(work) {
          try body(first.dependencyResult(), second.dependencyResult(), repeat (each rest).dependencyResult())
        }
      }
    )
  }

  /// Adds work whose `async` body receives the outcomes of two or more dependencies once they completed.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - first: A dependency whose outcome the body receives first.
  ///   - second: A dependency whose outcome the body receives second.
  ///   - rest: More dependencies whose outcomes the body receives, in order.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the dependencies' outcomes in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<First: Sendable, Second: Sendable, each Rest: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterResults first: Work<First>,
    _ second: Work<Second>,
    _ rest: repeat Work<each Rest>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    body:
      @escaping @Sendable (Result<First, any Error>, Result<Second, any Error>, repeat Result<each Rest, any Error>)
      async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: Self.dependencyList(first, second, repeat each rest, more: dependencies),
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in
        await type.runAsync(work) {
          try await body(first.dependencyResult(), second.dependencyResult(), repeat (each rest).dependencyResult())
        }
      }
    )
  }

  /// Adds work whose body receives the values of any number of dependencies of one type, in order.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  /// An empty `parts` gives the body an empty array at once.
  ///
  /// ```swift
  /// let parts = files.map { file in queue.add { try count(file) } }   // [Work<Int>]
  /// let total = queue.add(afterAll: parts) { (values: [Int]) in values.reduce(0, +) }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - parts: The dependencies whose values the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the values of `parts` in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Part: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterAll parts: [Work<Part>],
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable ([Part]) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: parts + dependencies,
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .sync { [type] work in type.runSync(work) { try body(parts.map { $0.dependencyValue() }) } }
    )
  }

  /// Adds work whose `async` body receives the values of any number of dependencies of one type, in order.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// If a dependency fails or is cancelled, this work ends the same way (same error) without running.
  /// An empty `parts` gives the body an empty array at once.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - parts: The dependencies whose values the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the values of `parts` in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Part: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterAll parts: [Work<Part>],
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable ([Part]) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: parts + dependencies,
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in await type.runAsync(work) { try await body(parts.map { $0.dependencyValue() }) } }
    )
  }

  /// Adds work whose body receives the outcomes of any number of dependencies of one type, in order.
  ///
  /// The body runs on a thread of the queue and may throw: the work then fails with that error (or ends
  /// cancelled for `CancellationError`). A running body learns of cancellation through ``WorkContext/current``.
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// ```swift
  /// let summary = queue.add(afterAllResults: uploads) { results in
  ///   results.filter { (try? $0.get()) == nil }.count   // how many failed
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - parts: The dependencies whose outcomes the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the outcomes of `parts` in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Part: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterAllResults parts: [Work<Part>],
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable ([Result<Part, any Error>]) throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: parts + dependencies,
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .sync { [type] work in type.runSync(work) { try body(parts.map { $0.dependencyResult() }) } }
    )
  }

  /// Adds work whose `async` body receives the outcomes of any number of dependencies of one type, in order.
  ///
  /// The body runs in a task of its own and holds a slot of the queue until it returns; cancelling the work
  /// cancels that task. It may throw: the work then fails with that error (or ends cancelled for
  /// `CancellationError`).
  ///
  /// The body runs whatever its dependencies did, and receives each one's outcome.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - parts: The dependencies whose outcomes the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only, any value type, any queue).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: The work to do, given the outcomes of `parts` in order.
  /// - Returns: The work item, to read its value, depend on it, observe or cancel it.
  @discardableResult
  public func add<Part: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    afterAllResults parts: [Work<Part>],
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable ([Result<Part, any Error>]) async throws -> Value
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      dependencies: parts + dependencies,
      acceptsFailedDependencies: true,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .async { [type] work in await type.runAsync(work) { try await body(parts.map { $0.dependencyResult() }) } }
    )
  }

  /// The state of the options of an `add` call, or `nil` when none is used (the hot path: a pointer, no copy).
  ///
  /// Inlinable, so that the caller's specialised `add` tests the options itself: called unspecialised, testing a
  /// `WorkCondition<Value>?` went through its type's metadata (about 35 instructions per item, under callgrind).
  @inlinable @inline(__always)
  static func extras<Value: Sendable>(
    _ type: Work<Value>.Type,
    _ qos: DispatchQoS.QoSClass?,
    _ condition: WorkCondition<Value>?,
    _ delay: Duration?,
    _ timeout: Duration?,
    _ retry: WorkRetry?,
    _ exclusive: String?
  ) -> WorkExtras? {
    if qos == nil && condition == nil && delay == nil && timeout == nil && retry == nil && exclusive == nil {
      return nil
    }
    return makeExtras(type, qos, condition, delay, timeout, retry, exclusive)
  }

  /// The state of options that are used (out of line: the rare path of ``extras(_:_:_:_:_:_:_:)``).
  @usableFromInline @inline(never)
  static func makeExtras<Value: Sendable>(
    _ type: Work<Value>.Type,
    _ qos: DispatchQoS.QoSClass?,
    _ condition: WorkCondition<Value>?,
    _ delay: Duration?,
    _ timeout: Duration?,
    _ retry: WorkRetry?,
    _ exclusive: String?
  ) -> WorkExtras {
    if let timeout {
      precondition(timeout > .zero, "WorkQueue.add: timeout must be above zero, got \(timeout)")
    }
    if let delay {
      precondition(delay >= .zero, "WorkQueue.add: delay must not be negative, got \(delay)")
    }
    var options = WorkOptions()
    options.qos = qos
    options.delay = delay
    options.timeout = timeout
    options.retry = retry
    options.exclusive = exclusive
    if let condition {
      options.condition = { work in
        switch condition.evaluate() {
        case .run: return .run
        case .skip(nil): return .skip(.cancelled)
        case .skip(let value?):
          type.store(value, in: work)
          return .skip(.finished)
        case .fail(let error): return .fail(error)
        }
      }
    }
    return WorkExtras(options: options)
  }

  /// The dependencies of a parameter-pack form, in order, followed by the ordering-only ones.
  static func dependencyList<First, Second, each Rest>(
    _ first: Work<First>,
    _ second: Work<Second>,
    _ rest: repeat Work<each Rest>,
    more: [AnyWork]
  ) -> [AnyWork] {
    var list: [AnyWork] = [first, second]
    for work in repeat each rest { list.append(work) }
    return list + more
  }

  /// Adds work with a callback-style body, which completes the work by calling `finish` once, from any thread.
  ///
  /// The body runs on a Dispatch thread of the queue; the work holds its slot until `finish` is called with
  /// a value, a `Result` or an error. A second call of `finish` is ignored and reported through
  /// ``WorkQueue/misuseHandler``; dropping `finish` uncalled fails the work with ``WorkFinishDroppedError``.
  /// Register `finish.onCancel` (or poll `finish.isCancelled`) to learn of cancellation. A `finish` called
  /// before the body returns completes the work on the same thread, with no thread hop.
  ///
  /// ```swift
  /// let old = queue.addCallback { finish in legacyFetch { finish($0) } }
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - dependencies: Work to wait for without receiving its value (ordering only).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: Starts the work and arranges for `finish` to be called.
  /// - Returns: The work item.
  // Inlinable, as `add`: specialized in the caller, the erased body captures nothing and the typed body is stored
  // in the item, so a callback item costs no wrapper closure.
  @discardableResult
  @inlinable
  public func addCallback<Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (WorkFinish<Value>) -> Void
  ) -> Work<Value> {
    let type = Work<Value>.self
    let extras = Self.extras(type, qos, condition, delay, timeout, retry, exclusive)
    guard extras == nil else {
      // Conditions, retries and exclusivity may run the body again or not at all: the wrapper keeps it.
      return makeWork(
        type,
        name: name,
        priority: priority,
        dependencies: dependencies,
        acceptsFailedDependencies: false,
        extras: extras,
        body: .callback { _, token in body(WorkFinish(token: token)) }
      )
    }
    return makeWork(
      WorkCallback<Value>.self,
      name: name,
      priority: priority,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      body: .callback { work, token in WorkCallback<Value>.runStoredCallback(work, token) }
    ) { work in unsafeDowncast(work, to: WorkCallback<Value>.self).callbackBody = body }
  }

  /// Adds work with a callback-style body that receives the value of `a` once it finished.
  ///
  /// Like ``addCallback(name:priority:qos:dependencies:condition:delay:timeout:retry:exclusive:_:)``; if `a` fails or is cancelled, this work ends the
  /// same way without running.
  ///
  /// - Parameters:
  ///   - name: A name for traces and messages.
  ///   - priority: The order among ready work of this queue (first in, first out within a priority).
  ///   - qos: The quality of service of an `async` body's task (on Linux, threads have none).
  ///   - a: The dependency whose value the body receives.
  ///   - dependencies: More work to wait for without receiving its value (ordering only).
  ///   - condition: Checked when the work is about to start: run, skip or fail (see ``WorkCondition``).
  ///   - delay: Start no earlier than this long after adding (no slot or thread is held while waiting).
  ///   - timeout: Fail with ``WorkTimeoutError`` (and cancel the body) if an attempt runs longer.
  ///   - retry: Try failed work again (see ``WorkRetry``).
  ///   - exclusive: A key: work with the same key never runs at the same time, on any queue.
  ///   - body: Starts the work with the value of `a` and arranges for `finish` to be called.
  /// - Returns: The work item.
  @discardableResult
  public func addCallback<A: Sendable, Value: Sendable>(
    name: String? = nil,
    priority: WorkPriority = .normal,
    qos: DispatchQoS.QoSClass? = nil,
    after a: Work<A>,
    dependencies: [AnyWork] = [],
    condition: WorkCondition<Value>? = nil,
    delay: Duration? = nil,
    timeout: Duration? = nil,
    retry: WorkRetry? = nil,
    exclusive: String? = nil,
    _ body: @escaping @Sendable (A, WorkFinish<Value>) -> Void
  ) -> Work<Value> {
    let type = Work<Value>.self
    return makeWork(
      type,
      name: name,
      priority: priority,
      first: a,
      dependencies: dependencies,
      acceptsFailedDependencies: false,
      extras: Self.extras(type, qos, condition, delay, timeout, retry, exclusive),
      body: .callback { _, token in body(a.dependencyValue(), WorkFinish(token: token)) }
    )
  }
}
