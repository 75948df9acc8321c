import Dispatch
import Foundation
import Spindle
import Synchronization
import Testing

/// Issue 15, item 3: cancellation at every moment of an item's life, for every kind of body.
@Suite("Reliability: cancellation at every moment")
struct CancellationMomentTests {
  enum Moment: Int, CaseIterable, CustomStringConvertible {
    case beforeAdd, queued, running, finishing, finished
    var description: String { ["before add", "queued", "running", "finishing", "finished"][rawValue] }
  }

  enum Kind: Int, CaseIterable {
    case sync, async, callback
  }

  /// What one round saw; checked after every round completed.
  struct Round {
    var moment: Moment
    var kind: Kind
    var work: Work<Int>
  }

  /// Polls `condition` every 20 µs until it holds or `seconds` pass (by default 60 s, stretched under sanitizers as
  /// every hang bound is); returns whether it held.
  ///
  /// Sleeps between polls instead of spinning: on two shared cores a spinning waiter slows down the very threads
  /// it waits for.
  static func spin(seconds: Double = Reliability.seconds(60, full: 600), _ condition: () -> Bool) -> Bool {
    let deadline = DispatchTime.now() + seconds
    while !condition() {
      if DispatchTime.now() > deadline { return false }
      usleep(20)
    }
    return true
  }

