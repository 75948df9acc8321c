import Foundation
import Spindle
import SpindleFoundation
import SpindleTestSupport
import Testing

@Suite("WorkQueue Foundation Progress bridge")
struct WorkQueueProgressTests {
  @Test("a Foundation Progress follows the queue, and cancelling it cancels the queue's work")
  func followsTheQueue() async throws {
    let queue = WorkQueue(name: "progress", maxConcurrent: 1)
    queue.suspend()
    let items = (0..<4).map { index in queue.add { index } }
    let progress = queue.makeProgress()
    #expect(progress.totalUnitCount == 4)
    queue.resume()
    for item in items { _ = try await item.value }
    try await queue.allFinished()
    // The Progress follows the queue from a task of its own, which a starved cooperative pool can hold back for
    // tens of seconds: wait with the generous bound, which returns as soon as the count arrives.
    #expect(await eventually { progress.completedUnitCount == 4 }, "\(progress.completedUnitCount) of 4")
    queue.suspend()
    let pending = queue.add { 1 }
    progress.cancel()
    await #expect(throws: CancellationError.self) { try await pending.value }
  }
}
