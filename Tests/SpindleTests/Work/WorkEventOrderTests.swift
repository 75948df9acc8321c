import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// The order of one item's events as its observers see them, when `cancel()` races the item's start and end: `added`,
/// `willStart`, `started`, at most one `cancelRequested` (exactly one when the cancel found the work running), and
/// `finished` last. Work cancelled before it started gets only `finished` (after `added`).
///
/// Found in a review: the worker delivered `willStart` and `started` after it had marked the item running and let go of
/// its lock, and `cancel()` delivered `cancelRequested` after letting go of it too, through `currentEngine`, so the
/// cancel's event came before `started` (often, under stress), after `finished` (rarely), or not at all (when the work
/// had completed by then, and had no engine any more).
@Suite("Work: event order", .serialized, .offThePool)
struct WorkEventOrderTests {
  /// An event, reduced to what the order check looks at.
  enum Seen: String, Equatable, Sendable, CustomStringConvertible {
    case added, willStart, started, retrying, cancelRequested, finished

    init(_ kind: WorkEvent.Kind) {
      switch kind {
      case .added: self = .added
      case .willStart: self = .willStart
      case .started: self = .started
      case .retrying: self = .retrying
      case .cancelRequested: self = .cancelRequested
      case .finished: self = .finished
      }
    }

    var description: String { rawValue }
  }

  /// How an item's events broke the order.
  enum Violation: String, CaseIterable, Sendable {
    case cancelBeforeStarted = "cancelRequested before started"
    case cancelAfterFinished = "cancelRequested after finished"
    case cancelLost = "cancelRequested lost"
    case cancelTwice = "cancelRequested twice"
    case other = "another order"
  }

  /// What is wrong with `events`, the events of one item, or `nil` when they are in a valid order;
  /// `cancelHitRunning` says whether a `cancel()` found the item running.
  static func violation(of events: [Seen], cancelHitRunning: Bool) -> Violation? {
    guard events.first == .added else { return .other }
    let rest = Array(events.dropFirst())
    let cancels = rest.indices.filter { rest[$0] == .cancelRequested }
    let others = rest.filter { $0 != .cancelRequested }
    if others == [.finished] {
      // Never started: cancelled while pending or ready, which only completes the work.
      return cancels.isEmpty && !cancelHitRunning ? nil : .other
    }
    guard others == [.willStart, .started, .finished] else { return .other }
    guard let cancel = cancels.first else { return cancelHitRunning ? .cancelLost : nil }
    if cancels.count > 1 { return .cancelTwice }
    if cancel < 2 { return .cancelBeforeStarted }
    if cancel == rest.count - 1 { return .cancelAfterFinished }
    return cancelHitRunning ? nil : .other
  }

  final class Flag: Sendable {
    let value = Atomic<Bool>(false)
  }

  /// Spins (without sleeping) for about `nanoseconds`.
  static func spin(nanoseconds: Int) {
    guard nanoseconds > 0 else { return }
    let end = ContinuousClock.now + .nanoseconds(nanoseconds)
    while ContinuousClock.now < end {}
  }

  /// Whether the item was running when a `cancel()` reached it (the flag is set only then, for work without a timeout
  /// that is not a barrier, and stays set once the work completed).
  static func cancelHitRunning(_ work: AnyWork) -> Bool {
    work.lock.withLock { work.cancelRequested }
  }

