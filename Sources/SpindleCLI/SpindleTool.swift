import Foundation

/// The `spindle` command-line tool: the proof that Spindle works on a real job.
enum Spindle {
  static let version = "0.1.0"

  static let spec = CommandSpec(
    name: "spindle",
    abstract: "Concurrent work for Swift, proven on a tilt-shift image pipeline.",
    discussion: """
      SUBCOMMANDS:
        demo        Make sample images and run the tilt-shift pipeline serially and concurrently.
        tiltshift   Apply a tilt-shift filter to JPEG/PNG photos in batch.
        tour        Walk through the concurrency playground as runnable scenarios.
        bench       Measure Spindle against Foundation, Dispatch and TaskGroup.

        See 'spindle <subcommand> --help' for details.
      """,
    positionals: [("subcommand", "demo, tiltshift, tour or bench.", false, true)],
    options: [OptionSpec(name: "version", help: "Show the version.")]
  )

  static func main() async -> Int32 {
    var arguments = Array(CommandLine.arguments.dropFirst())
    do {
      guard let first = arguments.first else {
        Terminal.out(spec.help)
        return 0
      }
      arguments.removeFirst()
      switch first {
      case "demo": return try await DemoCommand.run(arguments)
      case "tiltshift": return try await TiltShiftCommand.run(arguments)
      case "tour":
        // The tour's pages block while they wait, as the playground did: give them a thread of their own,
        // not one of Swift's few cooperative threads.
        let tourArguments = arguments
        return try await withCheckedThrowingContinuation { continuation in
          Thread.detachNewThread { continuation.resume(with: Result { try TourCommand.run(tourArguments) }) }
        }
      case "bench": return try await BenchCommand.run(arguments)
      case "--version", "--help", "-h", "help":
        guard arguments.isEmpty else {
          throw UsageError(message: "unexpected argument '\(arguments[0])' after \(first)", usage: spec.usage)
        }
        Terminal.out(first == "--version" ? version : spec.help)
      default:
        throw UsageError(message: "unknown subcommand '\(first)'", usage: spec.usage)
      }
      return 0
    } catch let error as UsageError {
      Terminal.error(error.description)
      Terminal.error("See '\(error.command) --help'.")
      return 2
    } catch {
      Terminal.error("error: \(error)")
      return 1
    }
  }
}

// A closed output pipe must not kill a batch half-way: writes fail with EPIPE instead, and are ignored.
signal(SIGPIPE, SIG_IGN)
exit(await Spindle.main())
