import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

struct ActionFailure: Error, Equatable {
  let code: Int
}

@Suite struct ThrowingConcurrentActionExecutorTests {
  static func makeSUT(maxInFlight: Int? = nil) -> ThrowingConcurrentActionExecutor<Int, Int> {
    ThrowingConcurrentActionExecutor(maxInFlight: maxInFlight) { input in
      if input < 0 { throw ActionFailure(code: input) }
      return input * 2
    }
  }

  @Test func asyncFormReturnsOrRethrows() async throws {
    let sut = Self.makeSUT()
    #expect(try await sut.execute(4) == 8)
    await #expect(throws: ActionFailure(code: -1)) { try await sut.execute(-1) }
  }

  @Test func actionsRunOnTheSharedBlockingExecutorByDefault() async throws {
    let sut = ThrowingConcurrentActionExecutor<Void, Bool> { BlockingExecutor.shared.isCurrent }
    #expect(try await sut.execute())
    let viaCompletion = await withCheckedContinuation { c in sut.execute { c.resume(returning: $0) } }
    #expect(try viaCompletion.get())
    #expect(sut.executor === BlockingExecutor.shared)
    #expect(sut.maxInFlight == nil)
    #expect(sut.outputQueue == nil)
  }

  @Test func voidAsyncFormRethrows() async {
    let sut = ThrowingConcurrentActionExecutor<Void, Int> { throw ActionFailure(code: 9) }
    await #expect(throws: ActionFailure(code: 9)) { try await sut.execute() }
  }

  @Test func completionReceivesSuccessOrFailure() async throws {
    let sut = Self.makeSUT()
    let success = await withCheckedContinuation { c in sut.execute(3) { c.resume(returning: $0) } }
    let failure = await withCheckedContinuation { c in sut.execute(-5) { c.resume(returning: $0) } }
    #expect(try success.get() == 6)
    #expect(throws: ActionFailure(code: -5)) { try failure.get() }
  }

  @Test func voidCompletionForm() async throws {
    let sut = ThrowingConcurrentActionExecutor<Void, String> { "ok" }
    let result = await withCheckedContinuation { c in sut.execute { c.resume(returning: $0) } }
    #expect(try result.get() == "ok")
  }

  @Test func mainActorCompletionForms() async throws {
    let sut = Self.makeSUT()
    let (result, onMain) = await withCheckedContinuation { c in
      sut.executeAndDeliverOnMain(-2) { result in
        MainActor.preconditionIsolated()
        c.resume(returning: (result, MainQueueProbe.isOnMainQueue))
      }
    }
    #expect(throws: ActionFailure(code: -2)) { try result.get() }
    #expect(onMain)
    let void = ThrowingConcurrentActionExecutor<Void, Int> { 1 }
    let voidResult = await withCheckedContinuation { c in
      void.executeAndDeliverOnMain { result in c.resume(returning: result) }
    }
    #expect(try voidResult.get() == 1)
  }

  @Test @MainActor func mainActorAsyncForms() async throws {
    let sut = Self.makeSUT()
    #expect(try await sut.executeAndDeliverOnMain(10) == 20)
    MainActor.preconditionIsolated()
    await #expect(throws: ActionFailure(code: -3)) { try await sut.executeAndDeliverOnMain(-3) }
    let void = ThrowingConcurrentActionExecutor<Void, Int> { 2 }
    #expect(try await void.executeAndDeliverOnMain() == 2)
  }

  @Test func outputQueueReceivesTheResult() async {
    let queue = IdentifiableDispatchQueue(label: "test.throwing.output")
    let sut = ThrowingConcurrentActionExecutor<Int, Int>(outputQueue: queue) { $0 }
    let onQueue = await withCheckedContinuation { c in
      sut.execute(1) { _ in c.resume(returning: IDQ.currentQueueIs(queue)) }
    }
    #expect(onQueue)
  }

  @Test func cancelledBeforeStartingThrowsCancellationErrorWithoutRunning() async throws {
    let ran = Atomic<Int>(0)
    let sut = ThrowingConcurrentActionExecutor<Void, Int> { ran.add(1, ordering: .relaxed).newValue }
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await sut.execute()
    }
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(ran.load(ordering: .relaxed) == 0)
  }

  @Test func cancelledHandleWhileWaitingDeliversCancellationError() async throws {
    let gate = DispatchSemaphore(value: 0)
    let sut = ThrowingConcurrentActionExecutor<Int, Int>(maxInFlight: 1) { input in
      if input == 1 { gate.wait() }
      return input
    }
    let first = sut.execute(1) { _ in }
    try await waitUntil { sut.core.inFlight == 1 }
    let (stream, continuation) = AsyncStream.makeStream(of: Result<Int, any Error>.self)
    let second = sut.execute(2) { continuation.yield($0) }
    try await waitUntil { sut.core.waiting == 1 }
    second.cancel()
    var iterator = stream.makeAsyncIterator()
    let result = try #require(await iterator.next())
    #expect(throws: CancellationError.self) { try result.get() }
    gate.signal()
    await first.wait()
  }

  @Test func asyncCancellationRacesEndEveryCallExactlyOnce() async {
    let count = Stress.size(small: 1_000, large: 20_000)
    let ran = Atomic<Int>(0)
    let sut = ThrowingConcurrentActionExecutor<Int, Int>(maxInFlight: 2) { input in
      ran.add(1, ordering: .relaxed)
      return input
    }
    let tasks = (0..<count).map { index in Task { try await sut.execute(index) } }
    await Task.detached {
      for task in tasks.enumerated() where task.offset.isMultiple(of: 2) { task.element.cancel() }
    }.value
    var succeeded = 0
    var cancelled = 0
    for (index, task) in tasks.enumerated() {
      switch await task.result {
      case .success(let value):
        #expect(value == index)
        succeeded += 1
      case .failure(let error):
        #expect(error is CancellationError)
        cancelled += 1
      }
    }
    #expect(succeeded + cancelled == count)
    #expect(succeeded == ran.load(ordering: .relaxed))
    #expect(succeeded >= count / 2, "every call not cancelled succeeded")
    #expect(sut.core.inFlight == 0)
    #expect(sut.core.waiting == 0)
  }

  @Test func completionCancellationRacesCallEveryCompletionExactlyOnce() async {
    let count = Stress.size(small: 1_000, large: 20_000)
    let calls = Locked<[Int: Int]>([:])
    let sut = ThrowingConcurrentActionExecutor<Int, Int>(maxInFlight: 2) { $0 }
    let executions = (0..<count).map { index in
      sut.execute(index) { _ in calls.withLock { $0[index, default: 0] += 1 } }
    }
    await Task.detached {
      for execution in executions.enumerated() where execution.offset % 3 == 1 { execution.element.cancel() }
    }.value
    for execution in executions { await execution.wait() }
    let counts = calls.withLock { $0 }
    #expect(counts.count == count)
    #expect(counts.values.allSatisfy { $0 == 1 })
  }
}
