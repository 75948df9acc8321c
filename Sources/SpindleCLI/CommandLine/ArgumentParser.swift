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

/// What the parser found for a command with options `Options`, read with typed key paths.
struct ParsedArguments<Options: OptionGroup>: Sendable {
  let options = Options()
  var flags: Set<String> = []
  /// Raw values, already checked by their option (last one wins).
  var values: [String: String] = [:]
  var positionals: [String] = []

  /// Whether `--help` was given.
  var helpRequested: Bool { flags.contains("help") }

  /// Whether the option was given on the command line.
  func isGiven<Value>(_ key: KeyPath<Options, Option<Value>>) -> Bool {
    let name = options[keyPath: key].name
    return flags.contains(name) || values[name] != nil
  }

  /// The option's value: the one given, else its default.
  subscript<Value>(_ key: KeyPath<Options, Option<Value>>) -> Value {
    let option = options[keyPath: key]
    if option.isFlag, let flag = flags.contains(option.name) as? Value { return flag }
    // The parser accepted only values that convert, so this is the given value whenever there was one.
    guard let raw = values[option.name], let value = option.convert(raw) else { return option.defaultValue() }
    return value
  }
}

extension CommandSpec {
  /// Parses `arguments` (without the command name) against this spec.
  ///
  /// Accepts `--name value`, `--name=value`, `-x value`, bundled flags `-qr`, and `--` to end options. Every
  /// value is checked by its option here: a mistyped option or value is a ``UsageError``, never a silent default.
  func parse<Options: OptionGroup>(_ arguments: [String], as _: Options.Type = Options.self) throws
    -> ParsedArguments<Options>
  {
    var result = ParsedArguments<Options>()
    var index = 0
    var onlyPositionals = false
    let options = allOptions
    /// A word that names one of this command's options: never taken as another option's value
    /// (`-o --json` is a missing value, not a folder named "--json"; write `--output=--json` to mean that).
    func isOption(_ word: String) -> Bool {
      if word.hasPrefix("--") {
        let name = word.dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
        return options.contains { $0.name == name }
      }
      guard word.count >= 2, word.hasPrefix("-"), let short = word.dropFirst().first else { return false }
      return options.contains { $0.short == short }
    }
    while index < arguments.count {
      let argument = arguments[index]
      index += 1
      if onlyPositionals || argument == "-" || !argument.hasPrefix("-") {
        result.positionals.append(argument)
        continue
      }
      if argument == "--" {
        onlyPositionals = true
        continue
      }
      var name: String
      var inlineValue: String? = nil
      if argument.hasPrefix("--") {
        name = String(argument.dropFirst(2))
        if let equals = name.firstIndex(of: "=") {
          inlineValue = String(name[name.index(after: equals)...])
          name = String(name[..<equals])
        }
      } else {
        // `-x`, or bundled flags `-qr`; a value-taking short option may only come last in a bundle.
        let shorts = Array(argument.dropFirst())
        var found: [any OptionDeclaration] = []
        for short in shorts {
          guard let option = options.first(where: { $0.short == short }) else {
            var message = "unknown option '-\(short)'\(shorts.count > 1 ? " in '\(argument)'" : "")"
            if shorts.count > 1, let suggestion = suggestion(for: String(argument.dropFirst())) {
              message += "; did you mean '--\(suggestion)'?"
            }
            throw usageError(message)
          }
          found.append(option)
        }
        for option in found.dropLast() {
          guard option.isFlag else {
            throw usageError(
              "-\(option.short.map(String.init) ?? "") needs a value and must come last in '\(argument)'")
          }
          result.flags.insert(option.name)
        }
        name = found.last?.name ?? ""
      }
      guard let option = options.first(where: { $0.name == name }) else {
        var message = "unknown option '--\(name)'"
        if let suggestion = suggestion(for: name) { message += "; did you mean '--\(suggestion)'?" }
        throw usageError(message)
      }
      if option.isFlag {
        if inlineValue != nil { throw usageError("--\(name) takes no value") }
        result.flags.insert(name)
        continue
      }
      let raw: String
      if let inlineValue {
        raw = inlineValue
      } else if index < arguments.count, !isOption(arguments[index]) {
        raw = arguments[index]
        index += 1
      } else {
        throw usageError("--\(name) needs a value <\(option.valueName ?? "value")>")
      }
      guard option.accepts(raw) else {
        var message = "--\(name) expects \(option.expectation), got '\(raw)'"
        if case .choices(let choices) = option.completion, let near = Suggestion.nearest(to: raw, among: choices) {
          message += "; did you mean '\(near)'?"
        }
        throw usageError(message)
      }
      result.values[name] = raw
    }
    if result.helpRequested { return result }
    for option in self.options where option.isRequired && result.values[option.name] == nil {
      let flag = option.short.map { "-\($0)/" } ?? ""
      throw usageError("missing \(flag)--\(option.name) <\(option.valueName ?? "value")>")
    }
    let required = positionals.filter { !$0.optional }
    if result.positionals.count < required.count {
      throw usageError("missing argument <\(required[result.positionals.count].name)>")
    }
    if !positionals.contains(where: \.repeating), result.positionals.count > positionals.count {
      throw usageError("unexpected argument '\(result.positionals[positionals.count])'")
    }
    return result
  }

  /// The long option name closest to a mistyped one, if one is close enough to be what was meant.
  func suggestion(for typed: String) -> String? {
    Suggestion.nearest(to: typed, among: allOptions.map(\.name))
  }
}

/// "Did you mean …?": the nearest candidate by edit distance, or the only one the typed word begins.
enum Suggestion {
  static func nearest(to typed: String, among candidates: [String]) -> String? {
    guard !typed.isEmpty else { return nil }
    let scored = candidates.map { (candidate: $0, distance: distance(typed, $0)) }
    if let best = scored.min(by: { $0.distance < $1.distance }),
      best.distance <= max(2, min(3, best.candidate.count / 3)), best.distance < best.candidate.count
    {
      return best.candidate
    }
    let prefixed = candidates.filter { $0.hasPrefix(typed) }
    return prefixed.count == 1 ? prefixed[0] : nil
  }

  /// The edit distance: insertions, deletions, substitutions and swaps of neighbours that turn `a` into `b`
  /// (Damerau–Levenshtein, optimal string alignment), so `--jbos` is one edit from `--jobs`.
  static func distance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
        if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
          table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
        }
      }
    }
    return table[a.count][b.count]
  }
}
