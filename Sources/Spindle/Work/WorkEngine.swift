import Dispatch
import Synchronization

/// The core of a ``WorkQueue``: its scheduler, its workers and its unfinished items.
///
/// The engine (not the public `WorkQueue`) lives while it has unfinished work: it holds itself from the first item of
/// a burst to the retirement of the last (`EngineState.keepAlive`), and its items refer to it unretained. So a queue
/// handle can go away while its work runs, and a suspended queue whose last handle is gone can cancel what it still
/// holds.
///
/// Locking: `lockedState` (the scheduler, the registry of unfinished items) is one lock per queue, taken only
/// through ``withState(_:)``; each item has its own small lock (see ``AnyWork``). The engine never holds its lock
/// while taking an item's lock or running user code, except `register`/`unregister`, which only touch the registry
/// links. Adding to a busy queue (or while a worker lingers) takes no lock: the item goes on the lock-free `incoming`
/// list, which every critical section registers first (see ``withState(_:)`` for why no ready item can wait there
/// while a slot is free).
// @unchecked Sendable: `lockedState` is a lock box; `incoming` and the hints are atomics; the debug hooks are lock
// boxes; everything else is immutable.
final class WorkEngine: @unchecked Sendable {
  let name: String
  let qos: DispatchQoS.QoSClass
  let taskPriority: TaskPriority
  #if SPINDLE_MEASURE_WITHOUT_TRACE_HOOKS
    // Only for measuring what the recording hooks cost when recording is off (README, "Seeing your work"): the
    // compiler then removes every hook. Never set in a normal build.
    var trace: WorkTrace? { nil }
    private let requestedTrace: WorkTrace?
  #else
    let trace: WorkTrace?
  #endif

  private let lockedState: Locked<EngineState>
  /// ``threadWork``, copied once: reading the lazily initialized global costs a `swift_once` call per use.
  let workCell = threadWork
  /// Whether workers run on the main queue (``MainWorkQueue``): they never linger there.
  let runsOnMain: Bool

  /// Whether a slot is free and no lingering worker watches for work (not paused, fewer slots in use than the width,
  /// no worker lingering): an adding thread that sees one takes the lock so that its ready item starts. A lingering
  /// worker watches `incoming` and takes the lock as soon as it holds an item, so while one lingers, adding needs no
  /// lock. Stored sequentially consistent when it changes, and paired with `incoming` (see ``withState(_:)``).
  private let slotFreeHint = Atomic<Bool>(true)
  /// Whether the engine holds itself (it has unfinished work, `EngineState.keepAlive`): an adding thread that finds
  /// it false takes the lock, so that its item is registered and keeps the engine alive.
  private let aliveHint = Atomic<Bool>(false)
  /// Whether the queue has observers (events or progress); the hot path reads only this when it has none.
  let isObserved = Atomic<Bool>(false)
  /// Whether a barrier is pending: new items must follow it.
  let barrierHint = Atomic<Bool>(false)
  #if DEBUG
    /// Tests only (debug builds): called inside every critical section of ``withState(_:)``, after its body and
    /// before the hints are published, with the slots in use and the width; a test adds work from there to land in
    /// the narrowest window of the lock-free add.
    let criticalSectionHook = Locked<(@Sendable (_ slots: Int, _ width: Int) -> Void)?>(nil)
    /// Tests only (debug builds): whether a ready item added now would take the lock (the published hints say a
    /// slot is free, or the engine does not hold itself); inside ``criticalSectionHook``, what the last critical
    /// section published, since this one publishes after the hook.
    var readyAddTakesTheLockForTesting: Bool {
      slotFreeHint.load(ordering: .relaxed) || !aliveHint.load(ordering: .relaxed)
    }
    /// Tests only (debug builds): whether the incoming list may hold a ready item (``incomingReadyPriority``), which a
    /// worker's retirement reads instead of the list.
    var incomingMayHoldReadyForTesting: Bool { incomingReadyPriority.load(ordering: .relaxed) >= 0 }
    /// Tests only (debug builds): marks the ready flag as found set with nothing ready enough times that the next
    /// taking of the list clears it (and takes the list).
    func makeTheNextTakingClearTheReadyFlagForTesting() {
      lockedState.withLock { $0.readyFlagStaleTakings = Self.takingsBeforeClearingTheReadyFlag }
    }
    /// Tests only (debug builds): called while `admit` makes a new item known, right after the item is counted as
    /// resolved or put on `incoming` (whichever comes first): where an adding thread that is preempted leaves the
    /// widest window for other threads to act on the item.
    let admissionHook = Locked<(@Sendable () -> Void)?>(nil)
    /// Tests only (debug builds): called when a body of this queue begins a checked wait, before the check takes
    /// ``WorkEngine/waitChecks``; a test holds two bodies there to start their checks at the same instant.
    let waitCheckHook = Locked<(@Sendable () -> Void)?>(nil)
  #endif
  // Each group of fields below is written by other threads than the one before it, and 64 unused bytes apart from
  // it, so that they never share a line of memory: the adding thread reads the hints above at every `add`, the lock
  // holder writes the ready count at every item, and both sides write `incoming` and the hand-back list.
  private let padding0 = CacheLinePadding()
  /// Items added since the lock was last taken, newest first, linked through `registryPrevious`: admitted without
  /// the lock, registered (and queued, if ready) by the next thread that takes it (see ``withState(_:)``).
  private let incoming = Atomic<UnsafeMutableRawPointer?>(nil)
  private let padding1 = CacheLinePadding()
  /// A copy of the scheduler's ready count that lingering workers watch without taking the lock.
  let readyHint = Atomic<Int>(0)
  /// A copy of the scheduler's paused flag that lingering workers watch without taking the lock.
  let pausedHint = Atomic<Bool>(false)
  private let padding2 = CacheLinePadding()
  /// The hand-back list: finished items whose last reference a worker held, linked through `registryPrevious`,
  /// for the next thread that adds work to free (see ``handBack(_:into:)``).
  private let handedBack = Atomic<UnsafeMutableRawPointer?>(nil)
  /// How many items the hand-back list holds: workers add each batch after it joined the list, and the thread that
  /// frees the list subtracts what it freed, so the count is exact once both are done (for a moment it may be lower
  /// or higher than the list, never drifting).
  private let handedBackCount = Atomic<Int>(0)
  /// Whether a thread is freeing the hand-back list (see ``releaseHandedBack()``): one at a time.
  private let freeingHandedBack = Atomic<Bool>(false)
  /// Whether a stopping worker that found the freeing taken asks the freer to look at the list again (a freeing helper
  /// takes it once per request otherwise; see `releaseHandedBackOnStopping`).
  private let freeAgain = Atomic<Bool>(false)
  /// Whether a thread blocked in a wait for this queue's work frees the hand-back list when asked (``freeingHelper``):
  /// the workers read only this until the list is long enough to ask.
  private let hasFreeingHelper = Atomic<Bool>(false)
  /// Whether the workers asked the freeing helper to free the list and it has not begun yet: one wake-up per request.
  private let freeingRequested = Atomic<Bool>(false)
  private let padding3 = CacheLinePadding()
  /// Whether the hand-back list holds ``handBackAddBatch`` items or more: the next `add` frees it. Set by the worker
  /// whose flush reaches that count, cleared by the adding thread that frees the list. On a line of its own, which
  /// changes once per batch: the adding thread reads it at every `add`, and the list's own line (which the workers
  /// write at every flush) stays with the workers.
  private let addersShouldFree = Atomic<Bool>(false)
  private let padding3b = CacheLinePadding()
  /// The thread blocked in a wait for this queue's work that frees the hand-back list when the workers ask (see
  /// ``HelpingWait``): one at a time, the first to wait.
  private let freeingHelper = Locked<HelpingWait?>(nil)
  #if DEBUG
    /// Tests only (debug builds): how many items waiting threads freed for the workers (see ``HelpingWait``).
    let itemsFreedByWaitersForTesting = Atomic<Int>(0)
    /// Tests only (debug builds): how many finished items the hand-back list holds.
    var handedBackCountForTesting: Int { handedBackCount.load(ordering: .relaxed) }
    /// Tests only (debug builds): whether a thread blocked in a wait frees the hand-back list for the workers.
    var hasFreeingHelperForTesting: Bool { hasFreeingHelper.load(ordering: .relaxed) }
    /// Tests only (debug builds): marks the hand-back list as being freed by another thread (`true`: as if a freer
    /// were descheduled in the middle of its pass), or not.
    func setFreeingHandedBackForTesting(_ freeing: Bool) {
      freeingHandedBack.store(freeing, ordering: .sequentiallyConsistent)
    }
  #endif
  /// Whether `incoming` may hold an item that was ready when added, and of which priority at most: -1 (clear) when
  /// none, the highest priority (raw value) of those items otherwise. An adding thread raises it (when it finds it
  /// lower) after it put a ready item on the list; a critical section clears it only right before it takes the list,
  /// so whenever a ready item is on the list and its adder has passed this flag, the flag is at least its priority. A
  /// worker's retirement reads only this (see ``withStateOnRetirement(needsIncoming:readiesNothing:_:)``): while the
  /// queue gets work that waits for other work (a chain added live), the list's line stays with the adding thread, and
  /// while the queue holds ready work of that priority or higher, it is left for later (its items come after). Cleared only after
  /// ``takingsBeforeClearingTheReadyFlag`` takings in a row found it set and nothing ready
  /// (`EngineState.readyFlagStaleTakings`): a stream of ready items, or one that mixes ready and waiting work (a random
  /// graph), does not move the flag's line back and forth.
  private let incomingReadyPriority = Atomic<Int>(-1)
  /// How many takings of the list in a row must find ``incomingReadyPriority`` set and nothing ready before the next one
  /// clears it. Cleared after one such taking, the flag was set and cleared about 13,100 times while a random graph of
  /// 100,000 nodes was added live (it mixes ready and waiting items: each set by the adding thread and clear by the
  /// worker moves the flag's line); after eight, about 2,800 times. A chain added live clears it after its first
  /// few items either way.
  static let takingsBeforeClearingTheReadyFlag = 8
  private let padding4 = CacheLinePadding()

  init(name: String, width: Int, qos: DispatchQoS.QoSClass, trace: WorkTrace?, runsOnMain: Bool = false) {
    self.runsOnMain = runsOnMain
    self.name = name
    self.qos = qos
    #if SPINDLE_MEASURE_WITHOUT_TRACE_HOOKS
      self.requestedTrace = trace
    #else
      self.trace = trace
    #endif
    self.lockedState = Locked(
      EngineState(scheduler: WorkScheduler(width: width, priorities: WorkPriority.allCases.count)))
    switch qos {
    case .userInteractive, .userInitiated: taskPriority = .high
    case .utility: taskPriority = .utility
    case .background: taskPriority = .background
    default: taskPriority = .medium
    }
  }

  deinit {
    releaseHandedBack()
    // The streams of this queue's events and progress end with it: without this, a loop over one (a progress bar's
    // task, `makeProgress`'s) waited for ever once the queue was gone, and it and the stream's memory were never
    // freed (LeakSanitizer found the task). Their `onTermination` handlers find no engine (weak) and do nothing.
    // The handlers are user code's captures, let go of after the lock (they may hold another queue, whose deinit
    // takes that queue's lock).
    let (endings, handlers) = lockedState.withLock { $0.observers.takeEndings() }
    for end in endings { end() }
    _ = consume handlers
  }

