/// A programmer error that a Spindle library survived: one line for a person, plus the library's typed details.
///
/// Every library of the package reports such mistakes (calling a callback body's `finish` twice, finishing an
/// `AsyncOperation` before it started, …) the same way: the offending call is ignored, nothing crashes, and a
/// `MisuseReport` goes to ``MisuseReporting/handler``.
///
/// ```swift
/// MisuseReporting.handler = { report in
///   logger.error("\(report.message)")
///   if let detail = report.detail as? AsyncOperation.Misuse { logger.error("at \(detail.location?.description ?? "?")") }
/// }
/// ```
public struct MisuseReport: Sendable, CustomStringConvertible {
  /// One line naming the misused object, the mistake and what was done instead; what ``description`` returns.
  public var message: String
  /// The reporting library's own typed description of the mistake, if it has one (SpindleFoundation passes its
  /// `AsyncOperation.Misuse`); nil for reports that are only a message.
  public var detail: (any Sendable)?

  /// Creates a report.
  ///
  /// - Parameters:
  ///   - message: One line for a person; no trailing newline.
  ///   - detail: A typed description for handlers that want more than the line.
  public init(message: String, detail: (any Sendable)? = nil) {
    self.message = message
    self.detail = detail
  }

  /// The ``message``.
  public var description: String { message }
}
