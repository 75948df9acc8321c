import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Sizes of the reliability suite: small in the default run (CI runs the suite twice, once under
/// ThreadSanitizer), the full sizes with `SPINDLE_STRESS=full` (or `1`).
enum Reliability {
  /// Whether the full-size run was asked for.
  static let isFull: Bool = {
    guard let raw = getenv("SPINDLE_STRESS") else { return false }
    let value = String(cString: raw)
    return value == "full" || value == "1"
  }()

  /// Whether the tests run under AddressSanitizer (`Scripts/asan.sh` sets `SPINDLE_ASAN=1`), whose quarantine of
  /// freed memory makes resident-set sizes meaningless.
  static let underAddressSanitizer: Bool = getenv("SPINDLE_ASAN").map { String(cString: $0) == "1" } ?? false

  /// `full` under `SPINDLE_STRESS=full`, else `bounded`.
  ///
  /// Under a sanitizer (`SPINDLE_EXPECT_TSAN`, `SPINDLE_ASAN`) the bounded size shrinks tenfold: every access
  /// costs 5–15× more there, and the races and errors a sanitizer finds show at small sizes too.
  static let underSanitizer: Bool = getenv("SPINDLE_EXPECT_TSAN") != nil || underAddressSanitizer

  static func size(_ bounded: Int, full: Int) -> Int {
    if isFull { return full }
    return underSanitizer ? max(1, bounded / 10) : bounded
  }

  /// A time bound in seconds: `full` under `SPINDLE_STRESS=full`, else `bounded`, never shrunk under sanitizers
  /// (sizes shrink there; waits must not) but stretched by ``hangBoundScale`` (in CI's ThreadSanitizer run, async
  /// bodies of the cancellation test once waited over 60 s for a cooperative pool that other suites held).
  static func seconds(_ bounded: Int, full: Int) -> Double { Double(isFull ? full : bounded) * hangBoundScale }

  /// A deterministic generator (SplitMix64), so a failing seed replays.
  typealias Random = SeededGenerator

  /// A number from the environment (`SPINDLE_SEED`) or the clock, printed by failing tests so they replay.
  static func seed() -> UInt64 {
    if let raw = getenv("SPINDLE_SEED"), let value = UInt64(String(cString: raw)) { return value }
    return UInt64(truncatingIfNeeded: DispatchTime.now().uptimeNanoseconds)
  }
}

/// One counter per index, updated from any thread without a lock.
final class Counters: Sendable {
  let count: Int
  private nonisolated(unsafe) let storage: UnsafeMutablePointer<Atomic<Int>>

  init(_ count: Int) {
    self.count = count
    storage = .allocate(capacity: max(count, 1))
    for index in 0..<count { (storage + index).initialize(to: Atomic(0)) }
  }

  deinit {
    storage.deinitialize(count: count)
    storage.deallocate()
  }

  func increment(_ index: Int) { storage[index].add(1, ordering: .relaxed) }

  func add(_ amount: Int, to index: Int) { storage[index].add(amount, ordering: .relaxed) }

  /// Bumps `index` and returns the new value.
  @discardableResult
  func bump(_ index: Int) -> Int { storage[index].add(1, ordering: .relaxed).newValue }

  subscript(index: Int) -> Int { storage[index].load(ordering: .relaxed) }

  /// Indices whose counter is not `expected(index)`, at most `limit` of them.
  func mismatches(limit: Int = 10, _ expected: (Int) -> Int) -> [(index: Int, count: Int)] {
    var found: [(Int, Int)] = []
    for index in 0..<count where self[index] != expected(index) {
      found.append((index, self[index]))
      if found.count == limit { break }
    }
    return found
  }
}

/// One counter shared by tasks and threads.
final class Tally: Sendable {
  private let storage = Atomic<Int>(0)
  func add(_ amount: Int = 1) { storage.add(amount, ordering: .relaxed) }
  var value: Int { storage.load(ordering: .relaxed) }
}

/// Counts down to zero and lets one waiter through, with a bounded wait.
final class Countdown: Sendable {
  private let remaining: Atomic<Int>
  private let done = DispatchSemaphore(value: 0)

  init(_ count: Int) {
    remaining = Atomic(count)
    if count == 0 { done.signal() }
  }

  /// Counts one; the call that reaches zero opens the waiter.
  func tick() {
    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
  }

  var left: Int { remaining.load(ordering: .acquiring) }

  /// Waits on a thread of its own (never on the cooperative pool) for at most `seconds`; true if it reached zero.
  func wait(seconds: Double) async -> Bool {
    await blockingWait(seconds: seconds) { self.done.wait(timeout: $0) == .success }
  }
}

/// Runs a blocking wait on a fresh thread and suspends until it returns; `wait` receives the deadline.
///
/// The cooperative pool has two threads here: blocking one of them while Spindle needs it would deadlock the
/// test itself, so every bounded wait in this suite happens off the pool.
func blockingWait(seconds: Double, _ wait: @escaping @Sendable (DispatchTime) -> Bool) async -> Bool {
  await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
    Thread.detachNewThread {
      continuation.resume(returning: wait(.now() + seconds))
    }
  }
}