  /// Copies the scheduler's ready count and paused flag for lingering workers. Call with the lock held.
  @inline(__always)
  private func publishHints(_ state: borrowing EngineState) {
    // Each stored only when it changed: a store takes the line away from the lingering workers that watch it.
    let ready = state.scheduler.readyCount
    if readyHint.load(ordering: .relaxed) != ready { readyHint.store(ready, ordering: .relaxed) }
    let paused = state.scheduler.isPaused
    if pausedHint.load(ordering: .relaxed) != paused { pausedHint.store(paused, ordering: .relaxed) }
    let slotFree =
      !state.scheduler.isPaused && state.scheduler.slots < state.scheduler.width && state.scheduler.idle == 0
    if slotFreeHint.load(ordering: .relaxed) != slotFree {
      slotFreeHint.store(slotFree, ordering: .sequentiallyConsistent)
    }
    let alive = state.keepAlive != nil
    if aliveHint.load(ordering: .relaxed) != alive { aliveHint.store(alive, ordering: .sequentiallyConsistent) }
  }

  /// Runs `body` with the engine's state locked, after registering the items added without the lock.
  ///
  /// Adding an item takes no lock when the queue is busy: the item goes on `incoming` (one compare-exchange), and
  /// the next thread that takes the lock (a worker finishing its item, most often) registers it, and queues it if
  /// it was ready, before anything else looks at the state. So every decision under the lock sees every item added
  /// before it, in the order added, and the scheduler's rules (no hidden ready work, global priority order) hold as
  /// if each add had taken the lock.
  ///
  /// An adding thread still takes the lock when its item needs it: when the item is ready and a slot is free with no
  /// worker lingering (to start it), or when the engine does not hold itself (to keep it alive). Those two
  /// conditions are published in `slotFreeHint` and `aliveHint`; the adder pushes, then reads them, and this method,
  /// after publishing them, reads `incoming` again (both sides sequentially consistent): so either the adder sees a
  /// free slot (or a dead engine) and takes the lock, or this thread sees the item and registers it now, starting it
  /// if a slot is free. While a worker lingers, the adder needs no lock: the lingering worker watches `incoming` and
  /// always ends its lingering in a critical section, and the one that ends the last lingering publishes the free
  /// slot and looks again.
  /// Items this method starts itself go to pool workers (an `async` body's worker starts its task).
  @inline(__always)
  func withState<Result>(_ body: (inout EngineState) throws -> Result) rethrows -> Result {
    var extra = SmallList<AnyWork>()
    let result = try lockedState.withLock { state in try critical(&state, &extra, body) }
    while let item = extra.popFirst() { startWorker(consume item) }
    return result
  }

  /// The critical section of ``withState(_:)``: takes `incoming`, runs `body`, publishes the hints and looks at
  /// `incoming` again; items it started go to `extra`, for the caller to hand to workers after unlocking.
  ///
  /// `takesListFirst` says whether to take `incoming` before `body` (always, but for a worker's retirement: see
  /// ``withStateOnRetirement(needsIncoming:readiesNothing:_:)``); `readsFlagWhileAlive`, whether the look after publishing the hints
  /// reads ``incomingReadyPriority`` before `incoming` while the engine holds itself (the retirement's section).
  @inline(__always)
  private func critical<Result>(
    _ state: inout EngineState,
    _ extra: inout SmallList<AnyWork>,
    takesListFirst: (borrowing EngineState) -> Bool = { _ in true },
    readsFlagWhileAlive: Bool = false,
    _ body: (inout EngineState) throws -> Result
  ) rethrows -> Result {
    var queued = takesListFirst(state) ? absorbIncoming(&state) : false
    let result = try body(&state)
    #if DEBUG
      if let hook = criticalSectionHook.withLock({ $0 }) { hook(state.scheduler.slots, state.scheduler.width) }
    #endif
    while true {
      if queued {
        var starts = state.scheduler.takeStarts()
        while let item = starts.popFirst() { extra.append(consume item) }
      }
      publishHints(state)
      if aliveHint.load(ordering: .relaxed) {
        guard slotFreeHint.load(ordering: .relaxed) else { break }
        if readsFlagWhileAlive && incomingReadyPriority.load(ordering: .sequentiallyConsistent) < 0 { break }
      }
      guard incoming.load(ordering: .sequentiallyConsistent) != nil else { break }
      queued = absorbIncoming(&state)
    }
    return result
  }

  /// ``withState(_:)`` for a worker's retirement of the item it ran: takes `incoming` only when it may hold a ready
  /// item, or when `needsIncoming` says the retirement needs it, as it must before it decides anything that the items
  /// on the list change.
  ///
  /// Every other critical section takes the list first. A worker that took it at each retirement took its line of
  /// memory from the adding thread once per item of a chain added live, and the adding thread took it back for its
  /// next item. What the items on the list can change, when none was ready when added: nothing of the scheduler's
  /// choice (only ready items are queued, and the flag says whether one may be there), but the count of unfinished
  /// work and the registry, and the dependents that this retirement makes ready need to be registered before they are
  /// queued. So the caller's `needsIncoming` asks for the list when a dependent it readies is not registered, when the
  /// retiring item is the last one counted (its retirement would wake those waiting for the queue to end, and let the
  /// engine go), and when a barrier is pending, items are held, or progress is observed.
  ///
  /// Ready items on the list (the flag says they may be there, and how high their priority may be) are left there too
  /// when the retirement makes nothing ready (`readiesNothing`) and the queue holds a ready item of at least that
  /// priority, which the worker then runs next: the items on the list came after it (a section that queues anything
  /// takes the list first, but for this one), so it is the one to start, highest priority first and first in first
  /// out within one. Taken at each retirement, the list moved between the adding thread and the workers once per
  /// item or two while independent items were added live; left alone, a worker takes it when the queue has run down,
  /// with everything added meanwhile. What this can delay: an item whose adder has pushed it and not yet raised the
  /// flag, for as long as that adder is descheduled between the two (its `add` has not returned), as a clear flag
  /// could before; now a lower flag lets retirements pass it too. The flag only goes up until a taking clears it
  /// (after ``takingsBeforeClearingTheReadyFlag`` in a row found nothing ready): after a higher item, retirements take
  /// the list as before until then.
  ///
  /// The look at the list after publishing the hints, which pairs with an adding thread that reads them after its
  /// push (see ``withState(_:)``), reads the flag instead while the engine holds itself: the items an adding thread
  /// needs the lock for then are ready ones, and their adders set the flag before they read the hints.
  @inline(__always)
  func withStateOnRetirement<Result>(
    needsIncoming: (borrowing EngineState) -> Bool,
    readiesNothing: Bool,
    _ body: (inout EngineState) throws -> Result
  ) rethrows -> Result {
    var extra = SmallList<AnyWork>()
    let result = try lockedState.withLock { state in
      try critical(
        &state, &extra,
        takesListFirst: { state in
          let flagged = incomingReadyPriority.load(ordering: .sequentiallyConsistent)
          if flagged >= 0 && !(readiesNothing && state.scheduler.runsQueuedWorkNext(ofAtLeast: flagged)) {
            return true
          }
          return needsIncoming(state)
        },
        readsFlagWhileAlive: true, body)
    }
    while let item = extra.popFirst() { startWorker(consume item) }
    return result
  }

  /// Registers the items on `incoming`, oldest first, and queues those that were ready when added; returns whether
  /// it queued any. Call with the lock held.
  @inline(__always)
  private func absorbIncoming(_ state: inout EngineState) -> Bool {
    let mayHoldReady = incomingReadyPriority.load(ordering: .relaxed) >= 0
    let clearing = mayHoldReady && state.readyFlagStaleTakings >= Self.takingsBeforeClearingTheReadyFlag
    if clearing {
      // Cleared, then the list taken (even when it looks empty): an item pushed before the exchange is taken with it,
      // and the adder of one pushed after it finds the flag clear and sets it.
      incomingReadyPriority.store(-1, ordering: .sequentiallyConsistent)
      state.readyFlagStaleTakings = 0
    } else if incoming.load(ordering: .relaxed) == nil {
      return false
    }
    guard let taken = incoming.exchange(nil, ordering: .sequentiallyConsistent) else { return false }
    let queued = absorb(taken, into: &state)
    // Set (and not cleared just now): one more taking in a row that found nothing ready, or the count starts again.
    if mayHoldReady && !clearing { state.readyFlagStaleTakings = queued ? 0 : state.readyFlagStaleTakings + 1 }
    return queued
  }

  /// Raises ``incomingReadyPriority`` to `priority` after a ready item of that priority went on `incoming`, unless it
  /// is that high already: read first, so that a stream of ready items writes the flag's line only when a worker
  /// cleared it (or a higher item came).
  @inline(__always)
  private func markIncomingMayHoldReady(priority: Int) {
    var current = incomingReadyPriority.load(ordering: .sequentiallyConsistent)
    while current < priority {
      let (exchanged, original) = incomingReadyPriority.compareExchange(
        expected: current, desired: priority, ordering: .sequentiallyConsistent)
      if exchanged { return }
      current = original
    }
  }

  /// Registers the items of a list taken from `incoming` (newest first) and queues those that were ready when added,
  /// oldest first; returns whether it queued any.
  ///
  /// One pass over the list when no barrier is pending and no one observes progress: each item is linked into the
  /// registry as the list gives it (newest first, so the list becomes a run of the registry in the order added, spliced
  /// in at its head), and the items are counted at once; only when one of them was ready does a second pass, oldest
  /// first through the links just made, queue the ready ones. A worker that takes a long list (a chain added live,
  /// which the worker's retirements leave on the list until one needs it) thus visits each item's memory once: with
  /// two passes, the second one found the first items of a long list gone from the cache again.
  @inline(never)
  private func absorb(_ taken: UnsafeMutableRawPointer, into state: inout EngineState) -> Bool {
    guard state.barriers.isEmpty, !state.observers.hasProgress else { return absorbInOrder(taken, into: &state) }
    let newest = Unmanaged<AnyWork>.fromOpaque(taken)
    var cursor: Unmanaged<AnyWork>? = newest
    var newer: Unmanaged<AnyWork>? = nil
    var oldest = newest
    var count = 0
    var anyReady = false
    while let node = cursor {
      cursor = node._withUnsafeGuaranteedRef { item in
        let older = item.registryPrevious  // the list's link
        item.registryPrevious = newer
        item.isRegistered = true
        if item.admittedReady { anyReady = true }
        // The list's reference to the older item moves into this item's link (no retain, no release).
        item.registryNext = older?.takeRetainedValue()
        return older
      }
      newer = node
      oldest = node
      count += 1
    }
    let formerHead = state.registryHead.take()
    formerHead?.registryPrevious = oldest
    oldest._withUnsafeGuaranteedRef { $0.registryNext = formerHead }
    state.registerRun(count, on: self)
    // The list's reference to the newest item moves into the registry's head.
    state.registryHead = newest.takeRetainedValue()
    guard anyReady else { return false }
    var next: Unmanaged<AnyWork>? = oldest
    while let node = next {
      next = node._withUnsafeGuaranteedRef { item in
        if item.admittedReady { state.scheduler.push(item, priority: item.priority.rawValue) }
        return node.toOpaque() == newest.toOpaque() ? nil : item.registryPrevious
      }
    }
    return true
  }

