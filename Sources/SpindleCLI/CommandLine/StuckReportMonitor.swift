import Dispatch
import Foundation
import Synchronization

/// While a batch runs, turns SIGQUIT (Ctrl-\) into a report of its queues on standard error, and the batch goes on.
///
/// A shell's Ctrl-\ would otherwise end the process with a core dump. The report is whatever `report` returns —
/// for a batch, `String(reflecting: batch)`: each queue's stuck-queue report (what runs, what is ready, what each
/// pending item waits for). ``stop()`` gives SIGQUIT its default disposition back.
// `source` is a dispatch source, whose methods are thread-safe; `stopped` is atomic.
final class StuckReportMonitor: @unchecked Sendable {
  private let source: any DispatchSourceSignal
  private let stopped = Atomic<Bool>(false)

  init(report: @escaping @Sendable () -> String) {
    signal(SIGQUIT, SIG_IGN)
    source = DispatchSource.makeSignalSource(signal: SIGQUIT, queue: DispatchQueue(label: "spindle.sigquit"))
    source.setEventHandler { Terminal.error(report()) }
    source.resume()
  }

  /// Stops reporting and restores SIGQUIT's default disposition; calling it twice is harmless.
  func stop() {
    guard !stopped.exchange(true, ordering: .relaxed) else { return }
    source.cancel()
    signal(SIGQUIT, SIG_DFL)
  }

  deinit { stop() }
}
