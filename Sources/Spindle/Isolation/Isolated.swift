import Dispatch
import Synchronization

/// A value guarded by a lock, read and written through closures: the playground's barrier pattern, made generic.
///
/// `read` and `write` run their closure on a consistent value and return its result, so no caller ever
/// observes a half-applied write (a `Person` whose first name is new and last name old). `writeAsync` is
/// the seed's `dispatch_barrier_async`: it returns at once, and any `read` or `write` that starts after it
/// returned, on any thread, observes the change. Asynchronous writes apply in the order they were issued.
///
/// ```swift
/// let person = Isolated(Person(first: "Anna", last: "Adams"))
/// person.write { $0.first = "Brian"; $0.last = "Biggles" }
/// let name = person.read { "\($0.first) \($0.last)" }  // "Brian Biggles"
/// person.writeAsync { $0.last = "Frost" }
/// person.read(\.last)  // "Frost": a later read always sees an earlier writeAsync
/// ```
///
/// ## Implementation, chosen by measurement
/// Writes hold a `Synchronization.Mutex` whose lock word is stored right beside the value. How reads
/// work depends on `Value`, decided when the generic code is specialised (the public API is the same):
///
/// - **Small plain values** (trivially copyable — no references, `BitwiseCopyable` in practice — of at
///   most 64 bytes, such as counters, flags, small structs of numbers): reads take no lock and write no
///   shared memory. Each write, under the mutex, changes a copy and publishes it into a *sequence lock*:
///   a counter made odd, the value's bytes stored as machine words, the counter made even again (the
///   writers' mutex heads the same 64-byte-aligned block, so a write moves one cache line). A
///   reader loads the counter, copies the words, and loads the counter again; if it changed or was odd,
///   a write overlapped and the reader retries, so the closure only ever sees a value some write left
///   complete. Every word and the counter are atomics (relaxed loads and stores, ordered by acquire and
///   release fences — the standard construction that is correct in the C11/Swift memory model), so
///   ThreadSanitizer sees no plain access race; the closure gets a private copy. A reader that keeps
///   losing to writers (a writer preempted mid-publish) falls back to the mutex after a few tries.
///   Measured on Linux (the `isolation` benchmark suite), a read costs a few nanoseconds on one
///   thread and scales across threads, where a `pthread_rwlock_t` read lock is an atomic
///   read-modify-write on a shared cache line.
/// - **Other values** (strings, arrays, classes, large structs): reads take the same mutex as writes,
///   so `Isolated` costs what a bare `Mutex` costs. A heap-allocated `pthread_rwlock_t` measured
///   1.7-2.7 times a `Mutex` in a 95 % read mix and a concurrent `DispatchQueue` with barriers 25-80 times.
///
/// Keep closures short; never `await` or call back into the same `Isolated` inside them (the lock is
/// not reentrant: doing so deadlocks).
///
/// `writeAsync` applies the write at once when the mutex is free (it only tries the lock, never waits).
/// Otherwise it appends the closure to a pending list and schedules a drain on a global dispatch
/// queue; every `read` and `write` first applies pending writes (one atomic load when there are none),
/// which is what makes a later read observe an earlier `writeAsync` without waiting for the drain.
///
/// ## Sendability
/// `Isolated` is `Sendable` when `Value` is. `Mutex` itself is unconditionally `Sendable` by requiring
/// `sending` values in and out of every closure; that would forbid the natural
/// `person.read { $0.name }` on non-`Sendable` values and would rule out readers that run at the same
/// time on several threads, so `Isolated` requires `Value: Sendable` to cross threads instead (and
/// ``writeAsync(_:)``, whose closure runs on another thread, needs it too). `Value` must be copyable; use
/// `Mutex` directly for `~Copyable` state.
public final class Isolated<Value> {
  /// Guards `value` and `spare` unless the value reads through the sequence lock: every access to them
  /// happens inside ``exclusively(_:)``, which takes this lock or `sequenceLock`.
  @usableFromInline let lock = TSanVisibleMutex<Void>(())
  /// For values read through the sequence lock, the mutex writers take instead of `lock`: it heads the block
  /// of `published`, so a write moves one cache line (lock word, counter and data), as a bare `Mutex` does.
  @usableFromInline let sequenceLock: UnsafeMutablePointer<TSanVisibleMutex<Void>>?
  /// The sequence lock of a small plain value (``usesSequenceLock``), nil otherwise: word 0 is the
  /// sequence counter (odd while a write is being published), words 1... hold the value's bytes.
  /// It follows `sequenceLock` in one 64-byte-aligned block, so a value of up to 40 bytes shares one
  /// cache line with the counter and the writers' lock.
  @usableFromInline let published: UnsafeMutablePointer<Atomic<UInt>>?
  /// An empty buffer that a drain swaps with `pending`, so draining allocates nothing in the steady state.
  nonisolated(unsafe) var spare: [@Sendable (inout Value) -> Void] = []
  /// The value, stored inline next to the lock word so that a contended access moves one cache line, not two; for
  /// a sequence-locked value, only the initial value (its published words are the value from then on: see
  /// ``lockedSnapshot()``).
  @usableFromInline @exclusivity(unchecked) nonisolated(unsafe) var value: Value
  /// Asynchronous writes not applied yet, in issue order.
  @usableFromInline let pending = TSanVisibleMutex<[@Sendable (inout Value) -> Void]>([])
  /// True while `pending` may be non-empty: set under the `pending` lock with each append, cleared under
  /// it only when the list is empty, after the applied writes were published.
  @usableFromInline let hasPending = Atomic<Bool>(false)
  /// True while a background drain is scheduled and has not started.
  let drainScheduled = Atomic<Bool>(false)
  private let drainQueue: DispatchQueue

