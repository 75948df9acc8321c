import Foundation
import Spindle
import SpindleFoundation
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
    let deadline = ContinuousClock.now + .seconds(30)
    while progress.completedUnitCount < 4 && ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(2))
    }
    #expect(progress.completedUnitCount == 4)
    queue.suspend()
    let pending = queue.add { 1 }
    progress.cancel()
    await #expect(throws: CancellationError.self) { try await pending.value }
  }
}
