import Dispatch
import Foundation
import Spindle
import SpindleTestSupport
import Synchronization
import Testing

@testable import SpindleFoundation

/// A synthetic "image": a row of grey levels (the playground used UIImage).
typealias Image = [UInt8]

/// Makes a deterministic synthetic image for a name.
func makeImage(named name: String, size: Int = 64) -> Image {
  let seed = name.utf8.reduce(UInt8(0)) { $0 &+ $1 }
  return (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) &+ seed }
}

/// A deterministic stand-in for the playground's tilt-shift: a 3-tap box blur.
func blur(_ image: Image) -> Image {
  guard image.count > 2 else { return image }
  var out = image
  for i in 1..<(image.count - 1) {
    out[i] = UInt8((Int(image[i - 1]) + Int(image[i]) + Int(image[i + 1])) / 3)
  }
  return out
}

/// The playground's `simulateNetworkImageLoadAsync`: calls back later, from another thread.
func simulateNetworkImageLoadAsync(
  named name: String,
  delay: Double = 0.02,
  callback: @escaping @Sendable (Image) -> Void
) {
  DispatchQueue.global().asyncAfter(deadline: .now() + delay) {
    callback(makeImage(named: name))
  }
}

/// Waits for `queue` to drain, at most `seconds` (times ``hangBoundScale``); `false` means it hung.
func drain(_ queue: OperationQueue, within seconds: Double = 60) -> Bool {
  let done = DispatchSemaphore(value: 0)
  let box = UncheckedBox(queue)
  Thread.detachNewThread {
    box.value.waitUntilAllOperationsAreFinished()
    done.signal()
  }
  return done.wait(timeout: .now() + seconds * hangBoundScale) == .success
}

/// Waits for `operation` to finish, at most `seconds` (times ``hangBoundScale``); `false` means it hung.
func wait(for operation: Operation, within seconds: Double = 60) -> Bool {
  let done = DispatchSemaphore(value: 0)
  let box = UncheckedBox(operation)
  Thread.detachNewThread {
    box.value.waitUntilFinished()
    done.signal()
  }
  return done.wait(timeout: .now() + seconds * hangBoundScale) == .success
}

// Holds only OperationQueue and Operation, which are thread-safe (their own locks); the box only carries them
// into a @Sendable closure.
struct UncheckedBox<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}

/// Records misuse reports instead of writing them to standard error.
final class MisuseLog: Sendable {
  private let entries = Locked<[AsyncOperation.Misuse]>([])
  var all: [AsyncOperation.Misuse] { entries.withLock { $0 } }
  func record(_ misuse: AsyncOperation.Misuse) { entries.withLock { $0.append(misuse) } }
}

/// An async operation whose body is a closure and whose misuse reports go to a log.
// The superclass's locks protect the state; `body` and `log` are immutable.
final class ProbeOperation: AsyncOperation, @unchecked Sendable {
  let log = MisuseLog()
  let mainRuns = Counter()
  private let body: @Sendable (ProbeOperation) -> Void

  init(_ body: @escaping @Sendable (ProbeOperation) -> Void = { $0.finish() }) {
    self.body = body
    super.init()
  }

  override func main() {
    mainRuns.increment()
    body(self)
  }

  override func reportMisuse(_ misuse: Misuse) { log.record(misuse) }
}

/// Waits for `queue` to drain without blocking a thread of Swift's cooperative pool (which `TaskOperation`
/// bodies need), at most `seconds` (times ``hangBoundScale``).
func drainWithoutBlocking(_ queue: OperationQueue, within seconds: Double = 60) async -> Bool {
  let box = UncheckedBox(queue)
  return await offPool { drain(box.value, within: seconds) }
}

/// Waits for `operation` to finish from async code, on a thread of its own, at most `seconds` (times
/// ``hangBoundScale``); `false` means it hung.
func waitWithoutBlocking(for operation: Operation, within seconds: Double = 60) async -> Bool {
  let box = UncheckedBox(operation)
  return await offPool { wait(for: box.value, within: seconds) }
}
