#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension WorkQueue {
  /// Receives reports of programmer errors the engine survives, such as calling a callback body's `finish`
  /// twice.
  ///
  /// Such a mistake never crashes the program and never completes work twice: the engine ignores the
  /// offending call and passes a message naming the work and the queue to this handler. The default handler
  /// writes the message and a newline to standard error. Install your own to log elsewhere or to fail a
  /// test; it can be called from any thread.
  ///
  /// ```swift
  /// WorkQueue.misuseHandler = { message in logger.error("\(message)") }
  /// ```
  public static var misuseHandler: @Sendable (String) -> Void {
    get { misuseHandlerStorage.withLock { $0 } }
    set { misuseHandlerStorage.withLock { $0 = newValue } }
  }

  /// The handler that writes to standard error.
  public static let standardErrorMisuseHandler: @Sendable (String) -> Void = { message in
    let line = message + "\n"
    var bytes = Array(line.utf8)
    bytes.withUnsafeMutableBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
        if written <= 0 { break }
        offset += written
      }
    }
  }
}

private let misuseHandlerStorage = Locked<@Sendable (String) -> Void>(WorkQueue.standardErrorMisuseHandler)

/// Reports a survived programmer error through ``WorkQueue/misuseHandler``.
func reportMisuse(_ message: String) {
  WorkQueue.misuseHandler(message)
}
