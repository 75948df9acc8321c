import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import TiltShift

/// `TiltShiftBatch.workProgress` and `workProgressUpdates`: the batch's progress in work items, from its queues.
@Suite struct BatchWorkProgressTests {
  /// Every value `batch.workProgressUpdates` gives while `run` runs, once the stream has ended (nil if it never
  /// ends within the bound).
  static func watch(
    _ batch: TiltShiftBatch,
    during run: (TiltShiftBatch) async -> BatchSummary
  ) async -> (seen: [WorkProgress], summary: BatchSummary)? {
    let seen = Locked<[WorkProgress]>([])
    let ended = Locked(false)
    let updates = batch.workProgressUpdates
    let watching = Task {
      for await progress in updates { seen.withLock { $0.append(progress) } }
      ended.withLock { $0 = true }
    }
    let summary = await run(batch)
    guard await eventually(within: 10, { ended.withLock { $0 } }) else {
      watching.cancel()
      return nil
    }
    return (seen.withLock { $0 }, summary)
  }

  static func expectMonotonic(_ seen: [WorkProgress], total: Int) {
    for (before, after) in zip(seen, seen.dropFirst()) {
      #expect(before.completed <= after.completed, "never decreases: \(before.completed) then \(after.completed)")
    }
    #expect(seen.allSatisfy { $0.total == total }, "the total is known up front")
    #expect(seen.allSatisfy { $0.completed <= $0.total })
  }

  @Test(arguments: [(jobs: 1, window: 1), (jobs: 2, window: 3)])
  func theStreamEndsWithEveryItemDoneAndNeverGoesBack(jobs: Int, window: Int) async throws {
    let folder = try TiltShiftBatchTests.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try TiltShiftBatchTests.items(7, in: folder)
    // A failing file's three items complete too (decode fails, filter and encode end with it).
    try Data("not an image".utf8).write(to: URL(fileURLWithPath: items[3].input))
    let configuration = BatchConfiguration(jobs: jobs, maxImagesInMemory: window)
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    #expect(batch.workProgress.total == 21)
    #expect(batch.workProgress.completed == 0)
    guard let (seen, summary) = await Self.watch(batch, during: { await $0.run() }) else {
      Issue.record("the stream did not end after the batch")
      return
    }
    #expect(summary.progress.succeeded == 6)
    #expect(summary.progress.failed == 1)
    Self.expectMonotonic(seen, total: 21)
    #expect(seen.first?.completed == 0)
    #expect(seen.last?.completed == 21, "the last value has every item: \(String(describing: seen.last))")
    // With one file at a time the codec queue falls idle while the filter runs, and its own progress starts
    // again; the batch's progress must count on regardless.
    #expect(Set(seen.map(\.completed)).count >= 7, "one value per file at least: \(seen.map(\.completed))")
    #expect(batch.workProgress.completed == 21)
  }

  @Test func filesRefusedOrCancelledBeforeStartingCountAsDone() async throws {
    let folder = try TiltShiftBatchTests.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try TiltShiftBatchTests.items(20, in: folder)
    let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 1, maxImagesInMemory: 1))
    guard
      let (seen, summary) = await Self.watch(
        batch,
        during: { batch in
          await batch.run { _, progress in
            if progress.completed == 2 { batch.cancel() }
          }
        })
    else {
      Issue.record("the stream did not end after the cancelled batch")
      return
    }
    #expect(summary.wasCancelled)
    #expect(summary.progress.cancelled > 0)
    Self.expectMonotonic(seen, total: 60)
    #expect(seen.last?.completed == 60, "\(String(describing: seen.last))")
  }

  @Test func aStreamAskedForAfterTheBatchGivesTheEndAndEnds() async throws {
    let folder = try TiltShiftBatchTests.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try TiltShiftBatchTests.items(2, in: folder)
    let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 2))
    _ = await batch.run()
    var values: [WorkProgress] = []
    for await progress in batch.workProgressUpdates { values.append(progress) }
    #expect(values.map(\.completed) == [6])
    #expect(values.map(\.total) == [6])
  }

  @Test func anEmptyBatchIsDoneAtOnce() async {
    let batch = TiltShiftBatch(items: [])
    _ = await batch.run()
    var values: [WorkProgress] = []
    for await progress in batch.workProgressUpdates { values.append(progress) }
    #expect(values.map(\.completed) == [0])
    #expect(values.first?.fractionCompleted == 1)
  }
}