  @Test("a cancel racing the start and end of an item: its events stay in order, and the cancel's is never lost")
  func cancelRacingTheStart() {
    let rounds = ProcessInfo.processInfo.environment["SPINDLE_ADVERSARIAL_ROUNDS"].flatMap(Int.init) ?? 3_000
    let seed = UInt64.random(in: 0...UInt64.max)
    var random = SeededGenerator(seed: seed)
    // Width 1: the target starts when the leader before it ends, a random time after it was added; the cancel comes a
    // random time after the add too, so it lands before the start, during it, while the body runs, or after the end.
    let queue = WorkQueue(name: "event-order", maxConcurrent: 1)
    let log = Locked<[String: [Seen]]>([:])
    let targetFinished = DispatchSemaphore(value: 0)
    let observation = queue.observe { event in
      guard let name = event.work, name.hasPrefix("t") else { return }
      log.withLock { $0[name, default: []].append(Seen(event.kind)) }
      if case .finished = event.kind { targetFinished.signal() }
    }
    defer { observation.cancel() }
    var violations: [Violation: Int] = [:]
    var examples: [String] = []
    var hitRunning = 0
    var hitPending = 0
    for round in 0..<rounds {
      let name = "t\(round)"
      // The target starts a little after the leader's spin ends; the cancel comes, counted from the leader's start,
      // from a little before that to a little after.
      let leaderSpin = Int.random(in: 0..<20_000, using: &random)
      let cancelSpin = max(0, leaderSpin + Int.random(in: -5_000..<40_000, using: &random))
      let bodySpin = Int.random(in: 0..<10_000, using: &random)
      let reason: String? = Bool.random(using: &random) ? "round \(round)" : nil
      let leaderStarted = Flag()
      queue.add(name: "leader") {
        leaderStarted.value.store(true, ordering: .releasing)
        Self.spin(nanoseconds: leaderSpin)
      }
      let target: AnyWork
      switch Int.random(in: 0..<4, using: &random) {
      case 0:
        target = queue.add(name: name) { 0 }
      case 1:
        target = queue.add(name: name) { () throws -> Int in
          let end = ContinuousClock.now + .nanoseconds(bodySpin)
          while ContinuousClock.now < end {
            if WorkContext.current?.isCancelled == true { throw CancellationError() }
          }
          return 1
        }
      case 2:
        target = queue.add(name: name) { () async throws -> Int in
          try Task.checkCancellation()
          await Task.yield()
          try Task.checkCancellation()
          return 2
        }
      default:
        target = queue.addCallback(name: name) { (finish: WorkFinish<Int>) in
          // One call of `finish`, whichever comes first.
          let called = Locked(false)
          let first: @Sendable () -> Bool = {
            called.withLock { called in
              defer { called = true }
              return !called
            }
          }
          finish.onCancel { if first() { finish(CancellationError()) } }
          DispatchQueue.global().async {
            Self.spin(nanoseconds: bodySpin)
            if first() { finish(3) }
          }
        }
      }
      while !leaderStarted.value.load(ordering: .acquiring) {}
      Self.spin(nanoseconds: cancelSpin)
      if let reason { target.cancel(reason: reason) } else { target.cancel() }
      guard targetFinished.wait(timeout: .now() + 60 * hangBoundScale) == .success else {
        Issue.record("round \(round) (seed \(seed)): '\(name)' never delivered finished")
        return
      }
      let running = Self.cancelHitRunning(target)
      let events = log.withLock { $0.removeValue(forKey: name) ?? [] }
      if running { hitRunning += 1 } else if !events.contains(.willStart) { hitPending += 1 }
      if let violation = Self.violation(of: events, cancelHitRunning: running) {
        violations[violation, default: 0] += 1
        if examples.count < 5 { examples.append("\(name): \(events) (cancel hit running: \(running))") }
      }
    }
    queue.waitUntilAllFinished()
    let failed = violations.values.reduce(0, +)
    let summary = Violation.allCases.compactMap { violation in
      violations[violation].map { count in "\(violation.rawValue): \(count)" }
    }
    let ended = rounds - hitRunning - hitPending
    print(
      "WorkEventOrderTests: \(failed) of \(rounds) rounds out of order (seed \(seed); the cancel found \(hitRunning)"
        + " running, \(hitPending) not started, \(ended) ended)"
        + (summary.isEmpty ? "" : "; " + summary.joined(separator: ", ")))
    #expect(failed == 0, "seed \(seed): \(summary.joined(separator: ", ")); e.g. \(examples.joined(separator: "; "))")
    // The race is exercised: some cancels found the work running.
    #expect(hitRunning > 0)
  }

