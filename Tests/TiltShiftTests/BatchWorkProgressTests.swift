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
    // `watching` needs the cooperative pool to see the end, which other suites can starve for tens of seconds:
    // the generous default bound returns as soon as it has.
    guard await eventually({ ended.withLock { $0 } }) else {
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
    // When a file's report comes, its three items are done: at least 3 per file ended (exactly, one file at a
    // time, since the next starts after the report). The batch's queue falls idle between files and its own
    // progress starts again; the batch's must count on regardless.
    let atReports = Locked<[(files: Int, items: Int)]>([])
    let run: (TiltShiftBatch) async -> BatchSummary = { batch in
      await batch.run { _, progress in
        atReports.withLock { $0.append((progress.completed, batch.workProgress.completed)) }
      }
    }
    guard let (seen, summary) = await Self.watch(batch, during: run) else {
      Issue.record("the stream did not end after the batch")
      return
    }
    #expect(summary.progress.succeeded == 6)
    #expect(summary.progress.failed == 1)
    Self.expectMonotonic(seen, total: 21)
    #expect(seen.last?.completed == 21, "the last value has every item: \(String(describing: seen.last))")
    for (files, items) in atReports.withLock({ $0 }) {
      if window == 1 {
        #expect(items == 3 * files, "\(files) files ended: \(items) items")
      } else {
        #expect(items >= 3 * files, "\(files) files ended: \(items) items")
      }
    }
    #expect(atReports.withLock { $0.count } == 7)
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

/// `String(reflecting: batch)`: what `spindle` prints on SIGQUIT.
@Suite struct BatchReportTests {
  @Test func theReportCountsFilesAndItemsThenShowsTheQueue() async throws {
    let folder = try TiltShiftBatchTests.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try TiltShiftBatchTests.items(3, in: folder)
    let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 2))
    let before = String(reflecting: batch).split(separator: "\n")
    #expect(before.first == "TiltShiftBatch: 0 of 3 files ended, 0 of 9 work items completed")
    #expect(before.dropFirst().first?.hasPrefix("WorkQueue 'tiltshift': width 2") == true, "\(before)")
    _ = await batch.run()
    let after = String(reflecting: batch)
    #expect(after.hasPrefix("TiltShiftBatch: 3 of 3 files ended, 9 of 9 work items completed\n"), "\(after)")
    #expect(after.contains("WorkQueue 'tiltshift': width 2, 0 running, 0 ready, 0 unfinished"), "\(after)")
  }
}
