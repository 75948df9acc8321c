import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT/SIGTERM into a graceful stop, and a second one into an immediate (but clean) exit.
///
/// The first signal calls `onInterrupt` (stop starting work, cancel what runs). The second calls
/// `onSecondInterrupt` synchronously — it must remove temporary files — and then exits with 128 + the signal's
/// number (130 for SIGINT, 143 for SIGTERM), as a shell reports a process that a signal ended.
// `sources` is an immutable array of dispatch sources, whose methods are thread-safe; `count` and `first` are atomic.
final class InterruptMonitor: @unchecked Sendable {
  private let sources: [any DispatchSourceSignal]
  private let count = Atomic<Int>(0)
  private let first = Atomic<Int32>(0)

  init(
    onInterrupt: @escaping @Sendable (Int32) -> Void,
    onSecondInterrupt: @escaping @Sendable () -> Void
  ) {
    let queue = DispatchQueue(label: "spindle.signals")
    var sources: [any DispatchSourceSignal] = []
    for signalNumber in [SIGINT, SIGTERM] {
      signal(signalNumber, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
      sources.append(source)
    }
    self.sources = sources
    for (source, signalNumber) in zip(sources, [SIGINT, SIGTERM]) {
      source.setEventHandler { [self] in
        let seen = self.count.wrappingAdd(1, ordering: .relaxed).newValue
        if seen == 1 {
          self.first.store(signalNumber, ordering: .relaxed)
          onInterrupt(signalNumber)
        } else {
          onSecondInterrupt()
          _exit(128 + signalNumber)
        }
      }
      source.resume()
    }
  }

  /// Whether a signal has arrived.
  var interrupted: Bool { count.load(ordering: .relaxed) > 0 }

  /// The exit status for an interrupted run: 128 + the first signal's number (130 SIGINT, 143 SIGTERM), or 130 if
  /// the run was cancelled without a signal.
  var exitStatus: Int32 {
    let signalNumber = first.load(ordering: .relaxed)
    return signalNumber > 0 ? 128 + signalNumber : 128 + SIGINT
  }

}
