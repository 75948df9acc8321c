import Foundation

/// While it is on, turns SIGQUIT (Ctrl-\) into a report on standard error, and the program goes on.
///
/// A shell's Ctrl-\ would otherwise end the process (the Swift runtime prints a crash report first). The report is
/// whatever `report` returns — for a batch, `String(reflecting: batch)`: each queue's stuck-queue report (what runs,
/// what is ready, what each pending item waits for). The signal arrives through ``SignalWatcher``, so none is lost
/// whichever thread the kernel hands it to. ``stop()`` gives SIGQUIT its default disposition back.
final class StuckReportMonitor: Sendable {
  private let watch: SignalWatch

  init(report: @escaping @Sendable () -> String) {
    watch = SignalWatcher.shared.watch([SIGQUIT]) { _ in Terminal.error(report()) }
  }

  /// Stops reporting and restores SIGQUIT's default disposition; calling it twice is harmless.
  func stop() { watch.cancel() }

  deinit { stop() }
}
