extension AsyncOperation {
  /// A programmer error in driving an ``AsyncOperation``'s life cycle, reported instead of trapping.
  ///
  /// The operation's state is left unchanged by the misused call. See ``AsyncOperation/reportMisuse(_:)``.
  public struct Misuse: Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
      /// ``AsyncOperation/finish(file:line:)`` was called after the operation had already finished.
      case finishedTwice
      /// ``AsyncOperation/finish(file:line:)`` was called before the operation started executing.
      case finishedBeforeStart
      /// ``AsyncOperation/start()`` was called on an operation that had already started.
      case startedTwice
    }

    /// A source location (`#fileID` and `#line`) of a call.
    public struct Location: Sendable, Equatable, CustomStringConvertible {
      /// The file identifier (`Module/File.swift`).
      public var file: String
      /// The line number.
      public var line: UInt

      /// Creates a location from `#fileID` and `#line`.
      public init(file: StaticString, line: UInt) {
        self.file = "\(file)"
        self.line = line
      }

      /// `file:line`.
      public var description: String { "\(file):\(line)" }
    }

    /// What went wrong.
    public var kind: Kind
    /// The misused operation: its type, its `name` if set, and its address.
    public var operation: String
    /// Where the misusing call was made (`nil` for `start()`, which takes no location).
    public var location: Location?
    /// For ``Kind/finishedTwice``: where the first, effective `finish()` was made.
    public var firstFinish: Location?

    /// One line naming the operation, the mistake and the call sites.
    public var description: String {
      var text = "SpindleFoundation: programmer error: "
      switch kind {
      case .finishedTwice:
        text += "finish() called on \(operation), which had already finished"
        if let firstFinish { text += " (first finish() at \(firstFinish))" }
      case .finishedBeforeStart:
        text += "finish() called on \(operation) before it started executing"
      case .startedTwice:
        text += "start() called on \(operation), which had already started"
      }
      if let location { text += "; misuse at \(location)" }
      return text + ". The call was ignored."
    }
  }
}
