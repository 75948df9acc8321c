import Foundation
import Spindle
import SpindleTestSupport
import Synchronization
import Testing

@testable import SpindleCLI

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The CLI's signal routing (Ctrl-C, Ctrl-\): a signal reaches its watch whichever thread the kernel hands it to.
///
/// Signals go to the whole test process, so the suite is serialised and uses SIGUSR2, which nothing else here sends;
/// every signal is sent only while a watch of it is on (SIGUSR2's default disposition ends the process).
@Suite(.serialized) struct SignalWatcherTests {
  /// Counts the deliveries of one watch, and lets a test wait for the next.
  final class Deliveries: Sendable {
    let count = Atomic<Int>(0)
    let arrived = DispatchSemaphore(value: 0)
    func record(_ signal: Int32) {
      #expect(signal == SIGUSR2)
      count.add(1, ordering: .relaxed)
      arrived.signal()
    }
    /// Waits on a thread of its own (a starved cooperative pool does not count against the delivery).
    func waitForOne(within seconds: Double = 30) async -> Bool {
      await offPool { self.arrived.wait(timeout: .now() + seconds) == .success }
    }
  }

  /// A thread that takes every signal (as a program's main thread does), parked until `stop`.
  final class OpenThread: Sendable {
    private let thread = TSanVisibleMutex<pthread_t?>(nil)
    private let ready = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)

    init() {
      Thread.detachNewThread { [self] in
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        thread.withLock { $0 = pthread_self() }
        ready.signal()
        done.wait()
      }
      ready.wait()
    }

    /// Sends `signal` to this thread alone: the case a Dispatch signal source on Linux loses (a `signalfd` in the
    /// manager thread never sees a signal pending on another thread).
    func send(_ signal: Int32) { _ = pthread_kill(thread.withLock { $0 }!, signal) }
    func stop() { done.signal() }
  }

  @Test("200 signals, to the process and to a thread that takes signals: every one reaches the watch")
  func everySignalArrives() async throws {
    let deliveries = Deliveries()
    let watch = SignalWatcher.shared.watch([SIGUSR2]) { deliveries.record($0) }
    defer { watch.cancel() }
    let open = await offPool { OpenThread() }
    defer { open.stop() }
    var lost = 0
    for lap in 0..<200 {
      if lap.isMultiple(of: 2) { kill(getpid(), SIGUSR2) } else { open.send(SIGUSR2) }
      if !(await deliveries.waitForOne(within: 5)) { lost += 1 }
      if lost == 3 { break }
    }
    #expect(lost == 0, "signals lost: \(lost) (the test stops at 3)")
    #expect(deliveries.count.load(ordering: .relaxed) == 200)
  }

  // A Dispatch signal source lost 100 of 100 of these: it registers asynchronously while the signal is ignored.
  @Test("a signal sent the instant a watch returns reaches it (100 laps)")
  func signalRightAfterWatching() async throws {
    var lost = 0
    for _ in 0..<100 {
      let deliveries = Deliveries()
      let watch = SignalWatcher.shared.watch([SIGUSR2]) { deliveries.record($0) }
      kill(getpid(), SIGUSR2)
      if !(await deliveries.waitForOne(within: 5)) { lost += 1 }
      watch.cancel()
      if lost == 3 { break }  // broken: say so in 15 s, not in 500
    }
    #expect(lost == 0, "signals lost right after watch: \(lost) (the test stops at 3)")
  }

  @Test("the latest watch gets the signal; cancelling it hands the signal back, the last one restores the default")
  func watchesNestAndRestoreTheDefault() async throws {
    let outer = Deliveries()
    let inner = Deliveries()
    let outerWatch = SignalWatcher.shared.watch([SIGUSR2]) { outer.record($0) }
    let innerWatch = SignalWatcher.shared.watch([SIGUSR2]) { inner.record($0) }
    kill(getpid(), SIGUSR2)
    #expect(await inner.waitForOne())
    innerWatch.cancel()
    innerWatch.cancel()  // twice is harmless
    #expect(Self.disposition(of: SIGUSR2) != nil, "the outer watch still holds the signal")
    kill(getpid(), SIGUSR2)
    #expect(await outer.waitForOne())
    #expect(inner.count.load(ordering: .relaxed) == 1 && outer.count.load(ordering: .relaxed) == 1)
    outerWatch.cancel()
    #expect(Self.disposition(of: SIGUSR2) == nil, "no watch left: the default disposition is back")
  }

  /// The signal's handler, or nil when it has its default disposition.
  static func disposition(of signal: Int32) -> UnsafeRawPointer? {
    var current = sigaction()
    sigaction(signal, nil, &current)
    #if canImport(Glibc)
      return unsafeBitCast(current.__sigaction_handler.sa_handler, to: UnsafeRawPointer?.self)
    #else
      return unsafeBitCast(current.__sigaction_u.__sa_handler, to: UnsafeRawPointer?.self)
    #endif
  }
}