  /// The largest value that reads through a sequence lock, in bytes.
  @usableFromInline static var sequenceLockBytes: Int { 64 }

  /// The words (8 bytes on 64-bit platforms) a published value occupies.
  @usableFromInline static var wordCount: Int {
    (MemoryLayout<Value>.size + MemoryLayout<UInt>.size - 1) / MemoryLayout<UInt>.size
  }

  /// Whether reads go through the sequence lock: trivially copyable values of at most 64 bytes.
  ///
  /// A constant once the generic code is specialised, so the other branch costs nothing.
  @inlinable static var usesSequenceLock: Bool {
    _isPOD(Value.self) && MemoryLayout<Value>.size <= sequenceLockBytes
      && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
  }

  /// Creates an isolated value.
  ///
  /// - Parameters:
  ///   - value: The initial value.
  ///   - qos: The quality of service of the background drain that applies ``writeAsync(_:)`` closures.
  public convenience init(_ value: Value, qos: DispatchQoS.QoSClass = .default) {
    self.init(value, drainingOn: DispatchQueue.global(qos: qos))
  }

  /// Creates an isolated value whose background drain runs on `drainQueue` (tests suspend it).
  init(_ value: Value, drainingOn drainQueue: DispatchQueue) {
    self.value = value
    self.drainQueue = drainQueue
    if Self.usesSequenceLock {
      let count = 1 + Self.wordCount
      let block = UnsafeMutableRawPointer.allocate(
        byteCount: Self.headerBytes + count * MemoryLayout<UInt>.stride, alignment: 64)
      let mutex = block.bindMemory(to: TSanVisibleMutex<Void>.self, capacity: 1)
      mutex.initialize(to: TSanVisibleMutex(()))
      let words = (block + Self.headerBytes).bindMemory(to: Atomic<UInt>.self, capacity: count)
      for index in 0..<count { (words + index).initialize(to: Atomic<UInt>(0)) }
      sequenceLock = mutex
      published = words
      publishLocked(value)  // nobody else can see `self` yet
    } else {
      sequenceLock = nil
      published = nil
    }
  }

  deinit {
    if let sequenceLock, let published {
      published.deinitialize(count: 1 + Self.wordCount)
      sequenceLock.deinitialize(count: 1)
      UnsafeMutableRawPointer(sequenceLock).deallocate()
    }
  }

  /// The bytes before the sequence counter in the block: the writers' mutex, rounded up to a word.
  static var headerBytes: Int {
    (MemoryLayout<TSanVisibleMutex<Void>>.stride + MemoryLayout<UInt>.stride - 1) & ~(MemoryLayout<UInt>.stride - 1)
  }

