import Foundation
import Spindle
import Synchronization
import TiltShift

/// A one-line progress bar on standard error, redrawn in place; silent when disabled.
///
/// The bar's fill, percentage and ETA come from the batch's work items (``TiltShiftBatch/workProgressUpdates``,
/// built on its queues' `WorkQueue.progressUpdates`); the files written and MP/s from the files' reports.
final class ProgressBar: Sendable {
  let enabled: Bool
  private let files: Int
  private let clock = ContinuousClock()
  private let start: ContinuousClock.Instant
  private let state = TSanVisibleMutex(State())

  private struct State {
    var visible = false
    var stopped = false
    var work: WorkProgress?
    var report: BatchProgress?
  }

  init(enabled: Bool, files: Int) {
    self.enabled = enabled
    self.files = files
    start = clock.now
  }

  /// Draws the bar with the work items' progress now.
  func draw(_ work: WorkProgress) {
    guard enabled else { return }
    redraw { $0.work = work }
  }

  /// Draws the bar with the files' progress after a file ended.
  func draw(_ report: BatchProgress) {
    guard enabled else { return }
    redraw { $0.report = report }
  }

  private func redraw(_ change: (inout State) -> Void) {
    let elapsed = (clock.now - start).secondsValue
    let width = Terminal.width
    state.withLock { state in
      guard !state.stopped else { return }
      change(&state)
      // Before the first value of the queues, nothing is done yet.
      guard let work = state.work else { return }
      let text = Self.line(work: work, files: state.report, totalFiles: files, elapsed: elapsed, columns: width)
      Terminal.rawError("\r" + text + "\u{1B}[K")
      state.visible = true
    }
  }

  /// The bar's text for `work` (items done of the total), the latest file report, `elapsed` seconds since the
  /// batch started, on a terminal `columns` wide.
  ///
  /// `█████░░░░░ 50% 3/6 files  12.5 MP/s  ETA 2.00 s`: the fill and percentage are the items' fraction, the
  /// ETA is the time the items so far took per item times the items left (none before the first item nor
  /// once all are done).
  static func line(
    work: WorkProgress,
    files: BatchProgress?,
    totalFiles: Int,
    elapsed: Double,
    columns: Int
  ) -> String {
    let width = max(10, min(40, columns - 50))
    let fraction = min(1, max(0, work.fractionCompleted))
    let filled = Int(fraction * Double(width))
    let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    var text = "\(bar) \(Int(fraction * 100))% \(files?.completed ?? 0)/\(totalFiles) files"
    text += "  \(String(format: "%.1f", files?.megapixelsPerSecond ?? 0)) MP/s"
    if work.completed > 0, work.completed < work.total, elapsed > 0 {
      let eta = elapsed / Double(work.completed) * Double(work.total - work.completed)
      text += "  ETA \(Format.seconds(eta))"
    }
    return text
  }

  /// Erases the bar; the next draw shows it again.
  func clear() {
    clear(stopping: false)
  }

  /// Erases the bar for good: draws that come later (a last update on its way) show nothing.
  func stop() {
    clear(stopping: true)
  }

  private func clear(stopping: Bool) {
    guard enabled else { return }
    state.withLock { state in
      if state.visible { Terminal.rawError("\r\u{1B}[K") }
      state.visible = false
      if stopping { state.stopped = true }
    }
  }
}
