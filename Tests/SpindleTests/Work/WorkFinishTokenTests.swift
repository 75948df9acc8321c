import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// A worker reuses a callback body's `finish` token when nothing else kept a copy (see `FinishToken`). These tests try to
/// break that: copies kept after the call, handed to other threads, called twice, dropped, called late by a thread that
/// hammers stale copies while later bodies run on the same workers.
@Suite("WorkQueue callback bodies: finish tokens reused by a worker")
struct WorkFinishTokenTests {
  /// What a callback body does with its `finish`.
  enum Behaviour: CaseIterable {
    /// Calls it before returning.
    case inline
    /// Calls it before returning, and keeps a copy (a stale caller calls that copy again later).
    case inlineKeep
    /// Hands it to another thread, which calls it.
    case handOff
    /// Hands it to another thread, which calls it and keeps a copy.
    case handOffKeep
    /// Hands it to another thread, which calls it and lets go of it, while the body waits until it did.
    case handOffWait
    /// Lets go of it without calling it.
    case drop
    /// Calls it with an error.
    case error
    /// Calls it twice before returning (the second call is reported and ignored).
    case twice
  }

  struct Failure: Error, Equatable { let index: Int }

  /// Random sequences of callback bodies against the model: each work ends with what its first `finish` call (or the
  /// drop) says, whatever stale copies of earlier `finish` handles do meanwhile. A token reused while a copy was kept
  /// would let a stale call complete a later body's work with -1.
  @Test(
    "callback bodies end as their own finish says, while stale copies of earlier ones are called",
    arguments: [(1, UInt64(11)), (1, 12), (2, 13), (2, 14), (4, 15)])
  func modelAgainstStaleCopies(width: Int, seed: UInt64) async throws {
    let reports = MisuseRecorder.shared  // repeated calls are reported here, not on standard error
    let queue = WorkQueue(name: "finish-tokens-\(seed)", maxConcurrent: width)
    var random = SeededGenerator(seed: seed)
    let count = 300
    let kept = Locked<[WorkFinish<Int>]>([])
    let staleCalls = Atomic<Int>(0)
    let stop = Atomic<Bool>(false)
    // The stale caller: calls each kept copy once, as soon as it appears, while later bodies run. A thread of its own:
    // looping on a Dispatch thread, it kept the hand-offs waiting for a thread of the pool.
    let staleDone = DispatchSemaphore(value: 0)
    PlatformThread.start(name: "stale-finish-caller") {
      var called = 0
      while !stop.load(ordering: .acquiring) || called < kept.withLock({ $0.count }) {
        let next: WorkFinish<Int>? = kept.withLock { called < $0.count ? $0[called] : nil }
        if let next {
          next(-1)
          called += 1
          staleCalls.add(1, ordering: .relaxed)
        } else {
          usleepShort()
        }
      }
      staleDone.signal()
    }
    var expected: [Result<Int, any Error>?] = []
    var repeatedCalls = Array(repeating: 0, count: count)  // calls each work's finish gets after its first
    var works: [Work<Int>] = []
    for index in 0..<count {
      let behaviour = Behaviour.allCases.randomElement(using: &random)!
      let work: Work<Int> = queue.addCallback(name: "token-\(seed)-\(index)") { (finish: WorkFinish<Int>) in
        switch behaviour {
        case .inline:
          finish(index)
        case .inlineKeep:
          finish(index)
          kept.withLock { $0.append(finish) }
        case .handOff:
          DispatchQueue.global().async { finish(index) }
        case .handOffKeep:
          DispatchQueue.global().async {
            finish(index)
            kept.withLock { $0.append(finish) }
          }
        case .handOffWait:
          let called = DispatchSemaphore(value: 0)
          DispatchQueue.global().async {
            finish(index)
            called.signal()
          }
          called.wait()
        case .drop:
          break
        case .error:
          finish(Failure(index: index))
        case .twice:
          finish(index)
          finish(-2)
        }
      }
      works.append(work)
      switch behaviour {
      case .inlineKeep, .handOffKeep, .twice: repeatedCalls[index] = 1
      default: break
      }
      switch behaviour {
      case .drop: expected.append(nil)
      case .error: expected.append(.failure(Failure(index: index)))
      default: expected.append(.success(index))
      }
    }
    try await queue.allFinished()
    stop.store(true, ordering: .releasing)
    #expect(staleDone.wait(timeout: .now() + 90) == .success, "the stale caller finished")
    for (index, work) in works.enumerated() {
      let result = work.result
      switch expected[index] {
      case nil:
        #expect(throws: WorkFinishDroppedError.self, "work \(index) dropped its finish") { try result?.get() }
      case .failure:
        #expect(throws: Failure(index: index), "work \(index)") { try result?.get() }
      case .success(let value):
        #expect(try result?.get() == value, "work \(index)")
      }
    }
    #expect(staleCalls.load(ordering: .relaxed) == kept.withLock { $0.count })
    // Every later call was reported against the work whose `finish` it was, not a later body's.
    for index in 0..<count {
      let name = "'token-\(seed)-\(index)'"
      #expect(reports.messages(containing: name).count == repeatedCalls[index], "reports for \(name)")
    }
  }

  /// The worker keeps the token it reuses: it must not keep the finished work (and its value) alive with it.
  @Test("a reused finish token does not keep the finished work's value alive")
  func reusedTokenLetsGoOfTheWork() async throws {
    let queue = WorkQueue(name: "token-lets-go", maxConcurrent: 1)
    let gate = SpindleTestSupport.Gate()
    let released = Atomic<Bool>(false)
    var blocker: Work<Bool>? = nil
    do {
      // Added together at width 1: the worker that completes the first goes straight on to the second, which holds it.
      let work: Work<DeinitProbe> = queue.addCallback { (finish: WorkFinish<DeinitProbe>) in
        finish(DeinitProbe { released.store(true, ordering: .relaxed) })
      }
      blocker = queue.add { gate.wait() }
      _ = work
    }
    #expect(
      await eventually { released.load(ordering: .relaxed) },
      "the finished work's value was released while its worker, holding the token, runs on")
    gate.open()
    #expect(try await blocker?.value == true)
  }
}