  /// Runs `body` holding the lock that guards `value`: `sequenceLock` for values read through the sequence
  /// lock, `lock` for the others (a constant choice once specialised).
  @inlinable @inline(__always)
  func exclusively<Result>(_ body: () -> Result) -> Result {
    if Self.usesSequenceLock, let sequenceLock {
      return sequenceLock.pointee.withLock { _ -> Result in
        nonisolated(unsafe) let result = body()
        return result
      }
    }
    return lock.withLock { _ -> Result in
      nonisolated(unsafe) let result = body()
      return result
    }
  }

  /// ``exclusively(_:)`` for a throwing `body`.
  @inlinable @inline(__always)
  func exclusivelyThrowing<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
    if Self.usesSequenceLock, let sequenceLock {
      return try sequenceLock.pointee.withLock { _ throws(Failure) -> Result in
        nonisolated(unsafe) let result = try body()
        return result
      }
    }
    return try lock.withLock { _ throws(Failure) -> Result in
      nonisolated(unsafe) let result = try body()
      return result
    }
  }

  /// ``exclusively(_:)`` if the lock is free right now; nil, without waiting, if another thread holds it.
  @inlinable @inline(__always)
  func exclusivelyIfAvailable(_ body: () -> Void) -> Bool {
    if Self.usesSequenceLock, let sequenceLock {
      return sequenceLock.pointee.withLockIfAvailable { _ in body() } != nil
    }
    return lock.withLockIfAvailable { _ in body() } != nil
  }

  /// Calls `body` with the current value and returns its result.
  ///
  /// Pending ``writeAsync(_:)`` closures are applied first.
  @inlinable @inline(__always)
  public func read<Result>(_ body: (borrowing Value) -> Result) -> Result {
    if Self.usesSequenceLock, let snapshot = sequencedSnapshot() { return body(snapshot) }
    // A non-throwing overload: the optimizer inlines a non-throwing closure into the critical section,
    // which it does not do through the typed-throws generic below (measured: ~1 ns per access).
    return exclusively { () -> Result in
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      if Self.usesSequenceLock { return body(lockedSnapshot()) }
      return body(self.value)
    }
  }

  /// Calls a throwing `body` with the current value and returns its result.
  ///
  /// Pending ``writeAsync(_:)`` closures are applied first. Errors thrown by `body` propagate unchanged.
  @inlinable @inline(__always)
  public func read<Result, Failure: Error>(
    _ body: (borrowing Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    if Self.usesSequenceLock, let snapshot = sequencedSnapshot() { return try body(snapshot) }
    return try exclusivelyThrowing { () throws(Failure) -> Result in
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      if Self.usesSequenceLock { return try body(lockedSnapshot()) }
      return try body(self.value)
    }
  }

  /// Returns the property at `keyPath` of the current value.
  @inlinable
  public func read<Result>(_ keyPath: KeyPath<Value, Result>) -> Result {
    read { $0[keyPath: keyPath] }
  }

  /// Calls `body` with exclusive, mutable access to the value and returns its result.
  ///
  /// Pending ``writeAsync(_:)`` closures are applied first, so writes keep their issue order.
  @inlinable @inline(__always)
  @discardableResult
  public func write<Result>(_ body: (inout Value) -> Result) -> Result {
    return exclusively { () -> Result in
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      return mutateLocked(body)
    }
  }

  /// Calls a throwing `body` with exclusive, mutable access to the value and returns its result.
  ///
  /// Pending ``writeAsync(_:)`` closures are applied first, so writes keep their issue order. If `body`
  /// throws, the changes it made before throwing are kept and the error propagates.
  ///
  /// ```swift
  /// let previous = person.write { p in
  ///   defer { p.first = "Brian"; p.last = "Biggles" }
  ///   return p.first
  /// }
  /// ```
  @inlinable @inline(__always)
  @discardableResult
  public func write<Result, Failure: Error>(
    _ body: (inout Value) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    // `Mutex<Value>` would demand `sending` values in and out of every closure (see Sendability above), so the
    // lock guards a plain stored property instead; `Isolated` only crosses threads when `Value` is Sendable.
    return try exclusivelyThrowing { () throws(Failure) -> Result in
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      if Self.usesSequenceLock {
        var copy = lockedSnapshot()
        defer { publishLocked(copy) }
        return try body(&copy)
      }
      return try body(&self.value)
    }
  }

  // MARK: - Sequence lock

  /// Eight words: room for the largest value that reads through the sequence lock.
  @usableFromInline typealias Words = (UInt, UInt, UInt, UInt, UInt, UInt, UInt, UInt)

  /// A copy of the value that no write overlapped, read without the lock; nil when a writeAsync is pending
  /// (the caller takes the lock and applies it) or writers kept overlapping (the caller takes the lock).
  ///
  /// Relaxed loads of the data words between an acquiring load of the counter and an acquiring fence
  /// followed by a second load of it: if both loads return the same even count, no publish overlapped the
  /// copy, and the words are the ones the write that stored that count left (its releasing store of the
  /// count is what the first load synchronises with).
  @inlinable @inline(__always)
  func sequencedSnapshot() -> Value? {
    guard let words = published, !hasPending.load(ordering: .acquiring) else { return nil }
    var attempts = 0
    while attempts < 64 {
      let start = words[0].load(ordering: .acquiring)
      if start & 1 == 0 {
        var copy: Words = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &copy) { raw in
          let target = raw.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt.self)
          for index in 0..<Self.wordCount { target[index] = words[1 &+ index].load(ordering: .relaxed) }
        }
        atomicMemoryFence(ordering: .acquiring)
        if words[0].load(ordering: .relaxed) == start {
          return withUnsafeBytes(of: &copy) { $0.load(as: Value.self) }
        }
      }
      attempts &+= 1
    }
    return nil
  }

  /// The value of a sequence-locked `Isolated`, read from its published words; the caller holds `sequenceLock`, so
  /// no write overlaps the copy.
  ///
  /// For these values the published words are the value: writers mutate a copy and publish it, and never write
  /// `value` (which only the initializer sets). Writing it would dirty the object's cache line that holds
  /// `published` and `hasPending`, which every lock-free read loads: with two threads writing and reading at once,
  /// that line and the block's went back and forth on every access, and the 50/50 mix took 4-6x a `Mutex`'s time.
  @inlinable @inline(__always)
  func lockedSnapshot() -> Value {
    let words = published.unsafelyUnwrapped
    var copy: Words = (0, 0, 0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &copy) { raw in
      let target = raw.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt.self)
      for index in 0..<Self.wordCount { target[index] = words[1 &+ index].load(ordering: .relaxed) }
    }
    return withUnsafeBytes(of: &copy) { $0.load(as: Value.self) }
  }

  /// Runs `body` on the value, mutably; the caller is inside ``exclusively(_:)``. A sequence-locked value is
  /// mutated as a copy, then published (see ``lockedSnapshot()``).
  @inlinable @inline(__always)
  func mutateLocked<Result>(_ body: (inout Value) -> Result) -> Result {
    guard Self.usesSequenceLock else { return body(&self.value) }
    var copy = lockedSnapshot()
    let result = body(&copy)
    publishLocked(copy)
    return result
  }

  /// Stores `value` into the sequence lock; the caller holds `sequenceLock` (or is the initializer).
  ///
  /// Counter made odd (relaxed), releasing fence, data words (relaxed), counter made even (releasing): a
  /// reader that sees the even count either sees all these words or sees the count change.
  @inlinable @inline(__always)
  func publishLocked(_ value: Value) {
    guard let words = published else { return }
    var copy: Words = (0, 0, 0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &copy) { raw in
      _ = raw.baseAddress.unsafelyUnwrapped.initializeMemory(as: Value.self, to: value)
    }
    let count = words[0].load(ordering: .relaxed)
    words[0].store(count &+ 1, ordering: .relaxed)
    atomicMemoryFence(ordering: .releasing)
    withUnsafeBytes(of: &copy) { raw in
      let source = raw.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: UInt.self)
      for index in 0..<Self.wordCount { words[1 &+ index].store(source[index], ordering: .relaxed) }
    }
    words[0].store(count &+ 2, ordering: .releasing)
  }

  // MARK: - Asynchronous writes

  /// Applies every queued ``writeAsync(_:)`` closure, in issue order; the caller is inside ``exclusively(_:)``.
  ///
  /// `hasPending` is cleared only once the batch is applied and published, and only if nothing was queued
  /// meanwhile, so whoever sees it cleared sees the batch: through the sequence lock or under `lock`.
  @usableFromInline
  func applyPendingWritesLocked() {
    var batch: [@Sendable (inout Value) -> Void] = []
    swap(&batch, &spare)
    pending.withLock { list in swap(&list, &batch) }
    // Applied outside the `pending` lock, so a queued write may itself call `writeAsync`.
    if Self.usesSequenceLock {
      var copy = lockedSnapshot()
      for write in batch { write(&copy) }
      publishLocked(copy)
    } else {
      for write in batch { write(&self.value) }
    }
    pending.withLock { list in
      if list.isEmpty { hasPending.store(false, ordering: .releasing) }
    }
    batch.removeAll(keepingCapacity: true)
    swap(&batch, &spare)
  }

  /// Takes the lock and applies every queued ``writeAsync(_:)`` closure (the background drain).
  func applyPendingWrites() {
    exclusively {
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
    }
  }
}

