extension CommandSpec {
  /// Parses `arguments` (without the command name) against this spec.
  ///
  /// Accepts `--name value`, `--name=value`, `-x value`, `-xvalue`, bundled flags `-qr` (also `-qrx value` and
  /// `-qrxvalue`), and `--` to end options. Every value is checked by its option here: a mistyped option or value is
  /// a ``UsageError``, never a silent default.
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
        // `-x`, bundled flags `-qr`, and a value-taking short option with its value attached (`-j4`, `-qj4`): as
        // getopt reads them, the letters after the first value-taking option are its value.
        let shorts = Array(argument.dropFirst())
        var taking: (any OptionDeclaration)?
        var rest: ArraySlice<Character> = []
        for (position, short) in shorts.enumerated() {
          guard let option = options.first(where: { $0.short == short }) else {
            var message = "unknown option '-\(short)'\(shorts.count > 1 ? " in '\(argument)'" : "")"
            if shorts.count > 1, let suggestion = suggestion(for: String(argument.dropFirst())) {
              message += "; did you mean '--\(suggestion)'?"
            }
            throw usageError(message)
          }
          if option.isFlag {
            result.flags.insert(option.name)
            continue
          }
          taking = option
          rest = shorts[(position + 1)...]
          break
        }
        guard let taking else { continue }
        if !rest.isEmpty {
          let letter = taking.short.map(String.init) ?? ""
          // Unless the letters could as well be flags (`-tv`), or the word is a long option with one dash (`-json`
          // read as `-j son`): those are errors, never a value nobody meant.
          if rest.allSatisfy({ short in options.contains { $0.short == short && $0.isFlag } }) {
            throw usageError(
              "-\(letter) needs a value: put it last in '\(argument)' with the value after it, or write "
                + "'-\(letter) \(String(rest))' to mean the value '\(String(rest))'")
          }
          if options.contains(where: { $0.name == String(shorts) }) {
            throw usageError("unknown option '\(argument)'; did you mean '--\(String(shorts))'?")
          }
          inlineValue = String(rest)
        }
        name = taking.name
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
