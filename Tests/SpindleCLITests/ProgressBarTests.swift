import Spindle
import Testing

@testable import SpindleCLI
@testable import TiltShift

/// The progress bar's line, drawn from the batch's work-item progress (no terminal, no parser).
@Suite struct ProgressBarTests {
  /// A `WorkProgress` of `completed` of `total` (its memberwise initialiser is internal to Spindle).
  static func work(_ completed: Int, of total: Int) -> WorkProgress {
    var progress = WorkQueue(name: "progress-bar-tests").progress
    progress.completed = completed
    progress.total = total
    return progress
  }

  static func files(_ succeeded: Int, of total: Int, pixels: Int, elapsed: Double) -> BatchProgress {
    var progress = BatchProgress(total: total)
    progress.succeeded = succeeded
    progress.pixels = pixels
    progress.elapsed = elapsed
    return progress
  }

  @Test func theFillPercentageAndETAComeFromTheWorkItems() {
    // 9 of 18 items done in 3 s: half the bar, 50 %, 3 s to go; files and MP/s from the file reports.
    let line = ProgressBar.line(
      work: Self.work(9, of: 18), files: Self.files(2, of: 6, pixels: 6_000_000, elapsed: 2),
      totalFiles: 6, elapsed: 3, columns: 90)
    #expect(line.hasPrefix(String(repeating: "█", count: 20) + String(repeating: "░", count: 20) + " 50% "))
    #expect(line.contains(" 2/6 files"))
    #expect(line.contains("3.0 MP/s"))
    #expect(line.hasSuffix("ETA 3.00 s"))
  }

  @Test func theBarFollowsItemsBetweenFileReports() {
    // Items move on while no file has ended yet: the bar moves, the file count stays.
    let before = ProgressBar.line(
      work: Self.work(2, of: 12), files: nil, totalFiles: 4, elapsed: 1, columns: 60)
    let after = ProgressBar.line(
      work: Self.work(5, of: 12), files: nil, totalFiles: 4, elapsed: 2, columns: 60)
    #expect(before.hasPrefix("█░░░░░░░░░ 16% 0/4 files"), "\(before)")
    #expect(after.hasPrefix("████░░░░░░ 41% 0/4 files"), "\(after)")
    #expect(before.hasSuffix("ETA 5.00 s"))
    #expect(after.hasSuffix("ETA 2.80 s"))
  }

  @Test func noETABeforeTheFirstItemNorAtTheEnd() {
    let start = ProgressBar.line(work: Self.work(0, of: 6), files: nil, totalFiles: 2, elapsed: 0.5, columns: 80)
    let end = ProgressBar.line(
      work: Self.work(6, of: 6), files: Self.files(2, of: 2, pixels: 0, elapsed: 1), totalFiles: 2, elapsed: 1,
      columns: 80)
    #expect(!start.contains("ETA"))
    #expect(start.contains(" 0% 0/2 files"))
    #expect(!end.contains("ETA"))
    #expect(end.hasPrefix(String(repeating: "█", count: 30) + " 100% 2/2 files"))
  }
}
