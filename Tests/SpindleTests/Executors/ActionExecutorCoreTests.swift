import Synchronization
import Testing

@testable import Spindle

/// The core both action executors delegate to: one bound, one way to start, skip and deliver.
@Suite struct ActionExecutorCoreTests {
  @Test func startSkipsWorkCancelledBeforeItGetsASlot() async throws {
    let core = ActionExecutorCore(
      executor: globalConcurrentExecutor,
      priority: .medium,
      maxInFlight: 1,
      outputQueue: nil
    )
    let ran = Counter()
    let skipped = Counter()
    let delivered = Counter()
    try await core.slots!.waitUnlessCancelled()  // hold the only slot
    #expect(core.inFlight == 1)
    let execution = core.start(
      { ran.add(1) },
      deliver: { delivered.add(1) },
      skipped: { skipped.add(1) }
    )
    #expect(await eventually { core.waiting == 1 })
    execution.cancel()
    await execution.wait()
    #expect(ran.value == 0 && delivered.value == 0 && skipped.value == 1)
    #expect(core.waiting == 0)
    core.slots!.signal()
    #expect(core.inFlight == 0)
    // With the slot free, the same call runs and delivers.
    await core.start({ ran.add(1) }, deliver: { delivered.add(1) }, skipped: { skipped.add(1) }).wait()
    #expect(ran.value == 1 && delivered.value == 1 && skipped.value == 1)
    #expect(core.inFlight == 0)
  }

  @Test func unboundedCoreHasNoSlotsAndStillSkipsCancelledStarts() async {
    let core = ActionExecutorCore(
      executor: globalConcurrentExecutor, priority: .low, maxInFlight: nil, outputQueue: nil)
    #expect(core.inFlight == nil && core.waiting == nil && core.maxInFlight == nil)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      await #expect(throws: CancellationError.self) { try await core.runThrowing { 1 } }
      #expect(await core.run { 2 } == 2, "the non-throwing form always runs")
    }
    await task.value
  }

  @Test func bothExecutorsShareTheBound() async throws {
    let plain = ConcurrentActionExecutor<Int, Int>(executor: globalConcurrentExecutor, maxInFlight: 2) { $0 + 1 }
    let throwing = ThrowingConcurrentActionExecutor<Int, Int>(executor: globalConcurrentExecutor, maxInFlight: 3) {
      $0 + 2
    }
    #expect(plain.maxInFlight == 2 && plain.core.maxInFlight == 2)
    #expect(throwing.maxInFlight == 3 && throwing.core.slots?.availablePermits == 3)
    #expect(await plain.execute(1) == 2)
    #expect(try await throwing.execute(1) == 3)
    #expect(plain.core.inFlight == 0 && throwing.core.inFlight == 0)
  }
}
