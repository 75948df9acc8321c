import Synchronization
import Testing

@testable import Spindle

/// The one bound behind both bounded task groups and `concurrentMap`/`concurrentForEach`.
@Suite struct BoundedGroupCoreTests {
  @Test func makeRoomKeepsFinishedResultsForNextInCompletionOrder() async {
    let results = await withTaskGroup(of: Int.self) { group in
      var core = BoundedGroupCore(group, maxConcurrent: 2)
      var seen: [Int] = []
      for value in 0..<10 {
        await core.makeRoom()
        core.group.addTask { value }
        core.childAdded()
        while let collected = core.popCollected() { seen.append(collected) }
      }
      while let value = await core.next() { seen.append(value) }
      #expect(core.isEmpty)
      #expect(await core.next() == nil)
      return seen
    }
    #expect(results.sorted() == Array(0..<10))
  }

  @Test func failingChildSurfacesFromMakeRoomAndFreesItsSlot() async throws {
    struct Failure: Error {}
    try await withThrowingTaskGroup(of: Int.self) { group in
      var core = BoundedGroupCore(group, maxConcurrent: 1)
      try await core.makeRoom()
      core.group.addTask { throw Failure() }
      core.childAdded()
      await #expect(throws: Failure.self) { try await core.makeRoom() }
      // The failed child's slot is free again: the next addition needs no wait.
      try await core.makeRoom()
      core.group.addTask { 7 }
      core.childAdded()
      #expect(try await core.next() == 7)
      #expect(try await core.next() == nil)
    }
  }

  @Test func waitForAllDropsCollectedResults() async {
    await withTaskGroup(of: Int.self) { group in
      var core = BoundedGroupCore(group, maxConcurrent: 1)
      for value in 0..<3 {
        await core.makeRoom()
        core.group.addTask { value }
        core.childAdded()
      }
      await core.waitForAll()
      #expect(core.isEmpty)
      #expect(await core.next() == nil)
    }
  }

  @Test func concurrentMapAndForEachHonourTheBoundThroughTheCore() async throws {
    for limit in [1, 3, 16] {
      let gauge = ConcurrencyGauge()
      let mapped = try await (0..<200).concurrentMap(maxConcurrent: limit) { value -> Int in
        gauge.enter()
        await Task.yield()
        gauge.leave()
        return value * 3
      }
      #expect(mapped == (0..<200).map { $0 * 3 })
      #expect(gauge.maximum <= limit)
      let visited = Counter()
      try await (0..<200).concurrentForEach(maxConcurrent: limit) { value in
        gauge.enter()
        visited.add(value)
        gauge.leave()
      }
      #expect(visited.value == (0..<200).reduce(0, +))
      #expect(gauge.maximum <= limit)
    }
  }

  @Test func concurrentMapStartsNothingOnceCancelled() async {
    let started = Counter()
    let task = Task {
      try await (0..<1_000).concurrentMap(maxConcurrent: 2) { value -> Int in
        started.add(1)
        if value == 0 { withUnsafeCurrentTask { $0?.cancel() } }
        try await Task.sleep(for: .seconds(30))
        return value
      }
    }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(started.value <= 2, "at most the children already running when it was cancelled")
  }
}