// `exclusively` (the Mutex `sequenceLock` for sequence-locked values, else the Mutex `lock`) guards `value` and
// `spare` and serialises the stores to `published`, whose words are atomics; the Mutex `pending` guards queued
// writes; the rest is immutable or atomic.
extension Isolated: @unchecked Sendable where Value: Sendable {}

extension Isolated where Value: Sendable {
  /// Schedules `body` to mutate the value and returns without waiting (the seed's barrier write).
  ///
  /// Any `read(_:)` or `write(_:)` that starts after this call returns, on any thread, observes
  /// the change; asynchronous writes apply in the order they were issued. When nobody holds the lock the
  /// write is applied before this returns; otherwise it is queued, and if nothing reads the value, a
  /// background drain applies it within a fraction of a millisecond; the `Isolated` stays alive until
  /// it has.
  ///
  /// ```swift
  /// let hits = Isolated(0)
  /// hits.writeAsync { $0 += 1 }  // never waits for a reader or writer on another thread
  /// ```
  @inlinable
  public func writeAsync(_ body: @escaping @Sendable (inout Value) -> Void) {
    // Only tries the lock: a free lock means applying now costs what `write` costs, and keeps the order
    // (queued writes, all issued earlier, are applied first).
    let applied = exclusivelyIfAvailable {
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      mutateLocked(body)
    }
    if !applied { enqueue(body) }
  }

