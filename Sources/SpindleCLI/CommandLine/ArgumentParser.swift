import Foundation

/// One `--option` a command accepts. A nil `valueName` makes it a flag that takes no value.
struct OptionSpec {
  var name: String
  var short: Character? = nil
  var valueName: String? = nil
  var help: String
  /// Shown without brackets in the usage line; the command itself checks that it was given.
  var isRequired = false

  var isFlag: Bool { valueName == nil }
}

/// The shape of a (sub)command: what it says about itself and what it accepts.
struct CommandSpec {
  var name: String
  var abstract: String
  var discussion: String? = nil
  var positionals: [(name: String, help: String, repeating: Bool, optional: Bool)] = []
  var options: [OptionSpec] = []

  static let helpOption = OptionSpec(name: "help", short: "h", help: "Show help information.")

  var allOptions: [OptionSpec] { options + [Self.helpOption] }

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
      text += Self.row(left, option.help)
    }
    return text
  }

  private static func row(_ left: String, _ right: String) -> String {
    let column = 26
    if left.count + 2 >= column {
      return "  \(left)\n" + String(repeating: " ", count: column + 2) + right + "\n"
    }
    return "  " + left.padding(toLength: column, withPad: " ", startingAt: 0) + right + "\n"
  }
}

/// A command-line mistake: exit status 2, message plus usage.
struct UsageError: Error, CustomStringConvertible {
  var message: String
  var usage: String
  var description: String { "error: \(message)\n\(usage)" }

  /// The command the usage belongs to ("spindle tiltshift"), for the "See '... --help'" hint.
  var command: String {
    let words = usage.dropFirst("USAGE: ".count).split(separator: " ")
    return words.prefix(2).filter { !$0.hasPrefix("<") && !$0.hasPrefix("[") }.joined(separator: " ")
  }
}

/// What the parser found: flags that were given, option values (last one wins) and positionals.
struct ParsedArguments {
  var flags: Set<String> = []
  var values: [String: String] = [:]
  var positionals: [String] = []
  let spec: CommandSpec

  func flag(_ name: String) -> Bool { flags.contains(name) }

  func string(_ name: String) -> String? { values[name] }

  func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
    guard let raw = values[name] else { return fallback }
    guard let value = Int(raw), range.contains(value) else {
      throw UsageError(
        message: "--\(name) expects a whole number from \(range.lowerBound) to \(range.upperBound), got '\(raw)'",
        usage: spec.usage
      )
    }
    return value
  }

  func double(_ name: String, default fallback: Double, range: ClosedRange<Double>) throws -> Double {
    guard let raw = values[name] else { return fallback }
    guard let value = Double(raw), value.isFinite, range.contains(value) else {
      throw UsageError(
        message: "--\(name) expects a number from \(range.lowerBound) to \(range.upperBound), got '\(raw)'",
        usage: spec.usage
      )
    }
    return value
  }

  func choice(_ name: String, default fallback: String, among choices: [String]) throws -> String {
    guard let raw = values[name] else { return fallback }
    guard choices.contains(raw) else {
      throw UsageError(
        message: "--\(name) expects one of \(choices.joined(separator: ", ")), got '\(raw)'",
        usage: spec.usage
      )
    }
    return raw
  }
}

extension CommandSpec {
  /// Parses `arguments` (without the command name) against this spec.
  ///
  /// Accepts `--name value`, `--name=value`, `-x value`, flags, and `--` to end options.
  func parse(_ arguments: [String]) throws -> ParsedArguments {
    var result = ParsedArguments(spec: self)
    var index = 0
    var onlyPositionals = false
    func fail(_ message: String) -> UsageError { UsageError(message: message, usage: usage) }
    /// A word that names one of this command's options: never taken as another option's value
    /// (`-o --json` is a missing value, not a folder named "--json"; write `--output=--json` to mean that).
    func isOption(_ word: String) -> Bool {
      if word.hasPrefix("--") {
        let name = word.dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
        return allOptions.contains { $0.name == name }
      }
      guard word.count >= 2, word.hasPrefix("-"), let short = word.dropFirst().first else { return false }
      return allOptions.contains { $0.short == short }
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
        var options: [OptionSpec] = []
        for short in shorts {
          guard let option = allOptions.first(where: { $0.short == short }) else {
            throw fail("unknown option '-\(short)'\(shorts.count > 1 ? " in '\(argument)'" : "")")
          }
          options.append(option)
        }
        for option in options.dropLast() {
          guard option.isFlag else { throw fail("-\(option.short!) needs a value and must come last in '\(argument)'") }
          result.flags.insert(option.name)
        }
        name = options.last!.name
      }
      guard let option = allOptions.first(where: { $0.name == name }) else {
        throw fail("unknown option '--\(name)'")
      }
      if option.isFlag {
        if inlineValue != nil { throw fail("--\(name) takes no value") }
        result.flags.insert(name)
        continue
      }
      if let inlineValue {
        result.values[name] = inlineValue
      } else if index < arguments.count, !isOption(arguments[index]) {
        result.values[name] = arguments[index]
        index += 1
      } else {
        throw fail("--\(name) needs a value <\(option.valueName ?? "value")>")
      }
    }
    if result.flag("help") { return result }
    let required = positionals.filter { !$0.optional }
    if result.positionals.count < required.count {
      throw fail("missing argument <\(required[result.positionals.count].name)>")
    }
    if !positionals.contains(where: \.repeating), result.positionals.count > positionals.count {
      throw fail("unexpected argument '\(result.positionals[positionals.count])'")
    }
    return result
  }
}