  /// ``absorb(_:into:)`` item by item, oldest first: while a barrier is pending (an item registered then may be held
  /// behind it, in the order registered) or progress is observed (each registration is reported).
  @inline(never)
  private func absorbInOrder(_ taken: UnsafeMutableRawPointer, into state: inout EngineState) -> Bool {
    // Newest first on the list: reversed, so that items register and queue in the order they were added.
    var oldestFirst: Unmanaged<AnyWork>? = nil
    var next: Unmanaged<AnyWork>? = Unmanaged.fromOpaque(taken)
    while let node = next {
      next = node._withUnsafeGuaranteedRef { item in
        let after = item.registryPrevious
        item.registryPrevious = oldestFirst
        return after
      }
      oldestFirst = node
    }
    var queued = false
    while let node = oldestFirst {
      // The list's reference moves into the registry (`register` consumes it): no retain, no release.
      let ready = node._withUnsafeGuaranteedRef { item in
        oldestFirst = item.registryPrevious.take()
        // Registered while a barrier is pending: the item was published after that barrier took what it waits for
        // (which took `incoming` first), so it comes after the barrier, whatever its adder saw (see `EngineState.held`).
        if !state.barriers.isEmpty && !item.isBarrier {
          state.hold(item, ready: item.admittedReady)
          return false
        }
        if item.admittedReady {
          state.scheduler.push(item, priority: item.priority.rawValue)
          return true
        }
        return false
      }
      queued = queued || ready
      state.register(node.takeRetainedValue(), on: self)
    }
    return queued
  }

  /// Whether items were added since the lock was last taken (lingering workers watch it with the ready count).
  @inline(__always)
  var hasIncoming: Bool { incoming.load(ordering: .relaxed) != nil }

  /// Puts a new item on `incoming` (see ``withState(_:)``); the list holds a reference to it.
  @inline(__always)
  private func pushIncoming(_ work: AnyWork, ready: Bool) {
    work.admittedReady = ready
    let node = Unmanaged.passRetained(work)
    Self.push(newest: node, oldest: node, onto: incoming)
  }

  /// Pushes the items from `newest` to `oldest` (already linked newest first through `registryPrevious`; one item
  /// when they are the same; the list takes their references) on a lock-free list of items linked that way
  /// (`incoming`, the hand-back list); the links are written before the compare-exchange that publishes them, which is
  /// sequentially consistent (as `incoming` needs; on x86-64 every compare-exchange is the same instruction).
  @inline(__always)
  private static func push(
    newest: Unmanaged<AnyWork>, oldest: Unmanaged<AnyWork>, onto list: borrowing Atomic<UnsafeMutableRawPointer?>
  ) {
    var head = list.load(ordering: .relaxed)
    while true {
      oldest._withUnsafeGuaranteedRef { $0.registryPrevious = head.map { Unmanaged<AnyWork>.fromOpaque($0) } }
      let (exchanged, original) = list.compareExchange(
        expected: head, desired: newest.toOpaque(), ordering: .sequentiallyConsistent)
      if exchanged { return }
      head = original
    }
  }

  // MARK: - Adding

  /// Puts a new item on `incoming` (the next critical section registers it) and wires it to its dependencies; it
  /// starts once they finished and a slot is free.
  ///
  /// A barrier (`followsBarrier`: it already follows the barrier before it) is on the engine's list of pending
  /// barriers before it is admitted, and never follows one added after it.
  func admit(_ work: AnyWork, first: AnyWork?, dependencies: [AnyWork], followsBarrier alreadyFollows: Bool = false) {
    emit(.added, for: work)
    var followsBarrier = alreadyFollows
    if !work.isBarrier && barrierHint.load(ordering: .relaxed) {
      // Follow the pending barrier: one more dependency, resolved when the barrier completes.
      followsBarrier = withState { state in
        // A barrier whose followers were already taken (it is retiring) is not followed: an item that followed it now
        // would be told after the retirement, once this thread's next item may already be queued. Unwired, the item
        // is registered in turn, held while the barrier is pending (`EngineState.held`), and queued in its order.
        guard let last = state.barriers.indices.last,
          !state.retiringBarriers.contains(ObjectIdentifier(state.barriers[last].barrier))
        else { return false }
        work.remaining.wrappingAdd(1, ordering: .relaxed)
        state.barriers[last].followers.append(work)
        return true
      }
    }
    // A barrier's follower is visible to the thread that completes the barrier, which may resolve it at any moment:
    // it takes the path below, which puts it on `incoming` before it resolves its own share. (Through
    // `admitUnwired`, a barrier completing between that method's resolution and its push made the follower ready
    // and started it before it was registered.)
    if !followsBarrier && first == nil && dependencies.isEmpty {
      admitUnwired(work)
      return
    }
    // Unretained: the caller holds the dependencies for the whole call. Bound as they were (`if let first`, `for
    // dependency in`), each was retained and released around its use, on a line of memory that the worker running
    // the dependency writes at the same time (`swiftc -emit-sil` shows the pair; on a live chain, every item).
    let firstUnretained = first.map { Unmanaged.passUnretained($0) }
    if !followsBarrier, let firstUnretained, dependencies.isEmpty,
      firstUnretained._withUnsafeGuaranteedRef({ $0.hasFinishedSuccessfully })
    {
      // The one dependency already finished (a chain whose worker keeps up with its adder): nothing to wire, and
      // the item is admitted as one without dependencies, without the lock when a worker is there to take it. Its
      // value is safe to read: this thread saw the dependency finished under the dependency's lock.
      work.remaining.wrappingSubtract(1, ordering: .relaxed)
      admitUnwired(work)
      return
    }
    // On `incoming` before it is wired: a dependency that completes makes it ready under the lock, which registers
    // whatever is on `incoming` first. Not registered here under a trylock, as it was: when the trylock won, the
    // worker that then wanted the lock slept on it and the adder's unlock had to wake it (a futex call each time);
    // pushed instead, a chain took 0.84x the time and the random DAG 0.77x (harness medians, interleaved runs).
    pushIncoming(work, ready: false)
    #if DEBUG
      if let hook = admissionHook.withLock({ $0 }) { hook() }
    #endif
    if !aliveHint.load(ordering: .sequentiallyConsistent) { withState { _ in } }
    if let first = firstUnretained, !wire(work, to: first) { return }
    for index in dependencies.indices where !wire(work, to: Unmanaged.passUnretained(dependencies[index])) { return }
    if case .waiting = work.dependencyResolved(on: self) { return }
    makeReady(work)
  }

  /// Admits work that waits for no dependency (any it had already finished) and follows no barrier: pending →
  /// ready, unless delayed, and onto `incoming`; the lock only if a slot is free and no worker lingers, or the engine
  /// does not hold itself. Nothing else can see the item before it is on `incoming` (a delay's timer starts after
  /// `admit` returns), so it can be resolved first, without its lock, and pushed as ready; but for a barrier, which
  /// the engine's list of pending barriers shows to other threads (the checks of waits read it) from before its
  /// admission.
  @inline(__always)
  private func admitUnwired(_ work: AnyWork) {
    let ready: Bool
    if work.isBarrier {
      if case .waiting = work.dependencyResolved(on: self) { ready = false } else { ready = true }
    } else {
      ready = work.dependencyResolvedUnpublished()
    }
    #if DEBUG
      if let hook = admissionHook.withLock({ $0 }) { hook() }
    #endif
    pushIncoming(work, ready: ready)
    if ready { markIncomingMayHoldReady(priority: work.priority.rawValue) }
    // Paired with the re-read of `incoming` in `withState` (and of the flag in `withStateOnRetirement`; see there).
    let needsLock =
      (ready && slotFreeHint.load(ordering: .sequentiallyConsistent))
      || !aliveHint.load(ordering: .sequentiallyConsistent)
    if needsLock {
      let starts = withState { $0.scheduler.takeStarts() }
      start(consume starts)
    }
  }

