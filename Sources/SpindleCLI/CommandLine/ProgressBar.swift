import Foundation
import Spindle
import Synchronization
import TiltShift

/// A one-line progress bar on standard error (files, MP/s, ETA), redrawn in place; silent when disabled.
final class ProgressBar: Sendable {
  private let enabled: Bool
  private let total: Int
  private let visible = TSanVisibleMutex(false)

  init(enabled: Bool, total: Int) {
    self.enabled = enabled
    self.total = total
  }

  func draw(_ progress: BatchProgress) {
    guard enabled else { return }
    let width = max(10, min(40, Terminal.width - 50))
    let fraction = total > 0 ? Double(progress.completed) / Double(total) : 1
    let filled = Int(fraction * Double(width))
    let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    var text =
      "\r\(bar) \(progress.completed)/\(total) files  \(String(format: "%.1f", progress.megapixelsPerSecond)) MP/s"
    if let eta = progress.estimatedSecondsRemaining, progress.completed < total {
      text += "  ETA \(Format.seconds(eta))"
    }
    visible.withLock { visible in
      Terminal.rawError(text + "\u{1B}[K")
      visible = true
    }
  }

  func clear() {
    guard enabled else { return }
    visible.withLock { visible in
      if visible { Terminal.rawError("\r\u{1B}[K") }
      visible = false
    }
  }
}
