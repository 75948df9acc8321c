import Dispatch

/// How work that fails is tried again: how many attempts in all, how long to wait between them, and which
/// errors are worth another attempt.
///
/// Waiting between attempts holds no slot and no thread. Cancelling the work stops the retrying; a timeout
/// (`timeout:`) ends it too. Each new attempt is visible to observers as a ``WorkEvent/Kind/retrying(attempt:error:)``
/// event.
///
/// ```swift
/// let sync = queue.add(retry: .exponential(maxAttempts: 5, initial: .milliseconds(50))) { try upload() }
/// let once = queue.add(retry: .fixed(maxAttempts: 3, delay: .seconds(1), when: { $0 is URLError })) { try get() }
/// ```
public struct WorkRetry: Sendable {
  /// The largest number of attempts, the first included (at least 1).
  public var maxAttempts: Int
  /// The wait before attempt `n + 1` after attempt `n` failed (`n` counts from 1), before jitter.
  public var delay: @Sendable (_ attempt: Int) -> Duration
  /// Whether to spread each wait randomly over its second half (so that many retries do not fall in step).
  public var jitter: Bool
  /// Whether an error is worth another attempt; `CancellationError` never is.
  public var shouldRetry: @Sendable (any Error) -> Bool

  /// A policy with your own schedule.
  ///
  /// - Precondition: `maxAttempts` is at least 1.
  public init(
    maxAttempts: Int,
    jitter: Bool = false,
    when shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true },
    delay: @escaping @Sendable (_ attempt: Int) -> Duration
  ) {
    precondition(maxAttempts >= 1, "WorkRetry: maxAttempts must be at least 1, got \(maxAttempts)")
    self.maxAttempts = maxAttempts
    self.delay = delay
    self.jitter = jitter
    self.shouldRetry = shouldRetry
  }

  /// The same wait before every new attempt.
  public static func fixed(
    maxAttempts: Int,
    delay: Duration = .zero,
    when shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
  ) -> WorkRetry {
    WorkRetry(maxAttempts: maxAttempts, when: shouldRetry) { _ in delay }
  }

  /// A wait that doubles after every failed attempt, from `initial` up to `maximum`, with jitter.
  public static func exponential(
    maxAttempts: Int,
    initial: Duration,
    maximum: Duration = .seconds(60),
    jitter: Bool = true,
    when shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true }
  ) -> WorkRetry {
    precondition(initial >= .zero, "WorkRetry.exponential: initial must not be negative")
    return WorkRetry(maxAttempts: maxAttempts, jitter: jitter, when: shouldRetry) { attempt in
      var wait = initial
      for _ in 1..<Swift.max(1, attempt) where wait < maximum { wait *= 2 }
      return Swift.min(wait, maximum)
    }
  }

  /// The wait after failed attempt `attempt`, jitter applied.
  func wait(after attempt: Int) -> Duration {
    let base = delay(attempt)
    guard jitter, base > .zero else { return base }
    return base / 2 + base / 2 * Double.random(in: 0...1)
  }
}

/// A predicate checked when work is about to start, after its dependencies finished: it runs, is skipped, or
/// fails, without its body running.
///
/// Readiness never depends on it: the work becomes ready when its dependencies finished, as any work, and the
/// condition is evaluated once, when a slot takes it.
///
/// ```swift
/// let online = queue.add(condition: .skip(unless: { network.isUp })) { sync() }   // skipped: ends cancelled
/// let cached = queue.add(condition: .skip(unless: { !cache.isFresh }, value: cache.value)) { try fetch() }
/// let safe = queue.add(condition: .fail(unless: { disk.hasSpace }, error: DiskFull())) { try write() }
/// ```
public struct WorkCondition<Value: Sendable>: Sendable {
  enum Outcome {
    case run
    case skip(Value?)
    case fail(any Error)
  }

  let evaluate: @Sendable () -> Outcome

  /// Skips the work (it ends cancelled, its body never runs) unless `predicate` holds.
  public static func skip(unless predicate: @escaping @Sendable () -> Bool) -> WorkCondition {
    WorkCondition { predicate() ? .run : .skip(nil) }
  }

  /// Finishes the work with `value` instead of running its body, unless `predicate` holds.
  public static func skip(unless predicate: @escaping @Sendable () -> Bool, value: Value) -> WorkCondition {
    WorkCondition { predicate() ? .run : .skip(value) }
  }