  /// Makes `work` a dependent of `dependency`, or counts the dependency as resolved if it already ended; returns
  /// false if it ended in a way that ends `work` too (failed or cancelled, for work that does not accept that),
  /// which is then retired without running.
  private func wire(_ work: AnyWork, to dependency: Unmanaged<AnyWork>) -> Bool {
    guard let termination = dependency._withUnsafeGuaranteedRef({ $0.addDependent(work) }) else { return true }
    if termination.isSuccess || work.acceptsFailedDependencies {
      work.remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing)
    } else if let completed = work.completeWithoutRunning(termination) {
      retire(work, completed: completed)
      return false
    }
    return true
  }

  /// Queues `item` (ready) and starts whatever the scheduler says.
  func makeReady(_ item: AnyWork) {
    let starts = withState { state in
      if !state.held.isEmpty && state.holdReady(item) { return SmallList<AnyWork>() }
      return state.scheduler.makeReady(item, priority: item.priority.rawValue)
    }
    start(consume starts)
  }

  // MARK: - Handing finished items back

  /// How many items the hand-back list holds before the worker that brings it there frees it itself: a bound on the
  /// memory the list holds while nobody adds work (a worker's own batch adds fewer than ``handBackBatchSize``).
  static let handBackLimit = 128

  /// Hands the last reference to a finished item back to the thread that adds the next one, which frees it, if the
  /// caller's reference is the only one (`item` is then emptied).
  ///
  /// Why: glibc's `malloc` gives each thread its own arena, and a block freed by another thread goes back to its
  /// own arena under that arena's lock. An item allocated by the adding thread and freed by a worker takes the
  /// lock that the adding thread's next `malloc` needs: on a chain, `perf` showed the two threads sleeping and
  /// waking each other on that lock for about 15 % of the run. Freed by the adding thread instead, the block goes
  /// to that thread's cache and the next item's `malloc` reuses it without a lock.
  ///
  /// Only items whose deinit frees memory and nothing else are handed back (``AnyWork/freesOnlyMemory``, no extras
  /// at the moment of the hand-back, and finished successfully: no error to release), so no user-visible deinit is
  /// delayed: a body's captures are released when it ends, as before, and a value with a deinit, an observer or a
  /// group's members are never in such an item. A worker gathers what it hands back in its own `batch`, which joins
  /// the list ``handBackBatchSize`` items at a time, and whenever the worker is about to run a body with nothing else
  /// queued, lingers or stops (see ``flushHandBack(_:)``); the list is freed by the first `add` on this queue that
  /// finds ``handBackAddBatch`` items on it, by a thread blocked in a wait for this queue's work when a worker asks it
  /// (``HelpingWait``), by the worker that brings it to ``handBackLimit`` items, and when a worker stops. So at most
  /// ``handBackLimitWithHelper`` finished items (a few hundred kilobytes) wait there, all of them plain memory, while the
  /// freers keep up, and never more than ``handBackHardLimit`` (a freer descheduled in the middle of its pass).
  ///
  /// Call only for finished work that its queue has retired (it has left the registry, whose back link the list
  /// reuses). Leaves `item` as it was when the work cannot be handed back (its reference is then released with the
  /// caller's variable); main-queue workers never hand back, since they do not linger to free the list.
  @inline(__always)
  func handBack(_ item: inout AnyWork?, into batch: inout HandBackBatch) {
    guard !runsOnMain, isKnownUniquelyReferenced(&item) else { return }
    // The reference moves out of `item` (put back below if the item cannot go): no retain here, no release when the
    // caller's variable dies. Binding it to a constant to look at it was a retain and a release per item.
    let node = Unmanaged.passRetained(item.take().unsafelyUnwrapped)
    // Extras can be added after the work was created (an observer, a group's members, a cancel reason): checked
    // now, under the item's lock, which orders this read after every thread that wrote them (none can any more:
    // this is the only reference).
    guard node._withUnsafeGuaranteedRef({ work in work.lock.withLock { work.extras == nil } }) else {
      item = node.takeRetainedValue()
      return
    }
    node._withUnsafeGuaranteedRef { $0.registryPrevious = batch.newest }
    if batch.oldest == nil { batch.oldest = node }
    batch.newest = node
    batch.count += 1
    if batch.count >= Self.handBackBatchSize { flushHandBack(&batch) }
  }

  /// How many items a worker gathers before it puts them on the hand-back list: one compare-exchange (and one count
  /// update) for them all, on a line of memory that the adding thread reads at every `add`, and a few blocks for the
  /// adding thread to free at a time, which its `malloc`'s per-thread cache (7 blocks of a size) takes in full. One at
  /// a time, as before, 100,000 independent items took 1.09-1.15x the time (harness medians, interleaved runs).
  static let handBackBatchSize = 4

  /// Puts the worker's gathered items on the hand-back list (an `add` frees them once they are ``handBackAddBatch``, and
  /// the flush that reaches that count tells the adding threads so), or frees the list itself once
  /// it holds ``handBackLimit`` items; while a thread blocked in a wait for this queue's work offers to free it (see
  /// ``HelpingWait``), asks that thread instead, at ``handBackHelperBatch`` items, and frees the list itself only at
  /// ``handBackLimitWithHelper``.
  func flushHandBack(_ batch: inout HandBackBatch) {
    guard let newest = batch.newest, let oldest = batch.oldest else { return }
    Self.push(newest: newest, oldest: oldest, onto: handedBack)
    let count = batch.count
    batch = HandBackBatch()
    let total = handedBackCount.wrappingAdd(count, ordering: .relaxed).newValue
    // Sequentially consistent (a plain load on x86-64), after the push: paired with the adding thread's clearing store
    // before its look at the list (see `releaseHandedBackForAdding`), so that either this worker sees the flag clear
    // and sets it, or that thread sees this batch and frees it.
    if total >= Self.handBackAddBatch && !addersShouldFree.load(ordering: .sequentiallyConsistent) {
      addersShouldFree.store(true, ordering: .relaxed)
    }
    guard total >= Self.handBackLimit else { return }
    if hasFreeingHelper.load(ordering: .relaxed) && total < Self.handBackLimitWithHelper {
      if total >= Self.handBackHelperBatch { askFreeingHelper() }
      return
    }
    releaseHandedBack()
    if total >= Self.handBackHardLimit { releaseHandedBackBesideAnotherFreer() }
  }

  /// Takes the hand-back list and frees it on this thread, whether or not another thread is freeing (see
  /// ``handBackHardLimit``): each taking is a list of its own, so two freers never meet on an item.
  @inline(never)
  private func releaseHandedBackBesideAnotherFreer() {
    guard let taken = handedBack.exchange(nil, ordering: .acquiring) else { return }
    let freed = Self.free(Unmanaged<AnyWork>.fromOpaque(taken))
    handedBackCount.wrappingSubtract(freed, ordering: .relaxed)
  }

  /// Releases the items of a list taken from the hand-back list (linked through `registryPrevious`); returns how many.
  @inline(__always)
  private static func free(_ list: Unmanaged<AnyWork>?) -> Int {
    var next = list
    var freed = 0
    while let node = next {
      next = node._withUnsafeGuaranteedRef { $0.registryPrevious.take() }
      node.release()
      freed += 1
    }
    return freed
  }

  /// How many items the hand-back list holds before a worker asks the thread that offered to free it (see
  /// ``HelpingWait``): each request wakes that thread (a system call when it sleeps), so one per 512 items.
  static let handBackHelperBatch = 512

  /// How many items the hand-back list holds before a worker frees it itself although a waiting thread offered to: that
  /// thread may be slow to wake (preempted, or busy freeing the last batch), and the list's memory stays bounded.
  static let handBackLimitWithHelper = 2048

  /// How many items the hand-back list holds (with those a freer took and has not freed yet) before the worker that
  /// brings it there frees it although another thread is freeing: that thread may be descheduled in the middle of its
  /// pass, and while it held the freeing, the list grew with every item the workers finished (4,999 of 5,000 in a
  /// test run). Twice the limit with a helper, so that a freer that is merely slow is left to finish alone.
  static let handBackHardLimit = 2 * handBackLimitWithHelper

  /// Wakes the freeing helper, unless a request is already pending.
  @inline(never)
  private func askFreeingHelper() {
    // After the push, and paired with the helper's clearing store before its look at the list (see `freeForWorkers`).
    guard !freeingRequested.exchange(true, ordering: .sequentiallyConsistent) else { return }
    freeingHelper.withLock { $0?.requestFreeing() }
  }

  /// Offers the calling thread, about to block in `helper`, as the thread that frees the hand-back list while it waits;
  /// returns whether it was taken (one helper at a time; never on the main queue, whose workers hand nothing back).
  func offerFreeing(_ helper: HelpingWait) -> Bool {
    guard !runsOnMain else { return false }
    return freeingHelper.withLock { current in
      guard current == nil else { return false }
      current = helper
      freeingRequested.store(false, ordering: .relaxed)
      hasFreeingHelper.store(true, ordering: .relaxed)
      return true
    }
  }

  /// Ends the offer of ``offerFreeing(_:)``; the workers free the list themselves again.
  func withdrawFreeing(_ helper: HelpingWait) {
    freeingHelper.withLock { current in
      guard current === helper else { return }
      current = nil
      hasFreeingHelper.store(false, ordering: .relaxed)
    }
  }

  /// Frees the hand-back list for the workers, on the thread of the freeing helper they woke.
  func freeForWorkers() {
    // Cleared before the look at the list, both sequentially consistent: a worker whose request this clearing swallows
    // pushed its batch before it, so the look below sees the batch (a clearing store left in the processor's store
    // buffer past that look could lose both the batch and the next request; found in review).
    freeingRequested.store(false, ordering: .sequentiallyConsistent)
    // One pass: a thread that frees while workers keep handing back would otherwise free on after its wait ended; what
    // comes meanwhile brings the next request.
    let freed = releaseHandedBack(passes: 1)
    #if DEBUG
      itemsFreedByWaitersForTesting.wrappingAdd(freed, ordering: .relaxed)
    #else
      _ = freed
    #endif
  }

  /// For a worker that stops: frees the items workers handed back, if there are any (one relaxed load when there are
  /// none). A thread that is freeing them already looks at the list again for it: a freeing helper takes the list once
  /// per request (see `freeForWorkers`), so without that request a stopping worker that left the list to it could leave
  /// items there with nobody to free them until the next `add`.
  func releaseHandedBackOnStopping() {
    guard handedBack.load(ordering: .relaxed) != nil else { return }
    // Asked before the look (both sequentially consistent, as the freer's clearing of its flag and its look at this
    // request): either this thread takes the freeing, or the freer sees the request and takes the list again. Waiting
    // for the freer instead kept the stopping worker's thread busy, and the pool made new threads meanwhile (the thread
    // bound test of callback bodies failed about once in ten runs).
    freeAgain.store(true, ordering: .sequentiallyConsistent)
    releaseHandedBack()
  }

  /// For the adding thread, before it allocates an item: frees the items workers handed back once they are
  /// ``handBackAddBatch`` or more (one relaxed load of a line that rarely changes otherwise).
  @inline(__always)
  func releaseHandedBackForAdding() {
    guard addersShouldFree.load(ordering: .relaxed) else { return }
    // Cleared before the look at the list, sequentially consistent, as the worker's look at the flag after its push (see
    // `flushHandBack`).
    addersShouldFree.store(false, ordering: .sequentiallyConsistent)
    releaseHandedBack()
  }

  /// How many items the hand-back list holds before the next `add` frees it: half the workers' own limit
  /// (``handBackLimit``), so that an adding thread that keeps up frees nearly all of them. Freed at every `add` that
  /// found the list not empty, as before, the adding thread read the list's line at every item and took it from the
  /// workers every few: a chain of 100,000 added live took 1.2–1.5x the time (interleaved runs of session 34).
  static let handBackAddBatch = 64

  /// Takes the whole hand-back list and frees its items on this thread, unless another thread is freeing it already.
  ///
  /// One thread frees at a time: the blocks go back to the adding thread's `malloc` arena under that arena's lock, and
  /// two workers freeing at once (the tail of a burst of independent items, once the adding thread waits) woke and
  /// put each other to sleep on that lock: 110,000 `futex` calls for 500,000 items, against 42,000 with one freer
  /// (`perf stat`). A thread that finds the list being freed leaves it: the freer looks at the list again after it let
  /// go of the flag (both sides sequentially consistent, so either it sees the new items or their pusher sees the flag
  /// down), so nothing is left on the list by this rule that a later look would not free.
  ///
  /// The count goes down by the number freed, not to zero: a worker adds its batch to the count just after the batch
  /// joined the list, so a reset could land between the two and leave the count a batch above (or below) what the
  /// list holds, drifting further at each such race.
  /// `passes` bounds how many times it takes the list (a freeing helper takes it once; see `freeForWorkers`); returns
  /// how many items it freed.
  @discardableResult
  func releaseHandedBack(passes: Int = .max) -> Int {
    var total = 0
    var passesLeft = passes
    while handedBack.load(ordering: .sequentiallyConsistent) != nil {
      if passesLeft > 0 {
        passesLeft -= 1
      } else if !freeAgain.exchange(false, ordering: .sequentiallyConsistent) {
        break  // no stopping worker left the list to this thread (see `releaseHandedBackOnStopping`)
      }
      guard !freeingHandedBack.exchange(true, ordering: .sequentiallyConsistent) else { return total }
      let freed = Self.free(handedBack.exchange(nil, ordering: .acquiring).map { Unmanaged<AnyWork>.fromOpaque($0) })
      if freed > 0 { handedBackCount.wrappingSubtract(freed, ordering: .relaxed) }
      total += freed
      freeingHandedBack.store(false, ordering: .sequentiallyConsistent)
    }
    return total
  }

  // MARK: - Control

  func suspend() {
    withState { state in
      state.scheduler.suspend()
    }
  }

  func resume() {
    let starts = withState { $0.scheduler.resume() }
    start(consume starts)
  }

  func setWidth(_ width: Int) {
    let starts = withState { $0.scheduler.setWidth(width) }
    start(consume starts)
  }

  /// Cancels every unfinished item: queued ones complete as cancelled, running ones are asked to stop.
  ///
  /// Newest first: cancelling an item can make later ones ready (a barrier that waits for it, the barrier's followers
  /// and the items held behind it, work that takes its result), and in the order of registration they started (a
  /// barrier's body ran) before the loop reached them. An item is never made ready by cancelling a later one: what it
  /// waits for was registered before it.
  func cancelAll() {
    // The ready items taken out are let go of after the lock: one cancelled earlier (retired, dropped by its caller)
    // may have only this reference left, and its deinit runs user code (its handlers' captures).
    let (items, removed): ([AnyWork], [AnyWork]) = withState { state in
      let removed = state.scheduler.removeAllReady()
      return (state.unfinishedItems(), removed)
    }
    _ = consume removed
    for item in items.reversed() { item.cancel() }
  }

  // MARK: - Waiting

  /// Blocks until nothing is unfinished.
  func waitUntilAllFinished() {
    let wait = HelpingWait()
    let registered = withState { $0.scheduler.addWaiter(.blocked(wait)) }
    if registered { wait.wait(freeingFor: self) }
  }

  /// Waits until nothing is unfinished; throws `CancellationError` as soon as the awaiting task is cancelled.
  func allFinished() async throws {
    let waiter = OneShotContinuation<Void>()
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        waiter.arm(continuation)
        let registered = withState { $0.scheduler.addWaiter(.continuation(waiter)) }
        if !registered { waiter.resume(with: .success(())) }
      }
    } onCancel: {
      if waiter.resume(with: .failure(CancellationError())) {
        withState { state in
          state.scheduler.removeWaiters { if case .continuation(let other) = $0 { other === waiter } else { false } }
        }
      }
    }
  }

  /// Whether a wait by code that `WorkContext.currentWork` says runs for `current` holds up the completion of
  /// `current`: the wait of its body itself (a synchronous or callback body on its worker's thread, an `async` body's
  /// own task: ``AnyWork/isBodyTask``). Not a task that a body started, which can outlive the work
  /// (`WorkContext.currentWork` still names it) or wait while a callback's `finish` comes from elsewhere: work that is
  /// behind `current` then completes all the same, and the wait returns. Nor a child task of an `async` body (`async
  /// let`, a task group), whose waits do hold the body up: such waits are not checked (a miss, never a false refusal).
  static func waitHoldsUp(_ current: AnyWork) -> Bool {
    (current.isAsync ? current.isBodyTask : threadWork.value == Unmanaged.passUnretained(current).toOpaque())
      && !current.lock.withLock { current.phase.isFinal }
  }

  /// The work whose body the calling code is, when a wait from here holds that work up (``waitHoldsUp(_:)``): the
  /// waits that ``recordWait(of:for:)`` records and ``checkWait(of:for:_:keeping:)`` checks. `nil` for any other caller,
  /// whose wait needs no check (the work it waits for completes without it).
  static func holdingWaiter() -> AnyWork? {
    guard let current = WorkContext.currentWork, waitHoldsUp(current) else { return nil }
    return current
  }

  /// Held by each check of a body's wait, from recording the wait to marking it checked (or ending it when refused), so
  /// that the checks of the process run one at a time. It is taken only there, by a body that holds no other lock,
  /// and the check under it takes the locks of items, queues, ``BodyWaits`` and the exclusivity registry, never this
  /// one: it is the outermost lock, and cannot take part in a cycle. Checks are rare (a blocking wait by a body) and
  /// short (a walk back from the awaited work), and plain work never takes it. A bare mutex, alive for the process:
  /// there is no state under it, only the checks' order.
  static let waitChecks = PlatformMutex()

  /// Checks, under ``waitChecks``, that the body of `current` (``holdingWaiter()``) may wait for `engine`'s queue to
  /// have nothing unfinished, and records that wait in ``BodyWaits`` for later checks: returns the record (to end once
  /// the wait is over), or the queue's work that can only complete after `current`'s (``AnyWork/firstBehind(on:keeping:)``)
  /// when the wait could never end.
  static func beginQueueWait(of current: AnyWork, for engine: WorkEngine) -> (
    record: QueueWaitRecord?, behind: AnyWork?
  ) {
    var keep: [AnyObject] = []
    let result: (QueueWaitRecord?, AnyWork?) = waitChecks.withLock {
      if let behind = current.firstBehind(on: engine, keeping: &keep) { return (nil, behind) }
      BodyWaits.shared.beginQueueWait(current, for: engine)
      return (QueueWaitRecord(waiter: current, engine: engine), nil)
    }
    _ = consume keep
    return result
  }

  /// Records in ``BodyWaits`` that `waiter`'s body (``holdingWaiter()``) waits for `work`; returns the record, to end
  /// (``BodyWaitRecord/end()``) as soon as the wait is over. Call once ``checkWait(of:for:_:keeping:)`` passed, under
  /// ``waitChecks``.
  static func recordWait(of waiter: AnyWork, for work: AnyWork) -> BodyWaitRecord? {
    guard waiter !== work else { return nil }
    BodyWaits.shared.begin(waiter, for: work)
    return BodyWaitRecord(waiter: waiter, target: work)
  }

  /// Checks that the body of `current` (``holdingWaiter()``) may block waiting for `work`, and counts the wait in the
  /// blocked-wait count of `work`'s engine (through `blocked`, whose `end()` the work's completion calls); throws when
  /// the wait could never end.
  ///
  /// Every object the check takes a reference to goes to `keep`, for the caller to let go of once it no longer holds
  /// ``waitChecks``: the check may hold the last reference to work that completed meanwhile (and everything else let
  /// go of), whose value's deinit, user code, must not run under that lock (another body's check would wait for it).
  static func checkWait(
    of current: AnyWork, for work: AnyWork, _ blocked: BlockedWait, keeping keep: inout [AnyObject]
  ) throws(WorkDeadlockError) {
    func deadlock(_ reason: String, _ queue: String) -> WorkDeadlockError {
      WorkDeadlockError(work: work.name, waiter: current.name, queue: queue, reason: reason)
    }
    if current === work {
      throw deadlock("a body cannot wait for its own work", work.queueName)
    }
    let (key, started, done, retries, queueName): (String?, Bool, Bool, Bool, String) = work.lock.withLock {
      let options = work.extras?.options
      return (options?.exclusive, work.phase.isStarted, work.phase.isFinal, options?.retry != nil, work.queueNameLocked)
    }
    // While the key is held here, unfinished work with that key is not running (exclusive work is made running only
    // once it holds its key) and cannot run before the caller ends.
    if !done, let key, ExclusivityRegistry.shared.isHeld(key, by: current) {
      throw deadlock("the body holds the exclusivity key '\(key)' that the work needs", queueName)
    }
    // Work that can complete only after this body's work, on any queue (it depends on it, and so on).
    if !done, let path = work.mustWait(for: current, keeping: &keep) {
      if path == .waits {
        throw deadlock(
          "bodies would wait for each other: the work waits, directly or through other waits, for this body's work",
          queueName)
      }
      if path == .slots, let engine = work.currentEngine, engine === current.currentEngine {
        throw deadlock(Self.slotsReason(width: engine.withState { $0.scheduler.width }), engine.name)
      }
      throw deadlock(
        "the work can only complete after this body ends: it is behind this body's work through " + path.description,
        queueName)
    }
    guard let engine = work.currentEngine, engine === current.currentEngine else { return }
    keep.append(engine)  // let go of after the checks' lock (its queue may be gone: this can be its last reference)
    if started && done { return }
    // Whether the work still needs a slot: unstarted work does, and so does started work that can give its slot back
    // and need one again (another attempt, a retry). (Exclusive work runs only with its key, which it keeps until it
    // completes: once started, it parks no more.)
    let needsSlot = !started || retries
    // Every wait of a body for work of its own queue counts, also a wait for running work: the waiting body's slot is
    // blocked either way, and the running work may itself come to wait (A waits for running B, B for unstarted C: both
    // slots of a width-2 queue blocked, and C never runs). A wait that would leave no slot unblocked is refused: every
    // body of the queue would be waiting for work of the queue, which is unstarted (needs a slot) or is one of them.
    let entry = BlockedWaits.Entry(
      wait: ObjectIdentifier(blocked), waiter: current, target: work, needsSlot: needsSlot)
    // Work that needed a slot when a wait for it began may have started since: it needs none any more (unless it is
    // retried), for good. Asked outside the engine's lock (an item's lock is never taken inside it), and marked below:
    // without it, a body waiting for such work counted as stuck (a later wait was refused after the width was lowered,
    // though every body would have ended).
    let mayHaveStarted = engine.withState { $0.blockedWaits.targetsNeedingASlot() }
    keep.append(contentsOf: mayHaveStarted as [AnyObject])
    let startedSince = mayHaveStarted.filter { target in
      target.lock.withLock { target.phase.isStarted && target.extras?.options.retry == nil }
    }
    // (Cycles of waits were refused above, by the walk: waits that hold up their work, on any queue.)
    let refusedWidth: Int? = engine.withState { state in
      let width = state.scheduler.width
      // Work that completed since it was looked at above needs no slot; such a wait is never counted (its completion
      // saw nothing to uncount).
      guard !blocked.hasEnded else { return nil }
      state.blockedWaits.markStarted(startedSince)
      if state.blockedWaits.stuckCount(adding: entry) >= width { return width }
      if blocked.count(on: engine) { state.blockedWaits.entries.append(entry) }
      return nil
    }
    if let refusedWidth {
      throw deadlock(slotsReason(width: refusedWidth), engine.name)
    }
  }

  /// Why a body's wait for unstarted work of its own queue is refused, when every slot would be blocked.
  private static func slotsReason(width: Int) -> String {
    width == 1
      ? "the queue is serial, and the work cannot start before this body ends"
      : "all \(width) slots of the queue would be blocked by bodies waiting for work of the queue that"
        + " still needs a slot to run"
  }

  func endBlockedWait(_ wait: BlockedWait) {
    let id = ObjectIdentifier(wait)
    // The entry (which holds the awaited work) is let go of after the lock.
    let removed: BlockedWaits.Entry? = withState { state in
      guard let index = state.blockedWaits.entries.firstIndex(where: { $0.wait == id }) else { return nil }
      return state.blockedWaits.entries.remove(at: index)
    }
    _ = consume removed
  }
}

