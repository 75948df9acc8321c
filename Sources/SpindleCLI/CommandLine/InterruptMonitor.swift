import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT/SIGTERM into a graceful stop, and a second one into an immediate (but clean) exit.
///
/// The first signal calls `onInterrupt` (stop starting work, cancel what runs). The second calls
/// `onSecondInterrupt` synchronously — it must remove temporary files — and then exits with 130.
// `sources` is an immutable array of dispatch sources, whose methods are thread-safe; `count` is atomic.
final class InterruptMonitor: @unchecked Sendable {
  private let sources: [any DispatchSourceSignal]
  private let count = Atomic<Int>(0)

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
          onInterrupt(signalNumber)
        } else {
          onSecondInterrupt()
          _exit(130)
        }
      }
      source.resume()
    }
  }

  /// Whether a signal has arrived.
  var interrupted: Bool { count.load(ordering: .relaxed) > 0 }

}