  @Test("every moment × every body kind: completes once, cancel hooks at most once, nothing unfinished")
  func cancelAtEveryMoment() async throws {
    let rounds = Reliability.size(1_500, full: 10_000)
    let seed = Reliability.seed()
    let queue = WorkQueue(name: "moments", maxConcurrent: 4)
    let blocked = WorkQueue(name: "moments.blocked", maxConcurrent: 1)
    let holding = WorkQueue(name: "moments.holding", maxConcurrent: 1)
    holding.suspend()
    let ran = Counters(rounds)
    let hooks = Counters(rounds)
    let completions = Counters(rounds)
    let allCompleted = Countdown(rounds)
    let problems = TSanVisibleMutex<[String]>([])

    let results = TSanVisibleMutex<[Round]>([])
    let driver = DispatchSemaphore(value: 0)
    // Rounds the driver has made: its bound is on a stall, not on the whole run.
    let progress = Atomic<Int>(0)
    Thread.detachNewThread {
      var random = Reliability.Random(seed: seed)
      var made: [Round] = []
      made.reserveCapacity(rounds)
      for index in 0..<rounds {
        let moment = Moment(rawValue: index % Moment.allCases.count)!
        let kind = Kind(rawValue: (index / Moment.allCases.count) % Kind.allCases.count)!
        let started = DispatchSemaphore(value: 0)
        let spinBeforeReturn = Int(random.next() % 200)
        let spinBeforeCancel = Int(random.next() % 200)
        let waitsForCancel = moment == .running
        let target: WorkQueue = moment == .queued ? blocked : queue

        // The dependency is what is cancelled "before add": the item is added after it and must end cancelled.
        var dependency: Work<Int>?
        if moment == .beforeAdd {
          let root = holding.add { () -> Int in 0 }
          root.cancel()
          dependency = root
        }
        let gate = DispatchSemaphore(value: 0)
        if moment == .queued {
          blocked.add { gate.wait() }
        }

        let syncBody: @Sendable () throws -> Int = {
          ran.increment(index)
          started.signal()
          if waitsForCancel {
            guard Self.spin({ WorkContext.current?.isCancelled == true }) else { return -1 }
            throw CancellationError()
          }
          for _ in 0..<spinBeforeReturn { sched_yield() }
          return index
        }
        let work: Work<Int>
        switch (kind, dependency) {
        case (.sync, nil):
          work = target.add { try syncBody() }
        case (.sync, let root?):
          work = target.add(dependencies: [root]) { try syncBody() }
        case (.async, _):
          let body: @Sendable () async throws -> Int = {
            ran.increment(index)
            return try await withTaskCancellationHandler {
              started.signal()
              if waitsForCancel {
                try await Task.sleep(for: .seconds(30))
                return -1
              }
              for _ in 0..<spinBeforeReturn { await Task.yield() }
              return index
            } onCancel: {
              hooks.increment(index)
            }
          }
          work = dependency.map { target.add(dependencies: [$0], body) } ?? target.add(body)
        case (.callback, _):
          let body: @Sendable (WorkFinish<Int>) -> Void = { finish in
            ran.increment(index)
            started.signal()
            DispatchQueue.global().async {
              if waitsForCancel {
                let seen = Self.spin { finish.isCancelled }
                if seen { hooks.increment(index) }
                finish(seen ? .failure(CancellationError()) : .success(-1))
                return
              }
              for _ in 0..<spinBeforeReturn { sched_yield() }
              finish(index)
            }
          }
          work =
            dependency.map { target.addCallback(dependencies: [$0], body) } ?? target.addCallback(body)
        }
        work.onCompletion(on: DispatchQueue.global()) { _ in
          completions.increment(index)
          allCompleted.tick()
        }

        switch moment {
        case .beforeAdd:
          break
        case .queued:
          work.cancel()
          gate.signal()
        case .running:
          if started.wait(timeout: .now() + Reliability.seconds(60, full: 600)) == .timedOut {
            problems.withLock { $0.append("round \(index): the body never started") }
          }
          work.cancel()
        case .finishing:
          if started.wait(timeout: .now() + Reliability.seconds(60, full: 600)) == .timedOut {
            problems.withLock { $0.append("round \(index): the body never started") }
          }
          for _ in 0..<spinBeforeCancel { sched_yield() }
          work.cancel()
        case .finished:
          if !Self.spin({ work.state.isFinal }) {
            problems.withLock { $0.append("round \(index): never finished") }
          }
          work.cancel()
          work.cancel()
        }
        made.append(Round(moment: moment, kind: kind, work: work))
        progress.add(1, ordering: .relaxed)
      }
      results.withLock { $0 = made }
      driver.signal()
    }
    // A hang is a round that does not end within the bound; the whole run may take longer on a loaded host (the
    // bound was on the whole run, and 1,500 rounds outlasted 120 s there, every round ending).
    let stall = Reliability.seconds(120, full: 1800)
    let drove = await blockingWait(seconds: stall) { _ in
      var last = progress.load(ordering: .relaxed)
      var moved = DispatchTime.now()
      while driver.wait(timeout: .now() + 1) == .timedOut {
        let now = progress.load(ordering: .relaxed)
        if now != last {
          last = now
          moved = .now()
        } else if DispatchTime.now() > moved + stall {
          return false
        }
      }
      return true
    }
    #expect(drove, "seed \(seed): the driver hung (no round ended for \(Int(stall)) s)")
    let completed = await allCompleted.wait(seconds: Reliability.seconds(60, full: 600))
    #expect(completed, "seed \(seed): \(allCompleted.left) items never completed")
    #expect(await drained(queue), "seed \(seed): unfinished work left")
    #expect(await drained(blocked), "seed \(seed): unfinished work left")

    var wrong = problems.withLock { $0 }
    for (index, round) in results.withLock({ $0 }).enumerated() where wrong.count < 20 {
      let state = round.work.state
      let value = round.work.result.flatMap { try? $0.get() }
      let label = "round \(index) (\(round.moment), \(round.kind)): state \(state), ran \(ran[index])"
      switch round.moment {
      case .beforeAdd, .queued:
        if state != .cancelled || ran[index] != 0 { wrong.append(label) }
      case .running:
        if state != .cancelled || ran[index] != 1 { wrong.append(label) }
        if round.kind != .sync && hooks[index] != 1 { wrong.append(label + ", cancel hook ×\(hooks[index])") }
      case .finishing:
        let ok = (state == .finished && value == index) || state == .cancelled
        if !ok || ran[index] != 1 { wrong.append(label) }
      case .finished:
        if state != .finished || value != index || ran[index] != 1 { wrong.append(label) }
      }
    }
    #expect(wrong.isEmpty, "seed \(seed): \(wrong)")
    #expect(completions.mismatches { _ in 1 }.isEmpty, "seed \(seed): a completion handler ran ≠ once")
    #expect((0..<rounds).filter { hooks[$0] > 1 }.isEmpty, "seed \(seed): a cancel hook ran twice")
    print(
      "reliability cancellation: \(rounds) rounds, \(wrong.count) wrong, "
        + "completions ≠ 1: \(completions.mismatches { _ in 1 }.count), hooks > 1: "
        + "\((0..<rounds).filter { hooks[$0] > 1 }.count), unfinished \(queue.unfinishedCount) (seed \(seed))")
    #expect(queue.unfinishedCount == 0 && blocked.unfinishedCount == 0)
  }
}
