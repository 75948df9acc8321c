import Foundation
import TiltShift

/// The `spindle` command-line tool: the proof that Spindle works on a real job.
///
/// `main.swift` of the `spindle` executable only calls ``main(_:)``; everything else lives here so that tests
/// run the parser and the commands in-process.
package enum SpindleTool {
  static let version = "0.1.0"

  /// Every subcommand, in the order `--help` lists them: the one list that dispatch, help and completion read.
  static let subcommands: [any ParsableCommand.Type] = [
    DemoCommand.self, TiltShiftCommand.self, TourCommand.self, BenchCommand.self,
  ]

  /// The exit statuses, as `--help` documents them.
  enum ExitStatus {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let interrupted: Int32 = 130
  }

  struct Options: OptionGroup {
    let version = Option<Bool>.flag("version", help: "Show the version.")
    let generateCompletionScript = Option<String?>.custom(
      "generate-completion-script", valueName: "shell", help: "Print a completion script for bash, zsh or fish.",
      default: nil, defaultDescription: nil, expectation: "one of bash, zsh, fish",
      completion: .choices(CompletionShell.allCases.map(\.rawValue)),
      parse: { raw -> String?? in CompletionShell(rawValue: raw) == nil ? .none : .some(raw) })
  }

  static var spec: CommandSpec {
    var discussion = "SUBCOMMANDS:\n"
    for command in subcommands {
      discussion += CommandSpec.row(command.configuration.name, command.configuration.abstract)
    }
    discussion += """

        See 'spindle <subcommand> --help' for details.

      EXIT STATUS:
        0 success, 1 some work failed, 2 bad usage (unknown or mistyped option or value), 130 interrupted.
      """
    return CommandSpec(
      name: "spindle",
      abstract: "Concurrent work for Swift, proven on a tilt-shift image pipeline.",
      discussion: discussion,
      positionals: [
        Positional(
          name: "subcommand", help: subcommands.map { $0.configuration.name }.joined(separator: ", ") + ".",
          optional: true)
      ],
      options: Options().declarations
    )
  }

  /// What the root command was asked to do, before anything runs.
  enum Request {
    /// Print `text` on standard output and exit 0 (help, version, a completion script).
    case print(String)
    /// Run a subcommand with the rest of the arguments.
    case run(any ParsableCommand.Type, [String])
  }

  /// Decides what `spindle arguments...` asks for; throws ``UsageError`` for bad usage.
  static func request(for arguments: [String]) throws -> Request {
    let spec = self.spec
    guard let first = arguments.first else { return .print(spec.help) }
    if let command = subcommands.first(where: { $0.configuration.name == first }) {
      return .run(command, Array(arguments.dropFirst()))
    }
    if first == "help" {
      // `spindle help tiltshift` is `spindle tiltshift --help`.
      guard arguments.count > 1 else { return .print(spec.help) }
      return try request(for: Array(arguments.dropFirst()) + ["--help"])
    }
    guard first.hasPrefix("-") else {
      var message = "unknown subcommand '\(first)'"
      if let near = Suggestion.nearest(to: first, among: subcommands.map { $0.configuration.name }) {
        message += "; did you mean '\(near)'?"
      }
      throw spec.usageError(message)
    }
    let parsed = try spec.parse(arguments, as: Options.self)
    if let extra = parsed.positionals.first {
      throw spec.usageError("unexpected argument '\(extra)' (the subcommand comes first)")
    }
    if parsed.helpRequested { return .print(spec.help) }
    if let shell = parsed[\.generateCompletionScript].flatMap(CompletionShell.init(rawValue:)) {
      return .print(CompletionScript(shell: shell, root: spec, subcommands: subcommands.map { $0.spec }).text)
    }
    if parsed[\.version] { return .print(version) }
    return .print(spec.help)
  }

  /// The process's arguments without the program name, each byte that is not UTF-8 kept as a ``SystemPath``
  /// escape: `CommandLine.arguments` turns such a byte into U+FFFD, so `spindle tiltshift $'\xFF.jpg'` named a file
  /// that does not exist.
  package static var commandLineArguments: [String] {
    (0..<Int(CommandLine.argc)).dropFirst().map { index in
      guard let argument = CommandLine.unsafeArgv[index] else { return "" }
      return SystemPath.string(decoding: UnsafeRawBufferPointer(start: argument, count: strlen(argument)))
    }
  }

  /// Runs `spindle` with `arguments` (without the program name) and returns the exit status.
  package static func main(_ arguments: [String]) async -> Int32 {
    do {
      switch try request(for: arguments) {
      case .print(let text):
        Terminal.out(text)
        return ExitStatus.success
      case .run(let command, let rest):
        return try await command.main(rest)
      }
    } catch let exit as CleanExit {
      Terminal.out(exit.output)
      return ExitStatus.success
    } catch let error as UsageError {
      Terminal.error(error.description)
      Terminal.error("See '\(error.command) --help'.")
      return ExitStatus.usage
    } catch {
      Terminal.error("error: \(error)")
      return ExitStatus.failure
    }
  }
}
