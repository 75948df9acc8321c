import Dispatch
import Testing

@testable import Spindle

/// A completion handler sees its work's queue without that work: handlers registered on work that has ended but
/// that its engine has not retired yet wait for the retire instead of running at once.
@Suite struct WorkRetireOrderTests {
  @Test func aHandlerAddedToEndedButUnretiredWorkRunsAfterItsQueueDroppedIt() throws {
    let queue = WorkQueue(name: "retire-order", maxConcurrent: 1)
    queue.suspend()
    struct Failure: Error {}
    let failing = queue.add { () throws -> Int in throw Failure() }
    let dependent = queue.add(after: failing) { $0 + 1 }
    // `failing`'s handlers run before its engine retires `dependent`, which its failure ended (propagation): a
    // handler registered on `dependent` from there meets ended, unretired work.
    let seen = Locked<(ended: Bool, unfinished: Int, completed: Int)?>(nil)
    let done = DispatchSemaphore(value: 0)
    failing.onCompletion(on: DispatchQueue(label: "retire-order.handlers")) { _ in }
    failing.whenCompleteErased {
      let ended = dependent.state == .failed
      // The handler `onCompletion` builds on, which checks the queue on the thread that runs it.
      dependent.whenCompleteErased {
        seen.withLock { $0 = (ended, queue.unfinishedCount, queue.progress.completed) }
        done.signal()
      }
    }
    queue.resume()
    #expect(done.wait(timeout: .now() + .seconds(60)) == .success)
    let result = try #require(seen.withLock { $0 })
    #expect(result.ended, "the dependent had ended when the handler was added")
    #expect(result.unfinished == 0, "the handler ran while the queue still counted the dependent")
    #expect(result.completed == 2)
  }

  /// Handlers added from another thread at every moment around an item's end (before, during, after) all run
  /// once, and each finds the queue no longer counting the item.
  @Test func handlersAddedAtAnyMomentSeeTheQueueWithoutTheirWork() {
    let rounds = 300
    let problems = Locked<[String]>([])
    let handled = DispatchSemaphore(value: 0)
    for round in 0..<rounds {
      let queue = WorkQueue(name: "retire-order.\(round)", maxConcurrent: 1)
      let spin = round % 50
      let work = queue.add { () -> Int in
        for _ in 0..<spin { _ = WorkContext.current?.isCancelled }
        return round
      }
      let check: @Sendable (String) -> Void = { label in
        let unfinished = queue.unfinishedCount
        if unfinished != 0 { problems.withLock { $0.append("round \(round) \(label): unfinished \(unfinished)") } }
        handled.signal()
      }
      // One handler added from another thread while the body may be running or ending, one here after a spin.
      // `whenCompleteErased` (which `onCompletion` builds on) checks on the thread that runs the handler.
      DispatchQueue.global().async { work.whenCompleteErased { check("racing") } }
      for _ in 0..<(round % 7) * 20 { _ = work.state }
      work.whenCompleteErased { check("after a spin") }
    }
    var arrived = 0
    for _ in 0..<(2 * rounds) where handled.wait(timeout: .now() + .seconds(60)) == .success { arrived += 1 }
    #expect(arrived == 2 * rounds, "every handler runs")
    #expect(problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0 }.prefix(5))")
  }
}
