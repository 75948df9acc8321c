import Synchronization
import Testing

@testable import Spindle

@Suite struct InFlightLimitTests {
  @Test func waitersGetSlotsInArrivalOrder() async throws {
    let limit = InFlightLimit(limit: 1)
    await limit.acquire()
    let order = Locked<[Int]>([])
    var waiters: [Task<Void, Never>] = []
    for index in 0..<5 {
      waiters.append(
        Task {
          await limit.acquire()
          order.withLock { $0.append(index) }
          limit.release()
        })
      try await waitUntil { limit.waiting == index + 1 }
    }
    limit.release()
    for waiter in waiters { await waiter.value }
    #expect(order.withLock { $0 } == [0, 1, 2, 3, 4])
    #expect(limit.inFlight == 0)
  }

  @Test func cancelledWaiterLeavesTheLineAndOthersKeepTheirTurn() async throws {
    let limit = InFlightLimit(limit: 1)
    await limit.acquire()
    let leaver = Task { await limit.acquireUnlessCancelled() }
    try await waitUntil { limit.waiting == 1 }
    let stayer = Task { await limit.acquireUnlessCancelled() }
    try await waitUntil { limit.waiting == 2 }
    leaver.cancel()
    #expect(await leaver.value == false)
    #expect(limit.waiting == 1)
    limit.release()
    #expect(await stayer.value == true)
    #expect(limit.inFlight == 1)
    limit.release()
    #expect(limit.inFlight == 0)
  }

  @Test func alreadyCancelledCallerGetsNoSlot() async {
    let limit = InFlightLimit(limit: 2)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return await limit.acquireUnlessCancelled()
    }
    #expect(await task.value == false)
    #expect(limit.inFlight == 0)
  }
}
