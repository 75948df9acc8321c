import Dispatch
import Synchronization
import Testing

@testable import Spindle

/// An object whose release the tests watch through weak references.
final class Token: Sendable {
  let id: Int
  init(_ id: Int = 0) { self.id = id }
}

@Suite("WorkQueue lifetime and races")
struct WorkQueueLifetimeTests {
  @Test("finished work releases its body and its captures")
  func releasesBody() async throws {
    let queue = WorkQueue(name: "release")
    weak var weakToken: Token?
    let work: Work<Int>
    do {
      let token = Token(1)
      weakToken = token
      work = queue.add { token.id }
    }
    #expect(try await work.value == 1)
    #expect(await eventually { weakToken == nil })
  }

  @Test("async and callback bodies release their captures too")
  func releasesAsyncAndCallbackBodies() async throws {
    let queue = WorkQueue(name: "release-async")
    weak var weakAsync: Token?
    weak var weakCallback: Token?
    let first: Work<Int>
    let second: Work<Int>
    do {
      let asyncToken = Token(2)
      let callbackToken = Token(3)
      weakAsync = asyncToken
      weakCallback = callbackToken
      first = queue.add { () async in asyncToken.id }
      second = queue.addCallback { finish in finish(callbackToken.id) }
    }
    #expect(try await first.value == 2)
    #expect(try await second.value == 3)
    #expect(await eventually { weakAsync == nil && weakCallback == nil })
  }

  @Test("a dependent releases its inputs, and finished work releases its links to dependents")
  func releasesInputsAndLinks() async throws {
    let queue = WorkQueue(name: "links")
    weak var weakFirst: Work<Token>?
    weak var weakValue: Token?
    let last: Work<Int>
    do {
      let first = queue.add { Token(4) }
      weakFirst = first
      let middle = queue.add(after: first) { token in token.id }
      last = queue.add(after: middle) { $0 + 1 }
      weakValue = try await first.value
    }
    #expect(try await last.value == 5)
    try await queue.allFinished()
    #expect(await eventually { weakFirst == nil && weakValue == nil })
  }

  @Test("cancelled and propagated work release their bodies at once")
  func cancelledWorkReleases() async throws {
    let queue = WorkQueue(name: "cancel-release")
    queue.suspend()
    weak var weakRootToken: Token?
    weak var weakChildToken: Token?
    let child: Work<Int>
    do {
      let rootToken = Token(5)
      let childToken = Token(6)
      weakRootToken = rootToken
      weakChildToken = childToken
      let root = queue.add { rootToken.id }
      child = queue.add(after: root) { $0 + childToken.id }
      root.cancel()
    }
    #expect(child.state == .cancelled)
    #expect(weakRootToken == nil)
    #expect(weakChildToken == nil)
    queue.resume()
    try await queue.allFinished()
  }

  @Test("plain and callback work cancelled before it ran releases its body while its handle lives")
  func cancelledPlainWorkReleasesItsBodyWhileHeld() async throws {
    // Plain synchronous work keeps its body typed in the item (no wrapper closure); ending without running must
    // still release it at once, not when the handle goes.
    let queue = WorkQueue(name: "cancel-plain")
    queue.suspend()
    weak var weakToken: Token?
    weak var weakDependentToken: Token?
    weak var weakCallbackToken: Token?
    let work: Work<Int>
    let dependent: Work<Int>
    let callback: Work<Int>
    do {
      let token = Token(3)
      let dependentToken = Token(4)
      let callbackToken = Token(5)
      weakToken = token
      weakDependentToken = dependentToken
      weakCallbackToken = callbackToken
      work = queue.add { token.id }
      dependent = queue.add(dependencies: [work]) { dependentToken.id }
      callback = queue.addCallback { (finish: WorkFinish<Int>) in finish(callbackToken.id) }
    }
    #expect(weakToken != nil)
    #expect(weakCallbackToken != nil)
    work.cancel()
    callback.cancel()
    #expect(work.state == .cancelled)
    #expect(dependent.state == .cancelled)
    #expect(callback.state == .cancelled)
    #expect(weakToken == nil)
    #expect(weakDependentToken == nil)
    #expect(weakCallbackToken == nil)
    queue.resume()
    try await queue.allFinished()
  }

  @Test("an idle queue and its finished work are freed when dropped")
  func queueIsFreed() async throws {
    weak var weakQueue: WorkQueue?
    do {
      let queue = WorkQueue(name: "dropped")
      weakQueue = queue
      let work = queue.add { 1 }
      _ = try await work.value
      try await queue.allFinished()
    }
    #expect(await eventually { weakQueue == nil })
  }

