import Spindle
import SpindleTestSupport
import Synchronization
import Testing

private struct Failure: Error, Equatable {
  var index: Int
}

private func square(_ x: Int) async -> Int {
  for _ in 0..<((100 - x) % 5) { await Task.yield() }
  return x * x
}

@Suite struct BoundedTaskGroupTests {
  @Test func issueShape() async throws {
    let squares = try await (0..<100).concurrentMap(maxConcurrent: 4) { x in await square(x) }
    #expect(squares == (0..<100).map { $0 * $0 })
  }

  @Test func boundedGroupNeverExceedsItsLimitAndLosesNoResult() async {
    let gauge = ConcurrencyGauge()
    let total = Stress.scaled(40)
    let results = await withBoundedTaskGroup(maxConcurrent: 3, of: Int.self) { group in
      let limit = group.maxConcurrent
      #expect(limit == 3)
      for i in 0..<total {
        await group.addTask {
          gauge.enter()
          for _ in 0..<(i % 4 + 1) { await Task.yield() }
          gauge.leave()
          return i
        }
      }
      var collected: [Int] = []
      while let value = await group.next() { collected.append(value) }
      let empty = group.isEmpty
      #expect(empty)
      return collected
    }
    #expect(results.sorted() == Array(0..<total))
    #expect(gauge.maximum <= 3)
    #expect(gauge.maximum >= 1)
  }

  @Test func throwingGroupStopsAddingAndCancelsSiblingsOnFirstError() async {
    let started = Counter()
    let cancelledSiblings = Counter()
    let clock = ContinuousClock()
    let start = clock.now
    await #expect(throws: Failure(index: 2)) {
      try await withThrowingBoundedTaskGroup(maxConcurrent: 3, of: Int.self) { group in
        for i in 0..<50 {
          try await group.addTask {
            started.add(1)
            if i == 2 { throw Failure(index: 2) }
            do {
              try await Task.sleep(for: .seconds(600))
            } catch {
              cancelledSiblings.add(1)
              throw error
            }
            return i
          }
        }
        try await group.waitForAll()
      }
    }
    #expect(clock.now - start < .seconds(300), "siblings must be cancelled, not awaited for ten minutes")
    #expect(started.value <= 3, "no task may start once the group is full and one failed")
    #expect(cancelledSiblings.value == started.value - 1)
  }

  @Test func concurrentMapKeepsInputOrderAndItsLimit() async throws {
    let gauge = ConcurrencyGauge()
    let input = Array(0..<Stress.scaled(200))
    let output = try await input.concurrentMap(maxConcurrent: 4) { x -> String in
      gauge.enter()
      for _ in 0..<((x * 7) % 5) { await Task.yield() }
      gauge.leave()
      return "#\(x)"
    }
    #expect(output == input.map { "#\($0)" })
    #expect(gauge.maximum <= 4)
  }

  @Test func concurrentMapPropagatesTheFirstErrorAndCancelsTheRest() async {
    let started = Counter()
    let clock = ContinuousClock()
    let start = clock.now
    await #expect(throws: Failure(index: 5)) {
      _ = try await (0..<1_000).concurrentMap(maxConcurrent: 4) { x -> Int in
        started.add(1)
        if x == 5 { throw Failure(index: 5) }
        if x > 5 { try await Task.sleep(for: .seconds(600)) }
        return x
      }
    }
    #expect(clock.now - start < .seconds(300))  // the siblings sleep 600 s unless cancelled
    #expect(started.value < 20)
  }

  @Test func concurrentMapRespectsOuterCancellation() async {
    let started = Counter()
    let task = Task {
      try await (0..<1_000).concurrentMap(maxConcurrent: 2) { x -> Int in
        started.add(1)
        try await Task.sleep(for: .seconds(600))
        return x
      }
    }
    #expect(await eventually { started.value == 2 })
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(started.value == 2)
  }

  @Test func compactMapAndForEach() async throws {
    let evens = try await (0..<50).concurrentCompactMap(maxConcurrent: 3) { x -> Int? in
      x.isMultiple(of: 2) ? x : nil
    }
    #expect(evens == Array(stride(from: 0, to: 50, by: 2)))
    let sum = Counter()
    let gauge = ConcurrencyGauge()
    try await (1...100).concurrentForEach(maxConcurrent: 2) { x in
      gauge.enter()
      await Task.yield()
      gauge.leave()
      sum.add(x)
    }
    #expect(sum.value == 5_050)
    #expect(gauge.maximum <= 2)
  }

  @Test func cancelledGroupsAddNothingAndWaitForAllDrains() async throws {
    let ran = Counter()
    await withBoundedTaskGroup(maxConcurrent: 2, of: Void.self) { group in
      for _ in 0..<5 { await group.addTask { ran.add(1) } }
      await group.waitForAll()
      let empty = group.isEmpty
      #expect(empty)
      #expect(ran.value == 5)
      group.cancelAll()
      let added = await group.addTaskUnlessCancelled { ran.add(1) }
      let cancelled = group.isCancelled
      #expect(!added)
      #expect(cancelled)
    }
    try await withThrowingBoundedTaskGroup(maxConcurrent: 2, of: Int.self) { group in
      group.cancelAll()
      let added = try await group.addTaskUnlessCancelled { 1 }
      #expect(!added)
      #expect(try await group.next() == nil)
    }
    #expect(ran.value == 5)
  }

  @Test func concurrentForEachPropagatesTheFirstError() async {
    let started = Counter()
    await #expect(throws: Failure(index: 3)) {
      try await (0..<1_000).concurrentForEach(maxConcurrent: 3) { x in
        started.add(1)
        if x == 3 { throw Failure(index: 3) }
        if x > 3 { try await Task.sleep(for: .seconds(600)) }
      }
    }
    #expect(started.value < 20)
  }

  @Test func zeroConcurrencyStopsWithAMessage() async {
    await #expect(processExitsWith: .failure) {
      _ = try await [1, 2].concurrentMap(maxConcurrent: 0) { $0 }
    }
  }
}

@MainActor
@Suite struct IsolationOnTheMainActorTests {
  var log: [Int] = []

  @Test mutating func everyPrimitiveIsUsableFromTheMainActor() async throws {
    let doubled = try await [1, 2, 3].concurrentMap(maxConcurrent: 2) { $0 * 2 }
    let sum = await withBoundedTaskGroup(maxConcurrent: 2, of: Int.self) { group in
      for x in doubled { await group.addTask { x } }
      var sum = 0
      while let x = await group.next() {
        log.append(x)  // main-actor state touched inside the body
        sum += x
      }
      return sum
    }
    let thrown = try await withThrowingBoundedTaskGroup(maxConcurrent: 1, of: Int.self) { group in
      try await group.addTask { 5 }
      return try await group.next() ?? 0
    }
    let permits = AsyncSemaphore(value: 1)
    await permits.wait()
    permits.signal()
    try await permits.withPermit { log.append(0) }
    #expect(sum == 12)
    #expect(thrown == 5)
    #expect(log.sorted() == [0, 2, 4, 6])
  }
}
