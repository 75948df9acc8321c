import Dispatch
import Spindle
import Testing

/// One test per method of the seed, written the way the seed's README uses them.
@Suite struct ConcurrentActionExecutorParityTests {
  @Test func executeWithInputDeliversTheOutputToTheCompletion() async {
    let sut = ConcurrentActionExecutor<Int, String> { "value \($0)" }
    let output = await withCheckedContinuation { continuation in
      sut.execute(7) { continuation.resume(returning: $0) }
    }
    #expect(output == "value 7")
  }

  @Test func executeWithoutInputDeliversTheOutputToTheCompletion() async {
    let sut = ConcurrentActionExecutor<Void, Int> { 42 }
    let output = await withCheckedContinuation { continuation in
      sut.execute { continuation.resume(returning: $0) }
    }
    #expect(output == 42)
  }

  @Test func executeAndDeliverOnMainWithInputRunsTheCompletionOnTheMainActor() async {
    let sut = ConcurrentActionExecutor<Int, Int> { $0 * 2 }
    let (output, onMain) = await withCheckedContinuation { continuation in
      sut.executeAndDeliverOnMain(21) { output in
        continuation.resume(returning: (output, MainQueueProbe.isOnMainQueue))
      }
    }
    #expect(output == 42)
    #expect(onMain)
  }

  @Test func executeAndDeliverOnMainWithoutInputRunsTheCompletionOnTheMainActor() async {
    let sut = ConcurrentActionExecutor<Void, String> { "done" }
    let (output, onMain) = await withCheckedContinuation { continuation in
      sut.executeAndDeliverOnMain { output in
        MainActor.assertIsolated()
        continuation.resume(returning: (output, MainQueueProbe.isOnMainQueue))
      }
    }
    #expect(output == "done")
    #expect(onMain)
  }

  @Test func asyncExecuteWithInputReturnsTheOutput() async {
    let sut = ConcurrentActionExecutor<[Int], Int> { $0.reduce(0, +) }
    let output = await sut.execute([1, 2, 3, 4])
    #expect(output == 10)
  }

  @Test func asyncExecuteWithoutInputReturnsTheOutput() async {
    let sut = ConcurrentActionExecutor<Void, [String]> { ["a", "b"] }
    let output = await sut.execute()
    #expect(output == ["a", "b"])
  }

  @Test @MainActor func mainActorExecuteAndDeliverOnMainWithInputResumesOnTheMainActor() async {
    let sut = ConcurrentActionExecutor<Int, Bool> { _ in BlockingExecutor.shared.isCurrent }
    let ranOnBlockingThread = await sut.executeAndDeliverOnMain(1)
    MainActor.assertIsolated()
    #expect(ranOnBlockingThread)
    #expect(MainQueueProbe.isOnMainQueue)
  }

  @Test @MainActor func mainActorExecuteAndDeliverOnMainWithoutInputResumesOnTheMainActor() async {
    let sut = ConcurrentActionExecutor<Void, Int> { 5 }
    let output = await sut.executeAndDeliverOnMain()
    MainActor.assertIsolated()
    #expect(output == 5)
    #expect(MainQueueProbe.isOnMainQueue)
  }

  @Test func seedStyleInitialisersCompileUnchanged() async {
    // As in the seed's README: explicit labels, a named function, an explicit closure type.
    let byFunction = ConcurrentActionExecutor<Int, Int>(priority: .high, action: double)
    let byClosure = ConcurrentActionExecutor<String, Int>(action: { (text: String) -> Int in text.count })
    let output = await withCheckedContinuation { continuation in
      byFunction.execute(4, completion: { continuation.resume(returning: $0) })
    }
    #expect(output == 8)
    #expect(await byClosure.execute("four") == 4)
  }

  @Test func seedInitialiserKeepsPriorityAndAction() async {
    let sut = ConcurrentActionExecutor<Int, Int>(priority: .low) { $0 + 1 }
    #expect(sut.priority == .low)
    #expect(sut.action(1) == 2)
    #expect(ConcurrentActionExecutor<Int, Int> { $0 }.priority == .high)
  }
}

private func double(_ value: Int) -> Int { value * 2 }

/// Tells whether code runs on the main dispatch queue, which drives the main actor on every platform.
enum MainQueueProbe {
  private static let key: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
  }()

  static var isOnMainQueue: Bool { DispatchQueue.getSpecific(key: key) == true }
}