extension AnyWork {
  /// How this work can complete only after `other` completes — which `other` cannot while its body waits for this
  /// work — or `nil` when nothing says so: this work depends on `other`, or follows a barrier that waits for `other`,
  /// or needs an exclusivity key `other` holds, or runs a body that waits (`Work.wait()`) for `other` — or any of
  /// these holds for work this work waits for, and so on.
  ///
  /// Walks back from this work along what it waits for, on any queue (its unfinished dependencies, the barrier it
  /// follows, the holder of the key it needs, the work its body waits for), so its cost grows with what this work
  /// still waits for, not with the graph: work that is running and not waiting ends the walk. Each item's lock is
  /// taken alone; each queue's barriers are read once, under its lock; a key's holder under the exclusivity
  /// registry's lock, the waits of bodies under that of ``BodyWaits``. Nothing on a path to `other` completes while
  /// `other`'s body is in the check (except by a cancel), so the paths the walk finds stay true.
  ///
  /// Unstarted work also needs a slot of its queue: when the body in every slot of that queue waits for work that must
  /// wait for `other` (or is `other`'s), it can never start (``slotsAreHeld(on:behind:evaluating:keeping:)``). `evaluating`
  /// holds the queues whose slots are being looked at by the walks that led here: unstarted work of such a queue counts
  /// as behind `other`. That is the assumption under test (the greatest fixpoint): it is kept only when at least the
  /// queue's width of its bodies wait behind `other` under it, and those bodies then wait only for `other`, for each
  /// other, or for the slots they hold themselves, so none of them ever ends. (Counting such a queue as having a slot
  /// that frees missed the simplest case: both slots of E wait for X on F, which waits for work unstarted on E.)
  ///
  /// Each work and engine the walk meets goes to `keep` (see ``WorkEngine/checkWait(of:for:_:keeping:)``).
  final func mustWait(
    for other: AnyWork, evaluating: Set<ObjectIdentifier> = [], keeping keep: inout [AnyObject]
  ) -> WorkPath? {
    /// Per queue met on the way (held alive meanwhile): the pending barrier each of its followers waits for, and
    /// whether its slots are all held by bodies behind `other` (looked at once, when unstarted work of it is met).
    var queues: [ObjectIdentifier: (engine: WorkEngine, barrierOf: [ObjectIdentifier: AnyWork], held: Bool?)] = [:]
    let otherEngine = other.currentEngine
    if let otherEngine { keep.append(otherEngine) }
    var seen: Set<ObjectIdentifier> = [ObjectIdentifier(self)]
    var next: [(AnyWork, WorkPath)] = [(self, [])]
    var found: [(AnyWork, WorkPath)] = []
    while let (item, path) = next.popLast() {
      found.removeAll(keepingCapacity: true)
      // What `found` took is let go of after the checks' lock, whichever way this step ends (its references can be the
      // last ones: another thread may drop the work meanwhile).
      defer { keep.append(contentsOf: found.map(\.0)) }
      let (engine, key, unstarted): (WorkEngine?, String?, Bool) = item.lock.withLock {
        guard !item.phase.isFinal else { return (nil, nil, false) }
        let unstarted = !item.phase.isStarted
        if unstarted {
          for dependency in item.dependencyArrayLocked() { found.append((dependency, .dependency)) }
        }
        let key = item.extras.flatMap { $0.holdsKey ? nil : $0.options.exclusive }
        return (item.engine?.takeUnretainedValue(), key, unstarted)
      }
      if let key, let holder = ExclusivityRegistry.shared.holder(of: key), holder !== item {
        found.append((holder, .key))
      }
      // What the item's body waits for holds it up, unless its timeout ends the wait (see `waitEndsAtItsDeadline`).
      if !item.waitEndsAtItsDeadline {
        BodyWaits.shared.forEachTarget(of: item) { found.append(($0, .waits)) }
        // A body that waits for `other`'s queue to have nothing unfinished waits for `other` (running: unfinished).
        if let otherEngine, BodyWaits.shared.waitsForQueue(item, otherEngine) { return path.union(.waits) }
      }
      if let engine {
        let id = ObjectIdentifier(engine)
        if queues[id] == nil {
          let barrierOf = engine.withState { $0.pendingBarrierOfEachWaitingItem() }
          queues[id] = (engine, barrierOf, nil)
          keep.append(engine)
          for barrier in barrierOf.values { keep.append(barrier) }
        }
        if let barrier = queues[id]?.barrierOf[ObjectIdentifier(item)] { found.append((barrier, .barrier)) }
        // A queue met again while its slots are looked at counts as held: that is what is being checked, and it holds
        // only if at least the queue's width of bodies wait behind `other` under it (see `slotsAreHeld`).
        if unstarted && evaluating.contains(id) { return path.union(.slots) }
        if unstarted {
          let held: Bool
          if let known = queues[id]?.held {
            held = known
          } else {
            held = Self.slotsAreHeld(on: engine, behind: other, evaluating: evaluating.union([id]), keeping: &keep)
            queues[id]?.held = held
          }
          // Still unstarted after the slots were looked at, so it was while they were: a slot that freed meanwhile
          // could have started it (and a body counted as behind `other` might have been waiting for it).
          if held && !item.lock.withLock({ item.phase.isStarted }) { return path.union(.slots) }
        }
      }
      for (work, link) in found {
        if work === other { return path.union(link) }
        if seen.insert(ObjectIdentifier(work)).inserted { next.append((work, path.union(link))) }
      }
    }
    return nil
  }

