import Dispatch

extension IdentifiableDispatchQueue {
  /// Runs `work` on the queue and returns its result, inline when already on the queue.
  ///
  /// - When the calling code runs on this queue, or on a queue whose target chain includes it (libdispatch's view at
  ///   the time of the call), `work` runs inline on the calling thread instead of deadlocking.
  /// - Otherwise `work` is dispatched with `DispatchQueue.sync`, and code inside it is also recognised as running on
  ///   the caller's queues (see ``currentQueueIs(_:)``).
  /// - If dispatching could never return, the process stops with a ``DeadlockError`` message naming the chain of
  ///   labels instead of hanging or trapping in libdispatch. Use ``syncChecked(flags:execute:)`` to get the error
  ///   thrown instead. That is the case when
  ///   - this queue, or a serial queue it was created to target, is held by a caller blocked in an enclosing `sync`
  ///     (`a.sync { b.sync { a.sync { } } }`);
  ///   - this queue, or a concurrent queue it was created to target, is running a barrier block further up the
  ///     calling thread's chain: one entered with this type's `sync(flags: .barrier)`, or submitted with its
  ///     `async(flags: .barrier)` or `asyncAfter(deadline:flags: .barrier)`
  ///     (`c.sync(flags: .barrier) { s.sync { c.sync { } } }`);
  ///   - a barrier is requested from inside the same concurrent queue, or from a chain that holds it in any way.
  ///
  /// What cannot be known: a cycle closed by plain `DispatchQueue.sync` calls that never go through this type, a
  /// barrier block submitted to ``queue`` directly (`queue.async(flags: .barrier)`), a target set later with
  /// `setTarget(queue:)` or on an adopted queue (for deadlock detection only), and two different threads taking two
  /// queues in opposite orders. A non-barrier `sync` into a concurrent queue that a non-barrier block up the chain
  /// runs on is not a deadlock, and runs.
  ///
  /// ```swift
  /// let cache = IdentifiableDispatchQueue(label: "com.app.cache")
  /// func value(for key: String) -> Int? { cache.sync { storage[key] } }
  /// cache.sync { _ = value(for: "a") }  // re-entrant: runs inline, no deadlock
  /// ```
  ///
  /// - Parameters:
  ///   - flags: Passed to `DispatchQueue.sync(flags:execute:)`; `.barrier` on a concurrent queue is never run inline.
  ///   - work: The block; errors it throws are rethrown to the caller.
  @inlinable
  public func sync<T>(flags: DispatchWorkItemFlags = [], execute work: () throws -> T) rethrows -> T {
    let onIdentifiableQueue = identity.anyIsCurrent
    if onIdentifiableQueue && identity.isInCurrentTargetChain {
      guard identity.isConcurrent && flags.contains(.barrier) else { return try work() }
      fatalError(barrierFromInside().description)
    }
    let nearest = onIdentifiableQueue ? identity.nearest : nil
    let top = SyncChain.top(identity.chainSlot)
    switch route(nearest: nearest, top: top, flags: flags) {
    case .dispatch: return try dispatch(nearest: nearest, top: top, flags: flags, work, rescue: { throw $0 })
    case .deadlock(let error): fatalError(error.description)  // fatalError keeps the message in -O builds
    }
  }

  /// Runs `work` on the queue like ``sync(flags:execute:)``, but throws ``DeadlockError`` instead of stopping the
  /// process when the dispatch could never return (the cases ``sync(flags:execute:)`` lists).
  ///
  /// ```swift
  /// do {
  ///   try queue.syncChecked { mutate() }
  /// } catch let error as DeadlockError {
  ///   log("\(error)")  // names the chain of queue labels
  /// }
  /// ```
  ///
  /// - Throws: ``DeadlockError`` before running `work`, or whatever `work` throws.
  @inlinable
  public func syncChecked<T>(flags: DispatchWorkItemFlags = [], execute work: () throws -> T) throws -> T {
    let onIdentifiableQueue = identity.anyIsCurrent
    if onIdentifiableQueue && identity.isInCurrentTargetChain {
      guard identity.isConcurrent && flags.contains(.barrier) else { return try work() }
      throw barrierFromInside()
    }
    let nearest = onIdentifiableQueue ? identity.nearest : nil
    let top = SyncChain.top(identity.chainSlot)
    switch route(nearest: nearest, top: top, flags: flags) {
    case .dispatch: return try dispatch(nearest: nearest, top: top, flags: flags, work, rescue: { throw $0 })
    case .deadlock(let error): throw error
    }
  }

  /// Submits `work` to run asynchronously on the queue; forwards to `DispatchQueue.async(group:qos:flags:execute:)`.
  ///
  /// A `.barrier` block on a concurrent queue is recorded for the time it runs, so a ``sync(flags:execute:)`` back
  /// into the queue from inside it (through other queues) is reported as a deadlock instead of reaching libdispatch.
  public func async(
    group: DispatchGroup? = nil,
    qos: DispatchQoS = .unspecified,
    flags: DispatchWorkItemFlags = [],
    execute work: @escaping @Sendable () -> Void
  ) {
    queue.async(group: group, qos: qos, flags: flags, execute: recordingBarrier(flags, work))
  }

  /// Submits `work` to run on the queue at `deadline`.
  ///
  /// Forwards to `DispatchQueue.asyncAfter(deadline:qos:flags:execute:)`; a `.barrier` block on a concurrent queue is
  /// recorded as with ``async(group:qos:flags:execute:)``.
  public func asyncAfter(
    deadline: DispatchTime,
    qos: DispatchQoS = .unspecified,
    flags: DispatchWorkItemFlags = [],
    execute work: @escaping @Sendable () -> Void
  ) {
    queue.asyncAfter(deadline: deadline, qos: qos, flags: flags, execute: recordingBarrier(flags, work))
  }

