import Testing

@testable import SpindleCLI

/// A command shape used only here, so the parser is tested apart from the real commands.
private struct Sample: OptionGroup {
  let count = Option<Int>.integer("count", short: "c", help: "How many.", default: 3, range: 1...10)
  let ratio = Option<Double>.number("ratio", help: "A ratio.", default: 0.5, range: 0...1)
  let mode = Option<String>.choice("mode", help: "The mode.", default: "fast", choices: ["fast", "slow", "same"])
  let name = Option<String?>.text("name", short: "n", valueName: "text", help: "A name.")
  let target = Option<String?>.text("target", short: "t", valueName: "dir", help: "Where.", required: true)
  let verbose = Option<Bool>.flag("verbose", short: "v", help: "Talk more.")
  let recursive = Option<Bool>.flag("recursive", short: "r", help: "Go down.")
}

private let spec = CommandSpec(
  name: "tool sample",
  abstract: "A sample.",
  positionals: [Positional(name: "inputs", help: "Things.", repeating: true)],
  options: Sample().declarations
)

private func parse(_ arguments: [String]) throws -> ParsedArguments<Sample> {
  try spec.parse(arguments, as: Sample.self)
}

/// The error `arguments` give, or nil when they parse.
private func usageError(_ arguments: [String]) -> UsageError? {
  do {
    _ = try parse(arguments)
    return nil
  } catch let error as UsageError {
    return error
  } catch {
    Issue.record("unexpected \(error)")
    return nil
  }
}

@Suite struct ArgumentParserTests {
  @Test func declarationsAreFoundInOrder() {
    #expect(Sample().declarations.map(\.name) == ["count", "ratio", "mode", "name", "target", "verbose", "recursive"])
  }

  @Test func defaultsWhenNotGiven() throws {
    let parsed = try parse(["a", "-t", "out"])
    #expect(parsed[\.count] == 3)
    #expect(parsed[\.ratio] == 0.5)
    #expect(parsed[\.mode] == "fast")
    #expect(parsed[\.name] == nil)
    #expect(parsed[\.verbose] == false)
    #expect(!parsed.isGiven(\.count))
    #expect(parsed.positionals == ["a"])
  }

  @Test func everySpellingOfAValue() throws {
    for arguments in [
      ["-t", "out", "--count", "7", "x"], ["-t", "out", "--count=7", "x"], ["-t", "out", "-c", "7", "x"],
      ["x", "--target=out", "-c", "7"],
    ] {
      let parsed = try parse(arguments)
      #expect(parsed[\.count] == 7, "\(arguments)")
      #expect(parsed[\.target] == "out", "\(arguments)")
      #expect(parsed.positionals == ["x"], "\(arguments)")
      #expect(parsed.isGiven(\.count))
    }
  }

  @Test func lastValueWins() throws {
    #expect(try parse(["x", "-t", "a", "--count", "2", "--count", "9"])[\.count] == 9)
  }