  /// Unfinished work of `engine` that can complete only after this work completed, or `nil` when none is found: what
  /// a body of this work would wait for in `engine`'s ``WorkQueue/allFinished()``, which could then never return.
  ///
  /// Walks forward from this work: to its dependents (and theirs: a pending item's list holds every dependent added so
  /// far), to the followers of a pending barrier met on the way, and to the work of each body whose checked wait
  /// (``BodyWaits``) is for work met on the way. Work that completed ends the walk (its dependents were told). Unstarted
  /// work needs a slot of its queue: once the bodies met on the way hold every slot of a queue (this body alone, on a
  /// serial queue), that queue's unstarted work is behind this work too. Each item's lock is taken alone, a queue's
  /// barriers and items under its lock; the cost grows with what waits for this work, not with `engine`'s size (but for
  /// a queue whose slots are all held, whose unfinished work is read once per body met there). Work in line for an
  /// exclusivity key held by work met on the way is behind it as well (under the exclusivity registry's lock). A
  /// dependent
  /// that a failed sibling dependency would end without this work is still counted, as the walk back of
  /// ``mustWait(for:evaluating:)`` counts it.
  ///
  /// Each work and engine the walk meets goes to `keep` (see ``WorkEngine/checkWait(of:for:_:keeping:)``).
  final func firstBehind(on engine: WorkEngine, keeping keep: inout [AnyObject]) -> AnyWork? {
    let waits = BodyWaits.shared.snapshot()
    let queueWaits = BodyWaits.shared.queueSnapshot()
    for (waiter, targets) in waits {
      keep.append(waiter)
      keep.append(contentsOf: targets as [AnyObject])
    }
    for (waiter, engines) in queueWaits {
      keep.append(waiter)
      keep.append(contentsOf: engines as [AnyObject])
    }
    var seen: Set<ObjectIdentifier> = [ObjectIdentifier(self)]
    var next: [AnyWork] = [self]
    var found: [AnyWork] = []
    // Per queue: the bodies met on the way that hold one of its slots (each running item met is this work's body, or a
    // body whose checked wait is for work behind this one: none of them ends while this body waits).
    var heldSlots: [ObjectIdentifier: Int] = [:]
    // Unstarted work met because every slot of its queue is held that way: it counts only while it is unstarted.
    var needsSlot: Set<ObjectIdentifier> = []
    while let item = next.popLast() {
      found.removeAll(keepingCapacity: true)
      // What `found` took is let go of after the checks' lock, whichever way this step ends.
      defer { keep.append(contentsOf: found as [AnyObject]) }
      let (itemEngine, isBarrier, phase, heldKey): (WorkEngine?, Bool, Phase, String?) = item.lock.withLock {
        guard !item.phase.isFinal else { return (nil, false, item.phase, nil) }
        // Unstarted work of a group with a timeout completes at the deadline without a slot, and what waits for it
        // with it: not behind this work (a miss when the group's final item completes first, and nothing is cancelled).
        if !item.phase.isStarted, item.extras?.inTimedGroup == true { return (nil, false, item.phase, nil) }
        item.dependents.forEachElement { found.append($0) }
        let heldKey = item.extras.flatMap { $0.holdsKey ? $0.options.exclusive : nil }
        return (item.engine?.takeUnretainedValue(), item.isBarrier, item.phase, heldKey)
      }
      guard let itemEngine else { continue }
      if phase.isStarted && needsSlot.contains(ObjectIdentifier(item)) { continue }
      if item !== self && itemEngine === engine { return item }
      // Work in line for a key this item holds gets it only once this item completed.
      if let heldKey { found.append(contentsOf: ExclusivityRegistry.shared.line(of: heldKey, heldBy: item)) }
      if phase == .running {
        let id = ObjectIdentifier(itemEngine)
        let held = heldSlots[id, default: 0] + 1
        heldSlots[id] = held
        // Every slot of the queue held by such a body: its unstarted work never starts while this body waits.
        let unstarted = itemEngine.withState { state in held >= state.scheduler.width ? state.unfinishedItems() : [] }
        for work in unstarted where !needsSlot.contains(ObjectIdentifier(work)) {
          keep.append(work)
          if !work.lock.withLock({ work.phase.isStarted }) {
            needsSlot.insert(ObjectIdentifier(work))
            found.append(work)
          }
        }
      }
      if isBarrier {
        let followers = itemEngine.withState { state in
          (state.barriers.first { $0.barrier === item }?.followers ?? [])
            + state.held.values.filter { $0.barrier === item }.map(\.work)
        }
        found.append(contentsOf: followers)
      }
      // (Not a body whose wait its timeout ends: see `waitEndsAtItsDeadline`.)
      for (waiter, targets) in waits where targets.contains(where: { $0 === item }) && !waiter.waitEndsAtItsDeadline {
        found.append(waiter)
      }
      // A body waiting for the item's queue to have nothing unfinished waits for the item.
      for (waiter, engines) in queueWaits
      where engines.contains(where: { $0 === itemEngine }) && !waiter.waitEndsAtItsDeadline {
        found.append(waiter)
      }
      keep.append(itemEngine)
      for work in found where seen.insert(ObjectIdentifier(work)).inserted { next.append(work) }
    }
    return nil
  }

  /// Whether a wait of this work's body ends by itself: an `async` body with a `timeout:` has its task cancelled at the
  /// deadline, which ends its wait (`CancellationError`); the body then ends and lets go of its slot and key, and its
  /// dependents end with it. What is behind it is not behind the work it waits for: ``firstBehind(on:keeping:)`` does
  /// not follow it, ``mustWait(for:evaluating:keeping:)`` does not follow its wait, and
  /// ``slotsAreHeld(on:behind:evaluating:keeping:)`` does not count its slot (a synchronous body is not interrupted by
  /// its timeout, and is followed).
  final var waitEndsAtItsDeadline: Bool {
    isAsync && lock.withLock { extras?.options.timeout != nil }
  }

  /// Whether every slot of `engine` is held by a body that cannot end while `other`'s body waits: a body whose wait
  /// passed its check (``BodyWaits/snapshot()``) for work that must wait for `other` (``mustWait(for:evaluating:keeping:)``),
  /// or `other`'s own body. Unstarted
  /// work of `engine` then never gets a slot. A body that does not wait, or waits for anything else, ends and frees its
  /// slot; so does a body blocked in a way the engine does not see (a semaphore): it counts as ending.
  static func slotsAreHeld(
    on engine: WorkEngine, behind other: AnyWork, evaluating: Set<ObjectIdentifier>, keeping keep: inout [AnyObject]
  ) -> Bool {
    let width = engine.withState { $0.scheduler.width }
    // `other`'s own wait is being checked: not in the snapshot yet, and its body holds a slot of its queue.
    var held = other.currentEngine === engine ? 1 : 0
    if held >= width { return true }
    let waits = BodyWaits.shared.snapshot()
    for (waiter, targets) in waits {
      keep.append(waiter)
      keep.append(contentsOf: targets as [AnyObject])
    }
    for (waiter, targets) in waits
    where waiter !== other && waiter.currentEngine === engine && !waiter.waitEndsAtItsDeadline {
      let behind = targets.contains {
        $0 === other || $0.mustWait(for: other, evaluating: evaluating, keeping: &keep) != nil
      }
      if behind {
        held += 1
        if held >= width { return true }
      }
    }
    return false
  }
}

/// The blocking waits (`Work.wait()`) of running bodies, on every queue: the work each body's work waits for. The
/// deadlock check follows them back from the awaited work (``AnyWork/mustWait(for:evaluating:keeping:)``), so bodies of different queues
/// that would wait for each other are refused too.
///
/// Only waits that hold up their work's completion are recorded (`WorkEngine.waitHoldsUp`): not those of tasks a body
/// started. A body's wait is recorded once its check passed, under ``WorkEngine/waitChecks`` (checks run one at a
/// time), and removed when the wait returns or throws: of two bodies that begin waiting for each other at the same
/// moment, the second to be checked sees the first's wait, and only it is refused. One lock for the
/// process, taken only by waits from bodies, and inside nothing but ``WorkEngine/waitChecks``.
final class BodyWaits: Sendable {
  static let shared = BodyWaits()

  /// Per waiting work (kept alive while it waits), what its bodies wait for (one at a time per body; a list in case a
  /// body's work is also current on another thread, through a task that inherited it).
  private let waits = Locked<[ObjectIdentifier: (waiter: AnyWork, targets: [AnyWork])]>([:])

