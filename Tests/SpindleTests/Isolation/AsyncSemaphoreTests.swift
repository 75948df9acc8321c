import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

@Suite struct AsyncSemaphoreTests {
  @Test func issueShape() async {
    // The issue's shape (one line there, joined by semicolons, which the linter splits).
    let permits = AsyncSemaphore(value: 3)
    await permits.wait()
    permits.signal()
    #expect(permits.availablePermits == 3)
  }

  @Test func permitsAreNeverExceeded() async throws {
    let permits = AsyncSemaphore(value: 3)
    let gauge = ConcurrencyGauge()
    let tasks = Stress.scaled(60)
    await withTaskGroup(of: Void.self) { group in
      for i in 0..<tasks {
        group.addTask {
          let body = {
            gauge.enter()
            for _ in 0..<5 { await Task.yield() }
            gauge.leave()
          }
          if i.isMultiple(of: 2) {
            await permits.wait()
            await body()
            permits.signal()
          } else {
            try? await permits.withPermit { await body() }
          }
        }
      }
    }
    #expect(gauge.maximum <= 3)
    #expect(gauge.maximum >= 1)
    #expect(permits.availablePermits == 3)
    #expect(permits.waiterCount == 0)
  }

  @Test func waitersAreServedFirstInFirstOut() async throws {
    let permits = AsyncSemaphore(value: 0)
    let order = Isolated([Int]())
    var tasks: [Task<Void, Never>] = []
    for i in 0..<8 {
      tasks.append(
        Task {
          await permits.wait()
          order.write { $0.append(i) }
        })
      #expect(await eventually { permits.waiterCount == i + 1 })
    }
    #expect(!permits.tryWait(), "a free permit must not jump the queue")
    for i in 0..<8 {
      permits.signal()
      #expect(await eventually { order.read(\.count) == i + 1 })
    }
    for task in tasks { await task.value }
    #expect(order.read { $0 } == Array(0..<8))
  }

  @Test func cancelledWaiterThrowsAndConsumesNoPermit() async throws {
    let permits = AsyncSemaphore(value: 0)
    let waiter = Task { try await permits.waitUnlessCancelled() }
    #expect(await eventually { permits.waiterCount == 1 })
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(permits.waiterCount == 0)
    permits.signal()
    #expect(permits.availablePermits == 1)
    #expect(permits.tryWait())
  }