/// Waits at most `seconds` for every item of `queue` to complete, off the cooperative pool; false on a timeout.
///
/// Uses the blocking `waitUntilAllFinished()` on a thread of its own. A hang leaves that one thread blocked
/// and fails the test instead of hanging the run. The bound is ``hangBoundScale`` times longer under a sanitizer.
func drained(_ queue: WorkQueue, seconds: Double = (Reliability.isFull ? 900 : 120) * hangBoundScale) async -> Bool {
  let done = DispatchSemaphore(value: 0)
  Thread.detachNewThread {
    queue.waitUntilAllFinished()
    done.signal()
  }
  return await blockingWait(seconds: seconds) { done.wait(timeout: $0) == .success }
}

/// Blocks the calling thread until every item of `queue` completes (for child processes and helper threads).
func blockUntilFinished(_ queue: WorkQueue) {
  queue.waitUntilAllFinished()
}

/// Blocks the calling thread for the value of `work` (for child processes and helper threads).
func blockingValue<Value>(_ work: Work<Value>) throws -> Value {
  try work.wait()
}

/// A field of `/proc/self/status` in its own unit (kB for memory, a count for threads); nil off Linux.
func procStatus(_ field: String) -> Int? {
  guard let file = fopen("/proc/self/status", "r") else { return nil }
  defer { fclose(file) }
  var line = [CChar](repeating: 0, count: 512)
  while fgets(&line, Int32(line.count), file) != nil {
    let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard text.hasPrefix(field + ":") else { continue }
    let digits = text.dropFirst(field.count + 1).filter(\.isNumber)
    return Int(digits)
  }
  return nil
}

/// Writes `line` and a newline to standard error at once (a child process's report to its parent test).
func report(_ line: String) {
  let bytes = Array((line + "\n").utf8)
  bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

/// The integer after `key=` in a child's standard error, e.g. `peak=12`.
func reported(_ key: String, in output: [UInt8]?) -> Int? {
  let text = String(decoding: output ?? [], as: UTF8.self)
  guard let range = text.range(of: key + "=") else { return nil }
  return Int(text[range.upperBound...].prefix { $0.isNumber || $0 == "-" })
}

/// A payload whose lifetime tests observe through weak references.
final class Payload: Sendable {
  let index: Int
  init(_ index: Int) { self.index = index }
}

/// A weak reference usable from any thread.
final class WeakBox: @unchecked Sendable {
  // Written once at init, read after the test's bounded wait; `weak` loads are atomic in the runtime.
  weak var object: AnyObject?
  init(_ object: AnyObject) { self.object = object }
}