  /// Per waiting work (kept alive while it waits), the queues its bodies wait for to have nothing unfinished
  /// (`allFinished()`, `waitUntilAllFinished()`), each recorded once its check passed.
  private let queueWaits = Locked<[ObjectIdentifier: (waiter: AnyWork, engines: [WorkEngine])]>([:])

  /// Records that `waiter`'s body waits for `engine`'s queue to have nothing unfinished (its check passed).
  func beginQueueWait(_ waiter: AnyWork, for engine: WorkEngine) {
    queueWaits.withLock { $0[ObjectIdentifier(waiter), default: (waiter, [])].engines.append(engine) }
  }

  /// Removes one record of `waiter`'s body waiting for `engine`'s queue (released after the lock).
  func endQueueWait(_ waiter: AnyWork, for engine: WorkEngine) {
    let removed: (waiter: AnyWork, engines: [WorkEngine])? = queueWaits.withLock { waits in
      let id = ObjectIdentifier(waiter)
      guard var entry = waits[id], let index = entry.engines.firstIndex(where: { $0 === engine }) else { return nil }
      entry.engines.remove(at: index)
      if entry.engines.isEmpty { return waits.removeValue(forKey: id) } else { waits[id] = entry }
      return nil
    }
    _ = consume removed
  }

  /// Whether a body of `waiter` waits for `engine`'s queue to have nothing unfinished.
  func waitsForQueue(_ waiter: AnyWork, _ engine: WorkEngine) -> Bool {
    queueWaits.withLock { $0[ObjectIdentifier(waiter)]?.engines.contains { $0 === engine } ?? false }
  }

  /// Every work whose bodies wait for queues to have nothing unfinished, with those queues.
  func queueSnapshot() -> [(waiter: AnyWork, engines: [WorkEngine])] {
    queueWaits.withLock { Array($0.values) }
  }

  /// Records that `waiter`'s body waits for `target` (its check passed).
  func begin(_ waiter: AnyWork, for target: AnyWork) {
    waits.withLock { $0[ObjectIdentifier(waiter), default: (waiter, [])].targets.append(target) }
  }

  /// Removes one record of `waiter`'s body waiting for `target` (the works are released after the lock).
  func end(_ waiter: AnyWork, for target: AnyWork) {
    let removed: (waiter: AnyWork, targets: [AnyWork])? = waits.withLock { waits in
      let id = ObjectIdentifier(waiter)
      guard var entry = waits[id], let index = entry.targets.firstIndex(where: { $0 === target }) else {
        return nil
      }
      entry.targets.remove(at: index)
      if entry.targets.isEmpty { return waits.removeValue(forKey: id) } else { waits[id] = entry }
      return nil
    }
    _ = consume removed
  }

  /// Calls `body` with each work that `waiter`'s bodies wait for (under this registry's lock: `body` takes no lock).
  func forEachTarget(of waiter: AnyWork, _ body: (AnyWork) -> Void) {
    waits.withLock { waits in
      guard let targets = waits[ObjectIdentifier(waiter)]?.targets else { return }
      for target in targets { body(target) }
    }
  }

  /// Every waiting work with what its bodies wait for, as they are now. A wait is recorded once its check passed, so
  /// a check never counts the wait being checked (``AnyWork/slotsAreHeld(on:behind:evaluating:keeping:)``): of two
  /// bodies that begin waiting for the same unstarted work in the last two slots of its queue, only the second is
  /// refused.
  func snapshot() -> [(waiter: AnyWork, targets: [AnyWork])] {
    waits.withLock { waits in waits.values.map { ($0.waiter, $0.targets) } }
  }
}

/// One record of ``BodyWaits`` of a body's wait for a queue to have nothing unfinished, ended once.
final class QueueWaitRecord: Sendable {
  let waiter: AnyWork
  let engine: WorkEngine
  private let ended = Atomic<Bool>(false)

  init(waiter: AnyWork, engine: WorkEngine) {
    self.waiter = waiter
    self.engine = engine
  }

  /// Removes the record from ``BodyWaits`` (only the first call does).
  func end() {
    guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
    BodyWaits.shared.endQueueWait(waiter, for: engine)
  }
}

/// One record of ``BodyWaits`` (a body's wait for some work), ended once by whichever ends the wait first: an
/// `await` ended by its task's cancellation ends it in the cancellation handler, not when the task runs again (until
/// then the walk followed a wait that was over, and refused waits for the body's work that would have returned).
final class BodyWaitRecord: Sendable {
  let waiter: AnyWork
  let target: AnyWork
  private let ended = Atomic<Bool>(false)

  init(waiter: AnyWork, target: AnyWork) {
    self.waiter = waiter
    self.target = target
  }

  /// Removes the record from ``BodyWaits`` (only the first call does).
  func end() {
    guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
    BodyWaits.shared.end(waiter, for: target)
  }
}

/// The kinds of links that put one item behind another (see ``AnyWork/mustWait(for:evaluating:keeping:)``).
struct WorkPath: OptionSet, CustomStringConvertible {
  let rawValue: UInt8
  /// A dependent is behind its dependency.
  static let dependency = WorkPath(rawValue: 1)
  /// Work added after a barrier is behind it.
  static let barrier = WorkPath(rawValue: 2)
  /// Work in an exclusivity key's line is behind the key's holder.
  static let key = WorkPath(rawValue: 4)
  /// A body waiting in `Work.wait()` is behind the work it waits for.
  static let waits = WorkPath(rawValue: 8)
  /// Unstarted work is behind the bodies that hold every slot of its queue.
  static let slots = WorkPath(rawValue: 16)

  var description: String {
    var parts: [String] = []
    if contains(.dependency) { parts.append("dependencies") }
    if contains(.barrier) { parts.append("a barrier added after it") }
    if contains(.key) { parts.append("the line of an exclusivity key it holds") }
    if contains(.waits) { parts.append("bodies waiting for other work") }
    if contains(.slots) { parts.append("the slots of a queue whose every body waits behind this body's work") }
    return parts.joined(separator: ", ")
  }
}

/// One body's `Work.wait()`, as the blocked-wait count of a queue sees it: counted by the deadlock check (under the
/// engine's lock) unless the awaited work has completed, and uncounted by that completion if it was counted. Whichever
/// of the two comes second sees what the first did, so a wait is never counted after its work completed, nor left
/// counted.
final class BlockedWait: Sendable {
  private static let open = 0
  private static let ended = 1
  /// `open`, `ended`, or the engine whose count holds the wait (retained while it does).
  private let state = Atomic<UInt>(0)

  var hasEnded: Bool { state.load(ordering: .acquiring) == UInt(Self.ended) }

  /// Marks the wait counted on `engine`, unless it has ended; call under the engine's lock, and count it if true.
  func count(on engine: WorkEngine) -> Bool {
    let counted = UInt(bitPattern: Unmanaged.passRetained(engine).toOpaque())
    if state.compareExchange(expected: UInt(Self.open), desired: counted, ordering: .acquiringAndReleasing).exchanged {
      return true
    }
    Unmanaged<WorkEngine>.fromOpaque(UnsafeRawPointer(bitPattern: counted)!).release()
    return false
  }

  /// The awaited work completed: uncounts the wait if it was counted.
  func end() {
    let previous = state.exchange(UInt(Self.ended), ordering: .acquiringAndReleasing)
    guard previous > UInt(Self.ended), let pointer = UnsafeRawPointer(bitPattern: previous) else { return }
    let engine = Unmanaged<WorkEngine>.fromOpaque(pointer).takeRetainedValue()
    engine.endBlockedWait(self)
  }
}

/// The blocking waits of a queue's bodies for work of the same queue (`Work.wait()`), for the deadlock check: which
/// body waits for which work, and whether that work needed a slot when the wait began.
///
/// A waiting body is *stuck* when the work it waits for can only run once a slot is free (unstarted, or between
/// attempts), or is running in a slot whose body is itself stuck, or when the waits form a cycle. Stuck bodies hold
/// their slots until a slot frees, so once `maxConcurrent` of them are stuck, no slot ever frees: a wait that would
/// make that many is refused. (A wait that closes a cycle is refused before it gets here, by
/// ``AnyWork/mustWait(for:evaluating:keeping:)``, which follows ``BodyWaits`` on every queue.) A body waiting for running work whose
/// body is not waiting is not stuck: that work ends (and, should it wait later, its own check follows the waits to
/// it).
struct BlockedWaits {
  struct Entry {
    /// The `BlockedWait` that removes the entry when the work completes.
    let wait: ObjectIdentifier
    /// The waiting body's work.
    let waiter: ObjectIdentifier
    /// The work waited for; held until it completes (its completion removes the entry).
    let targetWork: AnyWork
    /// Whether the work needed a slot (unstarted or between attempts): when the wait began, until it is seen started
    /// (``markStarted(_:)``).
    var needsSlot: Bool

    var target: ObjectIdentifier { ObjectIdentifier(targetWork) }

    init(wait: ObjectIdentifier, waiter: AnyWork, target: AnyWork, needsSlot: Bool) {
      self.wait = wait
      self.waiter = ObjectIdentifier(waiter)
      self.targetWork = target
      self.needsSlot = needsSlot
    }
  }

  var entries: [Entry] = []

  /// How many waits there are.
  var count: Int { entries.count }

  /// The work that waits still count as needing a slot: the caller asks (outside the engine's lock) which has started.
  func targetsNeedingASlot() -> [AnyWork] {
    entries.isEmpty ? [] : entries.filter(\.needsSlot).map(\.targetWork)
  }

  /// Marks the waits for `started` (work seen started, not retried) as waits for work that needs no slot.
  mutating func markStarted(_ started: [AnyWork]) {
    guard !started.isEmpty else { return }
    for index in entries.indices where started.contains(where: { $0 === entries[index].targetWork }) {
      entries[index].needsSlot = false
    }
  }

  /// The wait of the body running `target`, if that body is waiting.
  private func wait(of target: ObjectIdentifier) -> Entry? {
    entries.first { $0.waiter == target }
  }

  /// Whether the body of `entry` is stuck (see the type's documentation), among these waits and `extra`.
  private func isStuck(_ entry: Entry, with extra: Entry) -> Bool {
    var next = entry
    for _ in 0...(entries.count + 1) {
      // Work that is retried needs a slot again whatever its body does now.
      if next.needsSlot { return true }
      if extra.waiter == next.target {
        next = extra
      } else if let wait = wait(of: next.target) {
        next = wait
      } else {
        return false  // the chain ends at running work whose body is not waiting
      }
    }
    return true  // a cycle
  }

  /// How many bodies would be stuck with `entry` added: 0 when its own body would not be.
  func stuckCount(adding entry: Entry) -> Int {
    guard isStuck(entry, with: entry) else { return 0 }
    return 1 + entries.count { isStuck($0, with: entry) }
  }
}

/// 64 bytes of nothing, between fields that different threads write (see ``WorkEngine``).
struct CacheLinePadding {
  private let words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
}

/// Finished items a worker hands back, gathered before they join the engine's hand-back list (see
/// `WorkEngine.handBack(_:into:)`): linked newest first through `registryPrevious`, as on the list.
struct HandBackBatch {
  var newest: Unmanaged<AnyWork>? = nil
  var oldest: Unmanaged<AnyWork>? = nil
  var count = 0
}