  @Test func alreadyCancelledTaskTakesNoFreePermit() async {
    let permits = AsyncSemaphore(value: 2)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await permits.withPermit { 42 }
    }
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(permits.availablePermits == 2)
  }

  @Test func cancellationRacingSignalNeverLosesOrLeaksAPermit() async throws {
    for _ in 0..<Stress.scaled(200) {
      let permits = AsyncSemaphore(value: 0)
      let waiter = Task { try await permits.waitUnlessCancelled() }
      #expect(await eventually { permits.waiterCount == 1 })
      let signalled = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        permits.signal()
        signalled.signal()
      }
      waiter.cancel()
      let held = (try? await waiter.value) != nil ? 1 : 0
      await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
          signalled.wait()
          continuation.resume()
        }
      }
      // Exactly one permit exists: either the waiter holds it or it is free again.
      #expect(held + permits.availablePermits == 1)
      #expect(permits.waiterCount == 0)
    }
  }

  @Test func tryWaitTakesOnlyFreePermits() {
    let permits = AsyncSemaphore(value: 1)
    #expect(permits.tryWait())
    #expect(!permits.tryWait())
    permits.signal()
    #expect(permits.tryWait())
  }

  @Test func withPermitReturnsTheResultAndSignalsOnThrow() async throws {
    struct Failure: Error {}
    let permits = AsyncSemaphore(value: 1)
    #expect(try await permits.withPermit { 7 } == 7)
    await #expect(throws: Failure.self) { try await permits.withPermit { throw Failure() } }
    #expect(permits.availablePermits == 1)
  }

  @Test func destroyedSemaphoreResumesWaitersWithADedicatedError() async throws {
    let permits = AsyncSemaphore(value: 0)
    let cancellable = Task { try await permits.waitUnlessCancelled() }
    let plain = Task { await permits.wait() }
    #expect(await eventually { permits.waiterCount == 2 })
    // What `deinit` does; a waiting call keeps its semaphore alive, so deinit itself cannot be reached here.
    permits.failAllWaiters(with: .destroyed)
    await #expect(throws: AsyncSemaphoreError.destroyed) { try await cancellable.value }
    await plain.value
    await #expect(throws: AsyncSemaphoreError.destroyed) { try await permits.waitUnlessCancelled() }
    #expect(AsyncSemaphoreError.destroyed.description.contains("deallocated"))
  }

  @Test func cancelledWaiterLeavesTheLineAndOthersKeepTheirTurn() async throws {
    let permits = AsyncSemaphore(value: 1)
    await permits.wait()
    let order = Isolated([String]())
    let first = Task {
      await permits.wait()
      order.write { $0.append("first") }
    }
    #expect(await eventually { permits.waiterCount == 1 })
    let leaver = Task { try await permits.waitUnlessCancelled() }
    #expect(await eventually { permits.waiterCount == 2 })
    let last = Task {
      try await permits.waitUnlessCancelled()
      order.write { $0.append("last") }
    }
    #expect(await eventually { permits.waiterCount == 3 })
    leaver.cancel()
    await #expect(throws: CancellationError.self) { try await leaver.value }
    #expect(permits.waiterCount == 2)
    #expect(permits.availablePermits == 0, "the leaver gave back nothing it did not have")
    permits.signal()
    await first.value
    #expect(order.read { $0 } == ["first"])
    permits.signal()
    try await last.value
    #expect(order.read { $0 } == ["first", "last"])
    permits.signal()
    #expect(permits.availablePermits == 1)
    #expect(permits.waiterCount == 0)
  }

  @Test func randomCancellationsNeverBreakTheBoundOrLosePermits() async throws {
    let permitCount = 3
    let permits = AsyncSemaphore(value: permitCount)
    let gauge = ConcurrencyGauge()
    let admitted = Counter()
    let cancelled = Counter()
    let tasks = Stress.scaled(200)
    var handles: [Task<Void, Never>] = []
    for index in 0..<tasks {
      handles.append(
        Task {
          do {
            try await permits.waitUnlessCancelled()
          } catch {
            #expect(error is CancellationError)
            cancelled.add(1)
            return
          }
          admitted.add(1)
          gauge.enter()
          for _ in 0..<(index % 3) { await Task.yield() }
          gauge.leave()
          permits.signal()
        })
      if index.isMultiple(of: 3) { handles[index / 2].cancel() }
    }
    for handle in handles { await handle.value }
    #expect(admitted.value + cancelled.value == tasks)
    #expect(admitted.value > 0)
    #expect(gauge.maximum <= permitCount)
    #expect(permits.availablePermits == permitCount, "every permit came back, none was minted")
    #expect(permits.waiterCount == 0)
    // And the semaphore still works as new.
    for _ in 0..<permitCount { #expect(permits.tryWait()) }
    #expect(!permits.tryWait())
  }

  @Test func cancellationBeforeQueueingTakesAHandedOverPermitAndPassesItOn() async throws {
    // Many rounds of: a waiter registers, a signal and a cancellation race its queueing.
    for _ in 0..<Stress.scaled(300) {
      let permits = AsyncSemaphore(value: 0)
      let waiter = Task { try await permits.waitUnlessCancelled() }
      let signaller = Task.detached { permits.signal() }
      waiter.cancel()
      let held = (try? await waiter.value) != nil ? 1 : 0
      await signaller.value
      #expect(held + permits.availablePermits == 1)
      #expect(permits.waiterCount == 0)
    }
  }

  @Test func uncontendedFastPathKeepsTheCount() async throws {
    let permits = AsyncSemaphore(value: 2)
    await permits.wait()
    #expect(permits.availablePermits == 1)
    #expect(try await permits.withPermit { permits.availablePermits } == 0)
    #expect(permits.availablePermits == 1)
    permits.signal()
    permits.signal()
    #expect(permits.availablePermits == 3, "extra signals raise the count, as with DispatchSemaphore")
  }

  @Test func negativePermitCountStopsWithAMessage() async {
    await #expect(processExitsWith: .failure) {
      _ = AsyncSemaphore(value: -1)
    }
  }
}