  @Test func bundledFlagsAndAValueTakingShortLast() throws {
    let parsed = try parse(["x", "-vrt", "out"])
    #expect(parsed[\.verbose] && parsed[\.recursive])
    #expect(parsed[\.target] == "out")
    // The letters after a value-taking option could as well be flags: an error, not a target named "v".
    #expect(
      usageError(["x", "-tv", "out"])?.message
        == "-t needs a value: put it last in '-tv' with the value after it, or write '-t v' to mean the value 'v'")
  }

  @Test func aShortOptionsValueMayBeAttached() throws {
    // `-c7` was "unknown option '-7' in '-c7'": only `-c 7` worked.
    #expect(try parse(["x", "-t", "out", "-c7"])[\.count] == 7)
    #expect(try parse(["x", "-tout"])[\.target] == "out")
    let bundled = try parse(["x", "-vrtout", "-nbob"])
    #expect(bundled[\.verbose] && bundled[\.recursive])
    #expect(bundled[\.target] == "out" && bundled[\.name] == "bob")
    // Attached, a value may start with a dash or name an option: it is said to be a value.
    #expect(try parse(["x", "-t--verbose"])[\.target] == "--verbose")
    #expect(try parse(["x", "-t", "out", "-n-v"])[\.name] == "-v")
    // An attached value is checked as any other.
    #expect(usageError(["x", "-t", "out", "-c0"])?.message == "--count expects a whole number from 1 to 10, got '0'")
    #expect(usageError(["x", "-t", "out", "-c=7"])?.message == "--count expects a whole number from 1 to 10, got '=7'")
    // A long option typed with one dash is not a short one with a value (`-target` is not `-t arget`).
    #expect(usageError(["x", "-target", "out"])?.message == "unknown option '-target'; did you mean '--target'?")
  }

  @Test func doubleDashEndsOptions() throws {
    let parsed = try parse(["-t", "out", "--", "--count", "-v", "-"])
    #expect(parsed.positionals == ["--count", "-v", "-"])
    #expect(parsed[\.count] == 3)
    #expect(!parsed[\.verbose])
  }

  @Test func anOptionIsNeverTakenAsAnotherOptionsValue() throws {
    #expect(usageError(["x", "-t", "--verbose"])?.message == "--target needs a value <dir>")
    #expect(usageError(["x", "-t", "-v"])?.message == "--target needs a value <dir>")
    #expect(try parse(["x", "--target=--verbose"])[\.target] == "--verbose")
    // A word that is no option of this command is a value: a folder may start with a dash.
    #expect(try parse(["x", "-t", "-out"])[\.target] == "-out")
  }

  @Test func mistypedValuesAreErrorsNeverDefaults() {
    let cases: [([String], String)] = [
      (["--count", "abc"], "--count expects a whole number from 1 to 10, got 'abc'"),
      (["--count", "0"], "--count expects a whole number from 1 to 10, got '0'"),
      (["--count=11"], "--count expects a whole number from 1 to 10, got '11'"),
      (["--count", "2.5"], "--count expects a whole number from 1 to 10, got '2.5'"),
      (["--ratio", "nan"], "--ratio expects a number from 0 to 1, got 'nan'"),
      (["--ratio", "1.5"], "--ratio expects a number from 0 to 1, got '1.5'"),
      (["--mode", "quick"], "--mode expects one of fast, slow, same, got 'quick'"),
      (["--mode", "slwo"], "--mode expects one of fast, slow, same, got 'slwo'; did you mean 'slow'?"),
      (["--target", ""], "--target expects a non-empty value, got ''"),
      (["--verbose=yes"], "--verbose takes no value"),
    ]
    for (arguments, message) in cases {
      #expect(usageError(["x", "-t", "out"] + arguments)?.message == message, "\(arguments)")
    }
  }

  @Test func unknownOptionsSuggestTheNearestName() {
    let cases: [(String, String)] = [
      ("--cuont", "unknown option '--cuont'; did you mean '--count'?"),
      ("--verbos", "unknown option '--verbos'; did you mean '--verbose'?"),
      ("--recursiv", "unknown option '--recursiv'; did you mean '--recursive'?"),
      ("--rec", "unknown option '--rec'; did you mean '--recursive'?"),
      ("--helpp", "unknown option '--helpp'; did you mean '--help'?"),
      ("--zzzzzz", "unknown option '--zzzzzz'"),
      ("-x", "unknown option '-x'"),
      ("-vx", "unknown option '-x' in '-vx'"),
    ]
    for (argument, message) in cases {
      #expect(usageError(["x", "-t", "out", argument])?.message == message, "\(argument)")
    }
  }

  @Test func missingAndExtraArguments() {
    #expect(usageError(["x"])?.message == "missing -t/--target <dir>")
    #expect(usageError(["-t", "out"])?.message == "missing argument <inputs>")
    let single = CommandSpec(name: "tool one", abstract: "One.", positionals: [Positional(name: "page", help: "")])
    #expect(throws: UsageError.self) { try single.parse(["a", "b"], as: NoOptions.self) }
  }

  @Test func helpSkipsTheRequiredChecks() throws {
    #expect(try parse(["--help"]).helpRequested)
    #expect(try parse(["-h"]).helpRequested)
  }

  @Test func usageErrorsNameTheCommandAndItsUsage() throws {
    let error = try #require(usageError(["x"]))
    #expect(error.command == "tool sample")
    #expect(error.description.hasPrefix("error: missing -t/--target <dir>\nUSAGE: tool sample <inputs> ..."))
  }

  @Test func helpListsEveryDeclarationWithItsDefault() {
    let help = spec.help
    #expect(help.contains("USAGE: tool sample <inputs> ... [-c <n>] [--ratio <x>] [--mode <fast|slow|same>]"))
    #expect(help.contains("-t <dir> [-v] [-r]"), "a required option has no brackets")
    #expect(help.contains("  -c, --count <n>           How many. (default: 3)\n"))
    #expect(help.contains("  --ratio <x>               A ratio. (default: 0.5)\n"))
    #expect(help.contains("  -t, --target <dir>        Where.\n"))
    #expect(help.contains("  -h, --help                Show help information.\n"))
    for option in Sample().declarations { #expect(help.contains("--\(option.name)")) }
  }

  @Test func editDistanceCountsASwapAsOneEdit() {
    #expect(Suggestion.distance("jobs", "jobs") == 0)
    #expect(Suggestion.distance("jbos", "jobs") == 1)
    #expect(Suggestion.distance("", "abc") == 3)
    #expect(Suggestion.distance("kitten", "sitting") == 3)
    #expect(Suggestion.nearest(to: "tiltshfit", among: ["demo", "tiltshift", "tour"]) == "tiltshift")
    #expect(Suggestion.nearest(to: "xyz", among: ["demo", "tour"]) == nil)
    #expect(Suggestion.nearest(to: "", among: ["demo"]) == nil)
  }
}