  /// Fails the work with `error` instead of running its body, unless `predicate` holds.
  public static func fail(unless predicate: @escaping @Sendable () -> Bool, error: any Error) -> WorkCondition {
    WorkCondition { predicate() ? .run : .fail(error) }
  }
}

/// The error of work that ran longer than its `timeout:`.
///
/// ```swift
/// let page = queue.add(name: "page", timeout: .seconds(2)) { try fetch(url) }
/// // try await page.value throws WorkTimeoutError: work 'page' on WorkQueue 'net' timed out after 2.0 seconds
/// ```
public struct WorkTimeoutError: Error, CustomStringConvertible, Sendable {
  /// The name of the work, if it had one.
  public var work: String?
  /// The name of its queue.
  public var queue: String
  /// The time the work was given.
  public var timeout: Duration

  public var description: String {
    "work '\(work ?? "unnamed")' on WorkQueue '\(queue)' timed out after \(timeout)"
  }
}

/// The error of work cancelled with a reason (``AnyWork/cancel(reason:)``); it ends the work as cancelled.
///
/// ```swift
/// work.cancel(reason: "scrolled away")
/// // try await work.value throws WorkCancellationError: work 'thumb' was cancelled: scrolled away
/// ```
public struct WorkCancellationError: Error, CustomStringConvertible, Sendable {
  /// The name of the work, if it had one.
  public var work: String?
  /// Why it was cancelled.
  public var reason: String

  public var description: String {
    "work '\(work ?? "unnamed")' was cancelled: \(reason)"
  }
}

/// The options of one `add` call that most work does not use; `nil` on the hot path.
struct WorkOptions: Sendable {
  var delay: Duration?
  var timeout: Duration?
  var retry: WorkRetry?
  var exclusive: String?
  var qos: DispatchQoS.QoSClass?
  /// The condition, with its value type erased: stores a skip value in the work itself.
  var condition: (@Sendable (AnyWork) -> ConditionOutcome)?

  var isEmpty: Bool {
    delay == nil && timeout == nil && retry == nil && exclusive == nil && qos == nil && condition == nil
  }
}

/// What a condition decided, with the skip value (if any) already stored in the work.
enum ConditionOutcome {
  case run
  case skip(Termination)
  case fail(any Error)
}

/// Per-item state of the rarely used features, guarded by the item's lock.
@usableFromInline
final class WorkExtras {
  let options: WorkOptions
  var cancelReason: String?
  var attempts = 1
  /// The body kept for another attempt (retry).
  var retryBody: ErasedBody?
  /// Whether the running attempt outlived its timeout.
  var timedOut = false
  /// Whether this exclusive work holds its key: set by ``ExclusivityRegistry`` (under its lock, then the item's) when
  /// it gives the key, and true until the work completes. Read under the item's lock, so that a worker can tell,
  /// before it makes the work running, whether it must first ask for the key.
  var holdsKey = false
  /// This item's observers.
  var observers: [@Sendable (WorkEvent) -> Void] = []
  /// This item's events that other threads left to the one delivering its events (``AnyWork/deliveringEvents``), in
  /// order, each with the time it happened.
  var heldEvents: [(WorkEvent.Kind, ContinuousClock.Instant)] = []
  /// Work cancelled with this work (the members of a group).
  var cancelAlso: [AnyWork] = []
  /// The members' progress, on a group's work.
  var groupTally: GroupTally?
  /// Whether this work is a member (or the work) of a group with a timeout: unstarted when the deadline comes (and the
  /// group's final item has not completed), it completes then without a slot. The walk of
  /// ``AnyWork/firstBehind(on:keeping:)`` does not follow such unstarted work.
  var inTimedGroup = false
  /// Called at most once, when running work is cancelled (``WorkContext/onCancel(_:)``, ``WorkFinish/onCancel(_:)``).
  var cancelHandlers = SmallList<@Sendable () -> Void>()

  /// The cancellation handlers, leaving none.
  func takeCancelHandlers() -> SmallList<@Sendable () -> Void> {
    var handlers = SmallList<@Sendable () -> Void>()
    swap(&handlers, &cancelHandlers)
    return handlers
  }

  init(options: WorkOptions) {
    self.options = options
  }
}
