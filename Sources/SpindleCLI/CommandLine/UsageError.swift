/// A command-line mistake: exit status 2, with the message, the usage line and a pointer to `--help`.
struct UsageError: Error, CustomStringConvertible, Equatable {
  var message: String
  var usage: String
  /// The command the usage belongs to ("spindle tiltshift"), for the "See '... --help'" hint.
  var command: String

  var description: String { "error: \(message)\n\(usage)" }
}

/// A value that parsed but does not make sense (with the others), thrown by a command's `validate()`.
///
/// Reported as a ``UsageError`` with the command's usage: exit status 2.
struct ValidationError: Error, CustomStringConvertible {
  var message: String
  init(_ message: String) { self.message = message }
  var description: String { message }
}

/// Not an error: the request was answered (`--help`, `--version`); print `output` and exit 0.
struct CleanExit: Error {
  var output: String
}
