/// What a subcommand says about itself; its options come from its ``ParsableCommand/Options``.
struct CommandConfiguration: Sendable {
  /// The word that selects it: `tiltshift` in `spindle tiltshift`.
  var name: String
  var abstract: String
  var discussion: String? = nil
  var positionals: [Positional] = []
}

/// A subcommand in swift-argument-parser's shape: declared options, `init` from what was parsed, `validate()`,
/// then `run()`.
///
/// ``parse(_:)`` does everything up to `run()`, so tests check a command's reading of its arguments in-process.
protocol ParsableCommand: Sendable {
  associatedtype Options: OptionGroup
  static var configuration: CommandConfiguration { get }
  /// Reads the typed values; may throw ``ValidationError``.
  init(_ arguments: ParsedArguments<Options>) throws
  /// Checks values against each other before anything runs; throws ``ValidationError``.
  func validate() throws
  /// Does the work; returns the exit status.
  func run() async throws -> Int32
}

extension ParsableCommand {
  func validate() throws {}

  /// The spec `--help`, the parser and the completion scripts share.
  static var spec: CommandSpec {
    CommandSpec(
      name: "spindle \(configuration.name)",
      abstract: configuration.abstract,
      discussion: configuration.discussion,
      positionals: configuration.positionals,
      options: Options().declarations
    )
  }

  /// Parses, initialises and validates: the command `run()` would run. Throws ``CleanExit`` for `--help`, and
  /// ``UsageError`` for anything wrong with the arguments.
  static func parse(_ arguments: [String]) throws -> Self {
    let spec = self.spec
    let parsed = try spec.parse(arguments, as: Options.self)
    if parsed.helpRequested { throw CleanExit(output: spec.help) }
    do {
      let command = try Self(parsed)
      try command.validate()
      return command
    } catch let error as ValidationError {
      throw spec.usageError(error.message)
    }
  }

  /// Parses `arguments`, then runs the command.
  static func main(_ arguments: [String]) async throws -> Int32 {
    try await parse(arguments).run()
  }
}
