/// Where every Spindle library reports the programmer errors it survives: one handler for the whole process.
///
/// The package has one design for misuse: the offending call is ignored (never a crash, never work completed
/// twice) and a ``MisuseReport`` goes to ``handler``, which by default writes the message to standard error. Install
/// your own handler to log elsewhere or to fail a test; it is called on the thread that misused the API, outside
/// Spindle's locks, and may be called from any thread at once.
///
/// ```swift
/// MisuseReporting.handler = { report in logger.error("\(report.message)") }
/// // later, to go back to the default:
/// MisuseReporting.handler = MisuseReporting.standardError
/// ```
///
/// `WorkQueue.misuseHandler` is a message-only alias of ``handler``; `AsyncOperation.reportMisuse(_:)` is a
/// per-operation hook in front of it (its default implementation forwards here).
public enum MisuseReporting {
  /// The handler that receives every report; ``standardError`` until replaced.
  public static var handler: @Sendable (MisuseReport) -> Void {
    get { storage.withLock { $0 } }
    set { storage.withLock { $0 = newValue } }
  }

  /// The default handler: writes the report's message and a newline to standard error, unbuffered.
  ///
  /// Public so that a program can restore the default after installing its own handler, or forward to it.
  public static let standardError: @Sendable (MisuseReport) -> Void = { report in
    Platform.writeToStandardError(report.message + "\n")
  }

  /// Sends `report` to the current ``handler``.
  ///
  /// For libraries built on Spindle that want their own misuse reports to go where Spindle's go.
  ///
  /// ```swift
  /// MisuseReporting.report(MisuseReport(message: "MyPool: release() called twice; ignored"))
  /// ```
  public static func report(_ report: MisuseReport) {
    handler(report)
  }

  private static let storage = Locked<@Sendable (MisuseReport) -> Void>(standardError)
}
