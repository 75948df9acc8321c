/// Every scheduling decision of one queue, as a value type with no locks and no threads.
///
/// The engine keeps one `WorkScheduler` inside its lock and feeds it events: an item became ready, a worker
/// finished its item, a lingering worker woke up, an `async` or callback body ended, the queue was suspended,
/// resumed or resized, someone waits for the queue to drain. Each event returns what must happen next (items to
/// start, a step for the worker, waiters to wake), which the engine carries out after unlocking. The shape is
/// the one of swift-async-algorithms' state machines: decisions here, effects outside.
///
/// The rules it keeps (the model-based tests check them after every event):
/// - **Width.** `slots` (bodies running plus workers between items or lingering) never exceeds `width`
///   unless the width was lowered while they ran; then no new item starts until enough of them ended.
/// - **No hidden ready work.** Ready items live only here, in one queue per priority: there are no private
///   batches. Whenever an item is ready, a slot is free and no lingering worker can take it, the event
///   that made it so returns a start for it.
/// - **Priority.** Items start highest priority first, first in, first out within a priority: at width 1
///   in exactly that order, and at any width no item starts while a higher-priority one waits unstarted.
/// - **Suspension and batches.** While suspended (or while a batch is being added) nothing starts; workers
///   that finish an item give their slot back.
struct WorkScheduler<Item, Waiter> {
  /// What a worker that holds a slot does next.
  enum WorkerStep {
    /// Run this item, keeping the slot.
    case run(Item)
    /// Keep the slot for a moment and watch for ready work (``lingerEnded()`` when done).
    case linger
    /// Stop: the slot is free again.
    case exit
  }

  /// The largest number of slots in use at once.
  private(set) var width: Int
  /// Ready items by priority index (highest last).
  private var ready: [RingBuffer<Item>]
  /// Items in `ready`.
  private(set) var readyCount = 0
  /// Bit `p` is set when `ready[p]` may hold items (clear means empty; a pop that finds the ring empty clears it):
  /// the highest ready priority in one instruction, without visiting the empty rings through the array.
  private var nonEmpty: UInt64 = 0
  /// Slots in use: bodies running (synchronous, `async`, callback) and workers between two items or lingering.
  private(set) var slots = 0
  /// Workers that hold a slot with nothing to run, watching the ready count for a moment.
  private(set) var idle = 0
  /// Whether ``suspend()`` was called without a matching ``resume()``.
  private(set) var isSuspended = false
  /// Open batches (``hold()`` without ``release()``): nothing starts while there are any.
  private(set) var holds = 0
  /// Items added and not yet retired.
  private(set) var unfinished = 0
  /// Who waits for `unfinished` to reach 0.
  private(set) var waiters: [Waiter] = []

  init(width: Int, priorities: Int) {
    precondition(width >= 1 && priorities >= 1 && priorities <= UInt64.bitWidth)
    self.width = width
    self.ready = Array(repeating: RingBuffer(), count: priorities)
  }

  /// Whether starting is paused (suspended, or a batch is open).
  var isPaused: Bool { isSuspended || holds > 0 }

  // MARK: - Items

  /// An item was added: it counts as unfinished until ``retired()``.
  mutating func added() {
    unfinished += 1
  }

  /// `count` items were added at once (see ``added()``).
  mutating func added(_ count: Int) {
    unfinished += count
  }

  /// An item completed; returns whether it was the last unfinished one (then ``takeWaiters()`` has whom to wake).
  ///
  /// A flag, not the list: an empty array returned on every retirement was a release call on every item.
  mutating func retired() -> Bool {
    unfinished -= 1
    return unfinished == 0
  }

  /// Who waited for the queue to have no unfinished work; the list is left empty.
  mutating func takeWaiters() -> [Waiter] {
    defer { waiters = [] }
    return waiters
  }

  /// An item's dependencies are done: queues it and returns the items to start now, each with a slot taken.
  ///
  /// The fast path hands the item itself straight back when nothing else waits and a slot is free.
  mutating func makeReady(_ item: Item, priority: Int) -> SmallList<Item> {
    if readyCount == 0 && idle == 0 && slots < width && !isPaused {
      slots += 1
      return SmallList(item)
    }
    push(item, priority: priority)
    return takeStarts()
  }

  /// Queues a ready item without starting anything (the caller asks for starts once it queued them all).
  mutating func push(_ item: consuming Item, priority: Int) {
    ready[priority].append(consume item)
    readyCount += 1
    nonEmpty |= 1 << UInt64(priority)
  }

  /// Takes a slot for each ready item that no lingering worker will take, while slots are free.
  @inline(__always)
  mutating func takeStarts() -> SmallList<Item> {
    // Most calls (every retirement) find nothing to start: answered inline, without the loop's setup.
    guard readyCount > idle else { return SmallList() }
    return takeStartsSlow()
  }

  @inline(never)
  private mutating func takeStartsSlow() -> SmallList<Item> {
    var starts = SmallList<Item>()
    while !isPaused && slots < width && readyCount > idle, let item = popReady() {
      slots += 1
      starts.append(item)
    }
    return starts
  }

