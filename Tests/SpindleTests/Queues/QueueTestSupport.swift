import Dispatch
import Spindle
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value shared between the test and the blocks it dispatches.
final class Shared<Value: Sendable>: Sendable {
  private let storage: TSanVisibleMutex<Value>

  init(_ value: Value) { storage = TSanVisibleMutex(value) }

  var value: Value { storage.withLock { $0 } }

  func update(_ body: (inout Value) -> Void) { storage.withLock { body(&$0) } }
}

/// Runs `body` on a background thread and waits at most `seconds` for it; nil means it did not finish (a hang).
func runBounded<T: Sendable>(seconds: Double = 60, _ body: @escaping @Sendable () -> T) -> T? {
  let result = Shared<T?>(nil)
  let done = DispatchSemaphore(value: 0)
  DispatchQueue.global().async {
    let value = body()
    result.update { $0 = value }
    done.signal()
  }
  guard done.wait(timeout: .now() + seconds) == .success else { return nil }
  return result.value
}

/// Whether the environment variable `name` is set to `1`.
func environmentFlag(_ name: String) -> Bool {
  guard let raw = getenv(name) else { return false }
  return String(cString: raw) == "1"
}

/// The decoded bytes a child process wrote.
func text(_ bytes: [UInt8]?) -> String {
  String(decoding: bytes ?? [], as: UTF8.self)
}
