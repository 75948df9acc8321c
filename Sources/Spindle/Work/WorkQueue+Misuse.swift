extension WorkQueue {
  /// Receives the messages of programmer errors the engine survives, such as calling a callback body's `finish`
  /// twice: a message-only alias of ``MisuseReporting/handler``, the package's one misuse handler.
  ///
  /// Such a mistake never crashes the program and never completes work twice: the engine ignores the offending call
  /// and reports a message naming the work and the queue. Setting this property installs a package-wide handler
  /// that receives every report's message (SpindleFoundation's too); reading it returns a function that forwards a
  /// message to the current handler. Prefer ``MisuseReporting/handler``, which also receives typed details.
  ///
  /// ```swift
  /// WorkQueue.misuseHandler = { message in logger.error("\(message)") }
  /// ```
  public static var misuseHandler: @Sendable (String) -> Void {
    get {
      let handler = MisuseReporting.handler
      return { message in handler(MisuseReport(message: message)) }
    }
    set {
      MisuseReporting.handler = { report in newValue(report.message) }
    }
  }

  /// Writes a message to standard error whatever the handler, for the engine's last words before it stops the
  /// program (optimized builds drop a trap's message).
  static let standardErrorMisuseHandler: @Sendable (String) -> Void = { message in
    MisuseReporting.standardError(MisuseReport(message: message))
  }
}

/// Reports a survived programmer error through ``MisuseReporting/handler``.
func reportMisuse(_ message: String) {
  MisuseReporting.report(MisuseReport(message: message))
}