  /// Schedules `body` to mutate the value with `argument`, as ``writeAsync(_:)`` does, without allocating when the
  /// lock is free.
  ///
  /// Swift allocates the context of an escaping closure that captures values before the call, whether or not the
  /// closure is ever stored; in `spindle bench isolation` that allocation makes ``writeAsync(_:)`` with a capturing
  /// closure cost about 4x a `write(_:)`. Pass what the write needs as `argument` and keep `body` free of
  /// captures: when the lock is free, nothing is allocated and the write costs about what `write(_:)` costs; only
  /// a write that has to be queued packs `body` and `argument` into one allocation. The guarantees are those of
  /// ``writeAsync(_:)``: any read or write that starts after this returns, on any thread, observes the change, and
  /// asynchronous writes apply in the order they were issued, whichever form issued them.
  ///
  /// ```swift
  /// let latest = Isolated(Reading())
  /// latest.writeAsync(sample) { reading, sample in reading.record(sample) }  // captures nothing
  /// ```
  @inlinable
  public func writeAsync<Argument: Sendable>(
    _ argument: Argument,
    _ body: @escaping @Sendable (inout Value, Argument) -> Void
  ) {
    let applied = exclusivelyIfAvailable {
      if hasPending.load(ordering: .acquiring) { applyPendingWritesLocked() }
      mutateLocked { body(&$0, argument) }
    }
    if !applied { enqueue { value in body(&value, argument) } }
  }

  /// Queues `body` for the next reader, writer or background drain (the lock was busy).
  @usableFromInline
  func enqueue(_ body: @escaping @Sendable (inout Value) -> Void) {
    pending.withLock { list in
      list.append(body)
      hasPending.store(true, ordering: .releasing)
    }
    // At most one drain is scheduled at a time, a little later: reads and writes apply pending writes
    // themselves, the drain only guarantees progress when nobody touches the value, and batching the
    // wake-ups keeps a burst of `writeAsync` calls from paying a dispatch each.
    if !drainScheduled.exchange(true, ordering: .acquiringAndReleasing) {
      drainQueue.asyncAfter(deadline: .now() + .microseconds(200)) {
        self.drainScheduled.store(false, ordering: .releasing)
        self.applyPendingWrites()
      }
    }
  }
}
