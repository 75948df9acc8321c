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