  /// The highest priority with a ready item, or -1 when none is ready.
  var highestReadyPriority: Int {
    guard readyCount > 0 else { return -1 }
    var bits = nonEmpty
    while bits != 0 {
      let priority = UInt64.bitWidth - 1 - bits.leadingZeroBitCount
      if !ready[priority].isEmpty { return priority }
      bits &= ~(1 << UInt64(priority))
    }
    return -1
  }

  /// Whether a worker whose item retires now runs a queued item next of priority `priority` or higher (it is not
  /// paused, and such an item is ready).
  func runsQueuedWorkNext(ofAtLeast priority: Int) -> Bool {
    !isPaused && slots <= width && highestReadyPriority >= priority
  }

  private mutating func popReady() -> Item? {
    guard readyCount > 0 else { return nil }
    while nonEmpty != 0 {
      let priority = UInt64.bitWidth - 1 - nonEmpty.leadingZeroBitCount
      if let item = ready[priority].popFirst() {
        readyCount -= 1
        return item
      }
      nonEmpty &= ~(1 << UInt64(priority))
    }
    return nil
  }

  /// Removes the first queued item of `priority` that matches; `true` if there was one. O(n) in that priority.
  mutating func removeReady(priority: Int, where matches: (Item) -> Bool) -> Bool {
    var found = false
    for item in ready[priority].removeAll() {
      if !found && matches(item) {
        found = true
        readyCount -= 1
      } else {
        ready[priority].append(item)
      }
    }
    return found
  }

  /// Removes every queued item (they were cancelled) and returns them.
  mutating func removeAllReady() -> [Item] {
    var all: [Item] = []
    for priority in ready.indices.reversed() { all += ready[priority].removeAll() }
    readyCount = 0
    nonEmpty = 0
    return all
  }

  // MARK: - Workers and slots

  /// A worker that holds a slot finished (or skipped) its item: the next item to run, or linger, or exit.
  mutating func workerDone(mayLinger: Bool) -> WorkerStep {
    if !isPaused && slots <= width {
      if let item = popReady() { return .run(item) }
      if mayLinger {
        idle += 1
        return .linger
      }
    }
    slots -= 1
    return .exit
  }

  /// A worker finished its item, which made the items in `readied` ready (in order): queues them, as
  /// ``push(_:priority:)`` would each, and returns the worker's next step, as ``workerDone(mayLinger:)`` would then.
  ///
  /// A lone item readied while nothing else is queued is the step's item at once, without the trip through the
  /// queue that would end in the same place: the step every item of a chain takes. `readied` is left empty.
  @inline(__always)
  mutating func workerDone(
    readying readied: inout SmallList<Item>,
    priority: (borrowing Item) -> Int,
    mayLinger: Bool
  ) -> WorkerStep {
    if readyCount == 0 && !isPaused && slots <= width, let lone = readied.popOnly() { return .run(lone) }
    return workerDone(queueing: &readied, priority: priority, mayLinger: mayLinger)
  }

  /// ``workerDone(readying:priority:mayLinger:)`` when the readied item cannot simply run next: none, several, or
  /// others queued.
  @inline(never)
  private mutating func workerDone(
    queueing readied: inout SmallList<Item>,
    priority: (borrowing Item) -> Int,
    mayLinger: Bool
  ) -> WorkerStep {
    readied.removeAll { (item: consuming Item) in
      let itemPriority = priority(item)
      push(item, priority: itemPriority)
    }
    return workerDone(mayLinger: mayLinger)
  }

  /// A lingering worker stopped watching (it saw ready work, a pause, or its time ran out).
  mutating func lingerEnded() -> WorkerStep {
    idle -= 1
    return workerDone(mayLinger: false)
  }

  /// An `async` or callback body that held a slot ended: the next item inherits the slot, or it is freed.
  mutating func detachedBodyEnded() -> Item? {
    if !isPaused && slots <= width, let item = popReady() { return item }
    slots -= 1
    return nil
  }

  // MARK: - Control

  mutating func suspend() {
    isSuspended = true
  }

  mutating func resume() -> SmallList<Item> {
    isSuspended = false
    return takeStarts()
  }

  /// Opens a batch: nothing starts until the matching ``release()``.
  mutating func hold() {
    holds += 1
  }

  mutating func release() -> SmallList<Item> {
    holds -= 1
    return takeStarts()
  }

  /// Changes the width. Raising it starts ready work at once; lowering it lets running bodies finish and
  /// starts nothing new until the slots in use are below the new width.
  mutating func setWidth(_ newWidth: Int) -> SmallList<Item> {
    precondition(newWidth >= 1)
    width = newWidth
    return takeStarts()
  }

  // MARK: - Waiters

  /// Registers a waiter for the queue to drain; `false` (not registered) when nothing is unfinished.
  mutating func addWaiter(_ waiter: Waiter) -> Bool {
    guard unfinished > 0 else { return false }
    waiters.append(waiter)
    return true
  }

  /// Removes the waiters that match (a waiter that gave up).
  mutating func removeWaiters(where shouldRemove: (Waiter) -> Bool) {
    waiters.removeAll(where: shouldRemove)
  }
}

extension SmallList {
  /// A list of one element.
  init(_ element: Element) {
    self.init()
    append(element)
  }
}