  @Test("a cancel while the worker delivers willStart is delivered after started, by that worker")
  func cancelDuringTheStartEvents() throws {
    let queue = WorkQueue(name: "event-order.start", maxConcurrent: 1)
    let inWillStart = SpindleTestSupport.Gate()
    let release = SpindleTestSupport.Gate()
    let log = Locked<[Seen]>([])
    let observation = queue.observe { event in
      log.withLock { $0.append(Seen(event.kind)) }
      if case .willStart = event.kind {
        inWillStart.open()
        release.wait()
      }
    }
    defer { observation.cancel() }
    let deadline = ContinuousClock.now + .seconds(60 * hangBoundScale)
    let work = queue.add(name: "item") { () throws -> Int in
      while WorkContext.current?.isCancelled != true && ContinuousClock.now < deadline { usleep(100) }
      throw CancellationError()
    }
    #expect(inWillStart.wait())
    // The worker is delivering willStart: the cancel's event waits for started, and `cancel()` does not wait for it.
    work.cancel(reason: "now")
    #expect(log.withLock { $0 } == [.added, .willStart])
    release.open()
    #expect(throws: WorkCancellationError.self) { try work.wait() }
    #expect(eventually { log.withLock { $0.last } == .finished })
    #expect(log.withLock { $0 } == [.added, .willStart, .started, .cancelRequested, .finished])
  }

  @Test("finished waits for a cancelRequested that is being delivered, and comes from the cancelling thread after it")
  func finishWhileTheCancelIsDelivered() throws {
    let queue = WorkQueue(name: "event-order.finish", maxConcurrent: 1)
    let inCancelRequested = SpindleTestSupport.Gate()
    let release = SpindleTestSupport.Gate()
    let bodyStarted = SpindleTestSupport.Gate()
    let retired = SpindleTestSupport.Gate()
    let cancelReturned = SpindleTestSupport.Gate()
    let log = Locked<[Seen]>([])
    let observation = queue.observe { event in
      log.withLock { $0.append(Seen(event.kind)) }
      if case .cancelRequested = event.kind {
        inCancelRequested.open()
        release.wait()
      }
    }
    defer { observation.cancel() }
    let deadline = ContinuousClock.now + .seconds(60 * hangBoundScale)
    let work = queue.add(name: "item") { () throws -> Int in
      bodyStarted.open()
      while WorkContext.current?.isCancelled != true && ContinuousClock.now < deadline { usleep(100) }
      throw CancellationError()
    }
    work.whenCompleteErased { retired.open() }
    #expect(bodyStarted.wait())
    DispatchQueue.global().async {
      work.cancel()
      cancelReturned.open()
    }
    #expect(inCancelRequested.wait())
    // The body saw the cancel and the work completed and was retired (its completion handlers run after its finished
    // event is delivered or left to the thread delivering the item's events).
    #expect(retired.wait())
    #expect(work.state == .cancelled)
    #expect(log.withLock { $0 } == [.added, .willStart, .started, .cancelRequested])
    release.open()
    #expect(cancelReturned.wait())
    #expect(log.withLock { $0 } == [.added, .willStart, .started, .cancelRequested, .finished])
  }

  @Test("work cancelled before it starts gets finished only, and never a cancelRequested")
  func cancelBeforeTheStart() {
    let queue = WorkQueue(name: "event-order.pending", maxConcurrent: 1)
    let log = Locked<[Seen]>([])
    let observation = queue.observe { event in log.withLock { $0.append(Seen(event.kind)) } }
    defer { observation.cancel() }
    queue.suspend()
    let work = queue.add(name: "item") { 0 }
    work.cancel(reason: "early")
    queue.resume()
    queue.waitUntilAllFinished()
    #expect(eventually { log.withLock { $0.last } == .finished })
    #expect(log.withLock { $0 } == [.added, .finished])
  }
}