/// What the engine's lock guards.
struct EngineState {
  var scheduler: WorkScheduler<AnyWork, Waiter>
  /// The newest unfinished item; the registry links every unfinished item (for `cancelAll` and reports).
  var registryHead: AnyWork?
  /// Bodies of this queue blocked in `Work.wait()` for work of this queue, each kept until that work completes.
  var blockedWaits = BlockedWaits()
  /// Pending barriers, oldest first, each with the items added after it (they wait for it).
  var barriers: [(barrier: AnyWork, followers: [AnyWork])] = []
  /// The pending barriers whose followers their retirement took (`readyFollowers(of:into:rare:)`), each until it is
  /// unregistered: work added meanwhile does not follow them (see `admit`), but is held behind them. A set, not one
  /// slot: a barrier made ready by another's end can be cancelled, and retire, inside that one's retirement.
  var retiringBarriers: Set<ObjectIdentifier> = []
  /// Items registered while a barrier was pending, by identity: each with the barrier that was the newest pending one
  /// then, and whether it is ready. Such an item was published after that barrier took what it waits for, so it must
  /// not start before the barrier completed; yet its adding thread may have decided, before the barrier was added,
  /// that it follows no barrier (or only an older one), and published it ready. It stays out of the ready queue
  /// until that barrier retires (harmless for an item that follows the barrier anyway: it cannot be ready before).
  /// Without this, an item added while another thread added a barrier could run beside the barrier. `order` is the
  /// order of registration, in which the items the barrier releases are queued.
  var held: [ObjectIdentifier: (work: AnyWork, barrier: AnyWork, ready: Bool, order: Int)] = [:]
  /// How many items were held so far: the next held item's `order`.
  var heldCount = 0
  /// Items added and completed in the current burst (since the queue was last idle).
  var added = 0
  var completed = 0
  var observers = QueueObservers()
  /// Items that got observers of their own (the queue then emits events).
  var itemObservers = 0
  /// The engine itself, retained, while it has unfinished work: items refer to their engine without retaining it (see
  /// `AnyWork.engine`), so the engine holds itself from the first item of a burst to the retirement of the last.
  /// Unmanaged, so that the retirement that takes it has a plain value to release outside the lock, and the others
  /// nothing to destroy.
  var keepAlive: Unmanaged<WorkEngine>?
  /// How many takings of the incoming list in a row found `WorkEngine.incomingReadyPriority` set and no ready item on
  /// it: at `WorkEngine.takingsBeforeClearingTheReadyFlag`, the next one clears the flag first.
  var readyFlagStaleTakings = 0

  var progress: WorkProgress { WorkProgress(completed: completed, total: added) }

  init(scheduler: WorkScheduler<AnyWork, Waiter>) {
    self.scheduler = scheduler
  }

  /// Counts a run of `count` items that ``WorkEngine``'s one-pass absorb linked into the registry (see
  /// ``register(_:on:)``, which does the same for one item, and reports progress).
  mutating func registerRun(_ count: Int, on engine: WorkEngine) {
    if scheduler.unfinished == 0 {
      added = 0
      completed = 0
      keepAlive = Unmanaged.passRetained(engine)
    }
    added += count
    scheduler.added(count)
  }

  mutating func register(_ item: consuming AnyWork, on engine: WorkEngine) {
    if scheduler.unfinished == 0 {
      added = 0
      completed = 0
      keepAlive = Unmanaged.passRetained(engine)
    }
    added += 1
    if observers.hasProgress { yieldProgress() }
    scheduler.added()
    // The old head moves from `registryHead` to `item.registryNext` (`take`, not a copy: no retain, no release).
    registryHead?.registryPrevious = Unmanaged.passUnretained(item)
    item.registryNext = registryHead.take()
    item.isRegistered = true
    registryHead = consume item
  }

  /// Tells the progress observers where the burst is. Out of line: inlined, the look-ups of the continuation types'
  /// metadata were hoisted out of the `hasProgress` test and ran on every item (two calls each time, under
  /// callgrind).
  @inline(never)
  func yieldProgress() {
    for continuation in observers.progress.values { continuation.yield(progress) }
  }

  /// Queues the items in `ready` (dependents a retirement made ready), in order, leaving it empty. Moved into the
  /// ready queue, not copied: no reference to a dependent is left behind while a worker runs it.
  mutating func queue(_ ready: inout SmallList<AnyWork>) {
    if !held.isEmpty { holdBack(&ready) }
    ready.removeAll { (dependent: consuming AnyWork) in
      let priority = dependent.priority.rawValue
      scheduler.push(consume dependent, priority: priority)
    }
  }

  /// The pending barrier each item waits for, by the item's identity: the one it follows, or the one it is held behind
  /// (see `held`); its own list of dependencies names neither.
  func pendingBarrierOfEachWaitingItem() -> [ObjectIdentifier: AnyWork] {
    var barrierOf: [ObjectIdentifier: AnyWork] = [:]
    for (barrier, followers) in barriers {
      for follower in followers { barrierOf[ObjectIdentifier(follower)] = barrier }
    }
    for (id, entry) in held where barrierOf[id] == nil { barrierOf[id] = entry.barrier }
    return barrierOf
  }

  /// Holds `item` (registered while a barrier is pending) until the newest pending barrier retires (see `held`).
  mutating func hold(_ item: AnyWork, ready: Bool) {
    held[ObjectIdentifier(item)] = (item, barriers[barriers.count - 1].barrier, ready, heldCount)
    heldCount &+= 1
  }

  /// Whether `item`, now ready, is held (it is then marked ready, to be queued when its barrier retires).
  mutating func holdReady(_ item: AnyWork) -> Bool {
    let id = ObjectIdentifier(item)
    guard held[id] != nil else { return false }
    held[id]!.ready = true
    return true
  }

  /// Takes the held items out of `ready` (see `holdReady`).
  @inline(never)
  mutating func holdBack(_ ready: inout SmallList<AnyWork>) {
    var kept = SmallList<AnyWork>()
    ready.removeAll { (item: consuming AnyWork) in
      let work = consume item
      if !holdReady(work) { kept.append(work) }
    }
    swap(&kept, &ready)
  }

  /// Lets go of the items held for `barrier`, which retires (those not ready queue when they are): the ready ones join
  /// `ready` (the items its retirement made ready, its followers among them), and the items of `ready` held for it
  /// are put in the order they were registered, ahead of the others. So they queue first in, first out, as if each
  /// had been added under the lock: pushed straight into the ready queue in the dictionary's order, as they were,
  /// items held behind one barrier started in any order, and ahead of the followers registered before them.
  @inline(never)
  mutating func releaseHeld(for barrier: AnyWork, into ready: inout SmallList<AnyWork>) {
    var released: [(order: Int, work: AnyWork)] = []
    var others = SmallList<AnyWork>()
    var taken: Set<ObjectIdentifier> = []
    ready.removeAll { (item: consuming AnyWork) in
      let work = consume item
      let id = ObjectIdentifier(work)
      if let entry = held[id], entry.barrier === barrier {
        taken.insert(id)
        released.append((entry.order, work))
      } else {
        others.append(work)
      }
    }
    for (id, entry) in held where entry.barrier === barrier && entry.ready && !taken.contains(id) {
      released.append((entry.order, entry.work))
    }
    held = held.filter { $0.value.barrier !== barrier }
    released.sort { $0.order < $1.order }
    for entry in released { ready.append(entry.work) }
    others.removeAll { (item: consuming AnyWork) in ready.append(item) }
  }

  /// Unlinks a completed item. In `rare` (made when needed): the followers of a barrier that completed, and the
  /// waiters to wake when it was the last unfinished item; in `ready`, in order, the ready items held for a barrier
  /// that completed (see ``releaseHeld(for:into:)``). Then, the engine's reference to itself moves to
  /// `lastReference`, for the caller to release outside the lock.
  mutating func unregister(
    _ item: AnyWork, ready: inout SmallList<AnyWork>, rare: inout RareRetirement?,
    lastReference: inout Unmanaged<WorkEngine>?
  ) {
    completed += 1
    if observers.hasProgress { yieldProgress() }
    if !barriers.isEmpty, let index = barriers.firstIndex(where: { $0.barrier === item }) {
      if rare == nil { rare = RareRetirement() }
      rare!.released = barriers.remove(at: index).followers
      if !retiringBarriers.isEmpty { retiringBarriers.remove(ObjectIdentifier(item)) }
      if !held.isEmpty { releaseHeld(for: item, into: &ready) }
    }
    if !held.isEmpty { held.removeValue(forKey: ObjectIdentifier(item)) }
    // `next` moves out of the item (`take`) into the link that held the item, which releases the item's entry.
    var next = item.registryNext.take()
    let previous = item.registryPrevious.take()
    next?.registryPrevious = previous
    if let previous {
      // Alive: the link before it holds it (see `AnyWork.registryPrevious`), and we hold the lock. `take`: moved,
      // not copied (a copy was a retain here and a release when `next` died).
      previous._withUnsafeGuaranteedRef { $0.registryNext = next.take() }
    } else {
      registryHead = next.take()
    }
    if scheduler.retired() {
      lastReference = keepAlive.take()
      if !scheduler.waiters.isEmpty {
        if rare == nil { rare = RareRetirement() }
        rare!.waiters = scheduler.takeWaiters()
      }
    }
  }

  func unfinishedItems() -> [AnyWork] {
    var items: [AnyWork] = []
    items.reserveCapacity(scheduler.unfinished)
    var cursor = registryHead
    while let item = cursor {
      items.append(item)
      cursor = item.registryNext
    }
    return items.reversed()
  }
}

/// Someone waiting for a queue to have no unfinished work.
enum Waiter: Sendable {
  case blocked(HelpingWait)
  case continuation(OneShotContinuation<Void>)

  func resume() {
    switch self {
    case .blocked(let wait): wait.end()
    case .continuation(let continuation): continuation.resume(with: .success(()))
    }
  }
}

/// A thread blocked until something of a queue has ended (``Work/wait()``, ``WorkQueue/waitUntilAllFinished()``), which
/// meanwhile frees the finished items that the queue's workers hand back, when they ask.
///
/// The workers hand the last reference to a finished item back to the thread that adds the next one (see
/// `WorkEngine.handBack`), and free the list themselves once it is long. Once that thread has added its work and waits
/// for it, nothing adds: a worker running a chain of 100,000 items freed them all itself, about a third of its
/// instructions. A waiting thread has nothing else to do, and it is most often the one that allocated the items (their
/// blocks go back to its own `malloc` cache): so it offers to free them, and a worker whose list reaches
/// `WorkEngine.handBackHelperBatch` items wakes it instead of freeing them (one system call per batch). Only memory is
/// freed this way: a handed-back item's deinit runs no user code.
final class HelpingWait: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)
  private let isOver = Atomic<Bool>(false)

  /// Ends the wait (the awaited work or queue has ended).
  func end() {
    isOver.store(true, ordering: .releasing)
    semaphore.signal()
  }

  /// Wakes the waiting thread to free its engine's hand-back list.
  func requestFreeing() { semaphore.signal() }

  /// Blocks until ``end()``; meanwhile frees `engine`'s hand-back list whenever its workers ask, if the engine took the
  /// offer (one waiting thread per engine does).
  func wait(freeingFor engine: WorkEngine?) {
    let helping = engine?.offerFreeing(self) ?? false
    defer { if helping { engine?.withdrawFreeing(self) } }
    while true {
      semaphore.wait()
      if isOver.load(ordering: .acquiring) { return }
      if helping { engine?.freeForWorkers() }
    }
  }
}
