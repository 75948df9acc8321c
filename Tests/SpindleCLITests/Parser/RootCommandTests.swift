import Foundation
import SpindleTestSupport
import Testing

@testable import SpindleCLI

/// `spindle` itself: dispatch, help, version, completion scripts; in-process.
@Suite struct RootCommandTests {
  func request(_ arguments: [String]) throws -> SpindleTool.Request { try SpindleTool.request(for: arguments) }

  func printed(_ arguments: [String]) throws -> String? {
    if case .print(let text) = try request(arguments) { return text }
    return nil
  }

  func usageMessage(_ arguments: [String]) -> String? {
    do {
      _ = try request(arguments)
      return nil
    } catch let error as UsageError {
      return error.message
    } catch {
      return "unexpected \(error)"
    }
  }

  @Test func subcommandsAndTheirHelpComeFromOneList() throws {
    let help = try #require(try printed([]))
    #expect(try printed(["--help"]) == help)
    #expect(try printed(["help"]) == help)
    for command in SpindleTool.subcommands {
      let name = command.configuration.name
      #expect(help.contains("  \(name) "), "\(name) listed")
      #expect(help.contains(command.configuration.abstract))
      guard case .run(let selected, let rest) = try request([name, "a", "--b"]) else {
        Issue.record("\(name) not dispatched")
        continue
      }
      #expect(ObjectIdentifier(selected) == ObjectIdentifier(command) && rest == ["a", "--b"])
    }
    #expect(help.contains("2 bad usage"), "the exit status for bad usage is documented")
  }

  @Test func helpForASubcommand() throws {
    guard case .run(let command, let rest) = try request(["help", "tiltshift"]) else {
      Issue.record("not dispatched")
      return
    }
    #expect(ObjectIdentifier(command) == ObjectIdentifier(TiltShiftCommand.self) && rest == ["--help"])
  }

  @Test func version() throws {
    #expect(try printed(["--version"]) == SpindleTool.version)
  }

  @Test func badUsage() {
    #expect(usageMessage(["frobnicate"]) == "unknown subcommand 'frobnicate'")
    #expect(usageMessage(["tiltshfit"]) == "unknown subcommand 'tiltshfit'; did you mean 'tiltshift'?")
    #expect(usageMessage(["--verison"]) == "unknown option '--verison'; did you mean '--version'?")
    #expect(usageMessage(["--version", "demo"]) == "unexpected argument 'demo' (the subcommand comes first)")
    #expect(
      usageMessage(["--generate-completion-script", "tcsh"])?.hasPrefix(
        "--generate-completion-script expects one of bash, zsh, fish") == true)
  }

  @Test func mainReturnsTwoForBadUsageAndZeroForHelp() async {
    #expect(await SpindleTool.main(["frobnicate"]) == 2)
    #expect(await SpindleTool.main(["tiltshift", "x.jpg", "-o", "o", "--jobs", "many"]) == 2)
    #expect(await SpindleTool.main(["tour", "--list"]) == 0)
  }

  @Test func completionScriptsNameEveryCommandAndOption() throws {
    for shell in CompletionShell.allCases {
      let script = try #require(try printed(["--generate-completion-script", shell.rawValue]))
      #expect(script.contains("spindle"))
      for command in SpindleTool.subcommands {
        #expect(script.contains(command.configuration.name), "\(shell): \(command.configuration.name)")
        for option in command.spec.options {
          switch shell {
          case .fish: #expect(script.contains("-l \(option.name)"), "\(shell): --\(option.name)")
          default: #expect(script.contains("--\(option.name)"), "\(shell): --\(option.name)")
          }
        }
      }
      #expect(script.contains("jpeg jpg png same"), "\(shell): --format's choices")
    }
  }

  /// Runs the bash script's completion function for a command line, in a real bash.
  func bashCompletions(_ words: [String]) async throws -> [String] {
    let script = try #require(try printed(["--generate-completion-script", "bash"]))
    return try await withTemporaryFolder("spindle-completion") { folder in
      let file = folder.appendingPathComponent("spindle.bash")
      try Data(script.utf8).write(to: file)
      try FileManager.default.createDirectory(
        at: folder.appendingPathComponent("photos"), withIntermediateDirectories: true)
      let quoted = words.map { "'\($0)'" }.joined(separator: " ")
      let command =
        "source spindle.bash; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _spindle; "
        + "printf '%s\\n' \"${COMPREPLY[@]}\""
      let output = await offPool { () -> Data in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.currentDirectoryURL = folder
        process.arguments = ["-c", command]
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { return Data() }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
      }
      return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
    }
  }

  @Test func bashCompletesSubcommandsOptionsAndValues() async throws {
    #expect(try await bashCompletions(["spindle", "ti"]) == ["tiltshift"])
    #expect(try await bashCompletions(["spindle", "tiltshift", "--ov"]) == ["--overwrite"])
    #expect(try await bashCompletions(["spindle", "tiltshift", "--format", "p"]) == ["png"])
    #expect(try await bashCompletions(["spindle", "tiltshift", "-o", "ph"]) == ["photos"])
    #expect(try await bashCompletions(["spindle", "tour", "pi"]) == ["pipeline"])
    #expect(try await bashCompletions(["spindle", "--generate-completion-script", "z"]) == ["zsh"])
  }
}