  /// `work` itself, or for a barrier on a concurrent queue, `work` run under a frame that marks this queue as held
  /// exclusively by the thread running it (see `SyncChain.holdsExclusively(_:from:)`).
  private func recordingBarrier(
    _ flags: DispatchWorkItemFlags,
    _ work: @escaping @Sendable () -> Void
  ) -> @Sendable () -> Void {
    guard identity.isConcurrent && flags.contains(.barrier) else { return work }
    let identity = identity
    return {
      let slot = identity.chainSlot
      // The block holds `identity`, so the unretained reference outlives the frame.
      let frame = SyncFrame(
        queue: Unmanaged.passUnretained(identity),
        caller: nil,
        next: SyncChain.top(slot),
        barrier: true
      )
      withExtendedLifetime(identity) {
        withUnsafePointer(to: frame) { frame in SyncChain.withFrame(frame, slot: slot, work) }
      }
    }
  }

  /// How a `sync` must go.
  @usableFromInline
  enum SyncRoute {
    case dispatch
    case deadlock(DeadlockError)
  }

  /// Decides how a `sync` must go once the calling code is known not to run on this queue; the common case costs one
  /// `dispatch_get_specific` and one thread-local read.
  @inlinable @inline(__always)
  func route(nearest: QueueIdentity?, top: UnsafePointer<SyncFrame>?, flags: DispatchWorkItemFlags) -> SyncRoute {
    // Not on any identifiable queue, outside any chain, no recorded target: nothing can hold this queue.
    if nearest == nil && top == nil && identity.parent == nil { return .dispatch }
    return slowRoute(nearest: nearest, top: top, flags: flags)
  }

  /// The error for a barrier `sync` requested from inside this concurrent queue.
  @usableFromInline
  func barrierFromInside() -> DeadlockError {
    let top = SyncChain.top(identity.chainSlot)
    return deadlockError(nearest: identity.nearest, top: top, held: identity, reason: .barrierFromInside)
  }

  /// The rarer paths: running on another identifiable queue, inside a sync chain, or with recorded targets.
  @usableFromInline
  func slowRoute(nearest: QueueIdentity?, top: UnsafePointer<SyncFrame>?, flags: DispatchWorkItemFlags) -> SyncRoute {
    let barrier = flags.contains(.barrier)
    // Is this queue held by a blocked caller? Any hold blocks a serial queue or a barrier; a non-barrier block of a
    // concurrent queue waits only for a barrier block of the queue itself running further up this thread's chain.
    let shared = identity.isConcurrent && !barrier
    if shared ? SyncChain.holdsExclusively(identity, from: top) : SyncChain.holds(identity, from: top) {
      return .deadlock(deadlockError(nearest: nearest, top: top, held: identity, reason: .cycle))
    }
    // Is a queue it targets held: a serial one by a blocked caller or the current block, a concurrent one by a
    // barrier block in the chain?
    var ancestor = identity.parent
    while let held = ancestor {
      let blocked =
        held.isConcurrent
        ? SyncChain.holdsExclusively(held, from: top)
        : (nearest != nil && held.isInCurrentTargetChain) || SyncChain.holds(held, from: top)
      if blocked {
        return .deadlock(deadlockError(nearest: nearest, top: top, held: held, reason: .cycle))
      }
      ancestor = held.parent
    }
    return .dispatch
  }

  /// Builds the error naming the chain: the blocked callers, the current queue, then this queue.
  func deadlockError(
    nearest: QueueIdentity?,
    top: UnsafePointer<SyncFrame>?,
    held: QueueIdentity,
    reason: DeadlockError.Reason
  ) -> DeadlockError {
    let current = nearest?.label ?? (top == nil ? nil : Self.currentLabel)
    var chain = SyncChain.labels(from: top, current: current)
    chain.append(label)
    return DeadlockError(chain: chain, heldQueue: held.label, reason: reason)
  }

  /// Dispatches `work` with `DispatchQueue.sync`, publishing the caller's chain to the block's thread.
  ///
  /// Goes through `DispatchQueue`'s non-generic `sync(execute:)` (the generic overload looks up type metadata on every
  /// call); an error thrown by `work` is carried out of the block and handed to `rescue`, which rethrows it.
  @inlinable @inline(__always)
  func dispatch<T>(
    nearest: QueueIdentity?,
    top: UnsafePointer<SyncFrame>?,
    flags: DispatchWorkItemFlags,
    _ work: () throws -> T,
    rescue: (any Error) throws -> T
  ) rethrows -> T {
    var result: T? = nil
    var failure: (any Error)? = nil
    withExtendedLifetime(nearest) {
      let frame = SyncFrame(
        queue: Unmanaged.passUnretained(identity),
        caller: nearest.map { Unmanaged.passUnretained($0) },
        next: top,
        barrier: flags.contains(.barrier)
      )
      withUnsafePointer(to: frame) { frame in
        // Closure literals (not a stored closure) keep `result` and `failure` on the stack.
        if flags.isEmpty {
          queue.sync {
            SyncChain.withFrame(frame, slot: identity.chainSlot) {
              do { result = try work() } catch { failure = error }
            }
          }
        } else {
          queue.sync(flags: flags) {
            SyncChain.withFrame(frame, slot: identity.chainSlot) {
              do { result = try work() } catch { failure = error }
            }
          }
        }
      }
    }
    if let failure { return try rescue(failure) }
    return result!
  }
}
