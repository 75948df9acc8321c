/// A positional argument of a command.
struct Positional: Sendable {
  var name: String
  var help: String
  var repeating = false
  var optional = false
  /// What a shell offers for it.
  var completion: CompletionKind = .none
}

/// The shape of a (sub)command: what it says about itself and what it accepts.
struct CommandSpec: Sendable {
  /// The full command name, as typed: `spindle tiltshift`.
  var name: String
  var abstract: String
  var discussion: String? = nil
  var positionals: [Positional] = []
  var options: [any OptionDeclaration] = []

  static let helpOption = Option<Bool>.flag("help", short: "h", help: "Show help information.")

  var allOptions: [any OptionDeclaration] { options + [Self.helpOption] }

  /// The usage line, in swift-argument-parser's style.
  var usage: String {
    var parts = [name]
    for positional in positionals {
      var word = "<\(positional.name)>"
      if positional.repeating { word += " ..." }
      parts.append(positional.optional ? "[\(word)]" : word)
    }
    for option in options {
      let flag = option.short.map { "-\($0)" } ?? "--\(option.name)"
      let word = option.valueName.map { "\(flag) <\($0)>" } ?? flag
      parts.append(option.isRequired ? word : "[\(word)]")
    }
    return "USAGE: " + parts.joined(separator: " ")
  }

  /// The full `--help` text.
  var help: String {
    var text = "OVERVIEW: \(abstract)\n"
    if let discussion { text += "\n\(discussion)\n" }
    text += "\n\(usage)\n"
    if !positionals.isEmpty {
      text += "\nARGUMENTS:\n"
      for positional in positionals {
        text += Self.row("<\(positional.name)>", positional.help)
      }
    }
    text += "\nOPTIONS:\n"
    for option in allOptions {
      var left = option.short.map { "-\($0), " } ?? ""
      left += "--\(option.name)"
      if let value = option.valueName { left += " <\(value)>" }
      var right = option.help
      if let value = option.defaultDescription { right += " (default: \(value))" }
      text += Self.row(left, right)
    }
    return text
  }

  static func row(_ left: String, _ right: String) -> String {
    let column = 26
    if left.count + 2 >= column {
      return "  \(left)\n" + String(repeating: " ", count: column + 2) + right + "\n"
    }
    return "  " + left + String(repeating: " ", count: column - left.count) + right + "\n"
  }

  func usageError(_ message: String) -> UsageError { UsageError(message: message, usage: usage, command: name) }
}
