import Foundation
import Synchronization

/// Turns SIGINT/SIGTERM into a graceful stop, and a second one into an immediate (but clean) exit.
///
/// The first signal calls `onInterrupt` (stop starting work, cancel what runs). The second calls
/// `onSecondInterrupt` synchronously — it must remove temporary files — and then exits with 128 + the signal's
/// number (130 for SIGINT, 143 for SIGTERM), as a shell reports a process that a signal ended. The signals arrive
/// through ``SignalWatcher``, so none is lost whichever thread the kernel hands it to. The monitor stays on until
/// the process exits (a signal after the batch must still end the run with 130, not by the signal).
final class InterruptMonitor: Sendable {
  private let watch: SignalWatch
  private let state: State

  init(
    onInterrupt: @escaping @Sendable (Int32) -> Void,
    onSecondInterrupt: @escaping @Sendable () -> Void
  ) {
    // The counters live in a box the handler shares (the handler is made before `self` is whole).
    let state = State()
    watch = SignalWatcher.shared.watch([SIGINT, SIGTERM]) { signalNumber in
      let seen = state.count.wrappingAdd(1, ordering: .relaxed).newValue
      if seen == 1 {
        state.first.store(signalNumber, ordering: .relaxed)
        onInterrupt(signalNumber)
      } else {
        onSecondInterrupt()
        _exit(128 + signalNumber)
      }
    }
    self.state = state
  }

  private final class State: Sendable {
    let count = Atomic<Int>(0)
    let first = Atomic<Int32>(0)
  }

  /// Whether a signal has arrived.
  var interrupted: Bool { state.count.load(ordering: .relaxed) > 0 }

  /// The exit status for an interrupted run: 128 + the first signal's number (130 SIGINT, 143 SIGTERM), or 130 if
  /// the run was cancelled without a signal.
  var exitStatus: Int32 {
    let signalNumber = state.first.load(ordering: .relaxed)
    return signalNumber > 0 ? 128 + signalNumber : 128 + SIGINT
  }
}