  /// Items refer to their engine without retaining it; the engine holds itself while it has unfinished work. Drop
  /// the queue's handle while a body runs and work waits behind it: the engine must live on until that work is
  /// done (the dependents run, with the right values), and be freed then, even while handles to the finished work
  /// remain.
  @Test("the engine lives while its work is unfinished, and no longer")
  func engineLivesWhileWorkIsUnfinished() async throws {
    weak var weakEngine: WorkEngine?
    let gate = Gate()
    var handles: [Work<Int>] = []
    do {
      let queue = WorkQueue(name: "engine lifetime", maxConcurrent: 2)
      weakEngine = queue.engine
      let first = queue.add { () -> Int in
        gate.wait()
        return 1
      }
      var last = first
      for _ in 0..<50 { last = queue.add(after: last) { $0 + 1 } }
      let independent = (0..<20).map { index in queue.add { index } }
      handles = [first, last] + independent
    }
    // The handle is gone; the engine is not, and nothing ran past the gate.
    #expect(weakEngine != nil)
    #expect(handles[1].result == nil)
    gate.open()
    #expect(try await handles[1].value == 51)
    for (index, work) in handles.dropFirst(2).enumerated() { #expect(try await work.value == index) }
    // Finished work (whose handles this test still holds) does not keep the engine.
    #expect(await eventually { weakEngine == nil })
    #expect(handles[0].state == .finished)

    // A second burst on a live queue: the engine holds itself again, and the queue works as before.
    let queue = WorkQueue(name: "engine lifetime, two bursts")
    weakEngine = queue.engine
    #expect(try await queue.add { 1 }.value == 1)
    try await queue.allFinished()
    #expect(try await queue.add { 2 }.value == 2)
    #expect(weakEngine != nil)
  }

  @Test("cancel and finish race: every item ends exactly once, in a state its inputs allow")
  func cancelFinishRaces() async throws {
    let rounds = Stress.enabled ? 200 : 20
    let itemsPerRound = 200
    for round in 0..<rounds {
      let queue = WorkQueue(name: "race-\(round)", maxConcurrent: 1 + round % 3)
      let completions = Atomic<Int>(0)
      let ranAfterBadInput = Atomic<Int>(0)
      var works: [Work<Int>] = []
      for index in 0..<itemsPerRound {
        let work: Work<Int>
        if index >= 2 && index % 3 != 0 {
          let a = works[index - 1]
          let b = works[index / 2]
          work = queue.add(after: a, b) { x, y in
            if a.state != .finished || b.state != .finished { ranAfterBadInput.add(1, ordering: .relaxed) }
            return x &+ y
          }
        } else if index % 5 == 0 {
          work = queue.add { () async throws -> Int in
            try Task.checkCancellation()
            return index
          }
        } else {
          work = queue.add { index }
        }
        work.onCompletion(on: .global()) { _ in completions.add(1, ordering: .relaxed) }
        works.append(work)
      }
      // Cancel from several threads while the queue runs.
      let victims = works.enumerated().filter { $0.offset % 7 == round % 7 }.map(\.element)
      await withTaskGroup(of: Void.self) { group in
        for chunk in 0..<2 {
          group.addTask {
            for (index, victim) in victims.enumerated() where index % 2 == chunk { victim.cancel() }
          }
        }
        group.addTask { queue.cancelAll() }
      }
      try await queue.allFinished()
      #expect(await eventually { completions.load(ordering: .relaxed) == itemsPerRound })
      #expect(ranAfterBadInput.load(ordering: .relaxed) == 0)
      for work in works {
        #expect(work.state.isFinal)
        if case .finished = work.state { #expect(work.result != nil) }
      }
      #expect(queue.unfinishedCount == 0)
      #expect(queue.runningCount == 0)
      // Completion handlers ran exactly once: no more arrive later.
      #expect(completions.load(ordering: .relaxed) == itemsPerRound)
    }
  }

  @Test("suspend and resume under load keep the width and run everything once")
  func suspendResumeStress() async throws {
    let queue = WorkQueue(name: "toggle", maxConcurrent: 2)
    let count = Stress.enabled ? 50_000 : 5_000
    let ran = Atomic<Int>(0)
    let current = Atomic<Int>(0)
    let highWater = Atomic<Int>(0)
    let adder = Task.detached {
      for index in 0..<count {
        queue.add(priority: WorkPriority.allCases[index % 5]) {
          let now = current.add(1, ordering: .sequentiallyConsistent).newValue
          highWater.max(now, ordering: .sequentiallyConsistent)
          ran.add(1, ordering: .relaxed)
          current.subtract(1, ordering: .sequentiallyConsistent)
        }
      }
    }
    for _ in 0..<50 {
      queue.suspend()
      await Task.yield()
      queue.resume()
    }
    await adder.value
    queue.resume()
    try await queue.allFinished()
    #expect(ran.load(ordering: .relaxed) == count)
    #expect(highWater.load(ordering: .sequentiallyConsistent) <= 2)
  }
}
