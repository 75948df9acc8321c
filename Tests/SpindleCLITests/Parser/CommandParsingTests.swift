import Spindle
import Testing

@testable import SpindleCLI
@testable import TiltShift

/// The real commands' reading of their arguments, in-process: everything up to `run()`.
@Suite struct CommandParsingTests {
  /// The message of the usage error `body` throws, or nil.
  func usageMessage(_ body: () throws -> Void) -> String? {
    do {
      try body()
      return nil
    } catch let error as UsageError {
      return error.message
    } catch {
      return "unexpected \(error)"
    }
  }

  @Test func everyOptionTheCommandsHadIsStillDeclared() {
    #expect(
      DemoCommand.Options().declarations.map(\.name) == [
        "output", "count", "size", "jobs", "rounds", "trace", "timeline", "graph",
      ])
    #expect(
      TiltShiftCommand.Options().declarations.map(\.name) == [
        "output", "jobs", "radius", "band", "intensity", "quality", "format", "suffix", "max-pixels", "memory",
        "strip", "lenient", "background", "shard", "recursive", "overwrite", "quiet", "json", "trace", "timeline",
        "graph",
      ])
    #expect(TourCommand.Options().declarations.map(\.name) == ["list", "timeline"])
    #expect(BenchCommand.Options().declarations.map(\.name) == ["quick", "runs", "json", "list"])
    let shorts = TiltShiftCommand.Options().declarations.compactMap { $0.short.map { "\($0)" } }
    #expect(shorts == ["o", "j", "r", "q"])
  }

  @Test func tiltShiftDefaults() throws {
    let command = try TiltShiftCommand.parse(["in", "-o", "out"])
    #expect(command.inputs == ["in"])
    #expect(command.outputFolder == "out")
    #expect(command.jobs == WorkQueue.activeProcessorCount)
    #expect(command.radius == TiltShiftParameters.defaultRadius)
    #expect(command.band == 0.35...0.65)
    #expect(command.intensity == 0.5)
    #expect(command.quality == 90)
    #expect(command.format == "same")
    #expect(command.suffix == "-tiltshift")
    #expect(command.maxPixels == Int(Int32.max) * 4)  // the memory budget decides by default
    #expect(command.shard == TiltShiftCommand.Shard(index: 1, count: 1))
    #expect(!command.recursive && !command.overwrite && !command.quiet && !command.json)
  }

  @Test func tiltShiftReadsEveryOption() throws {
    let command = try TiltShiftCommand.parse([
      "a.jpg", "folder", "-o", "out", "-j", "3", "--radius", "4.5", "--band", "0.2-0.4", "--intensity=1",
      "--quality", "75", "--format", "jpg", "--suffix", "", "--max-pixels", "1000", "--shard", "2/5", "-rq",
      "--overwrite", "--json",
    ])
    #expect(command.inputs == ["a.jpg", "folder"])
    #expect(command.jobs == 3)
    #expect(command.radius == 4.5)
    #expect(command.band == 0.2...0.4)
    #expect(command.intensity == 1)
    #expect(command.quality == 75)
    #expect(command.format == "jpeg", "jpg is jpeg")
    #expect(command.suffix == "")
    #expect(command.maxPixels == 1000)
    #expect(command.shard == TiltShiftCommand.Shard(index: 2, count: 5))
    #expect(command.recursive && command.quiet && command.overwrite && command.json)
  }

  @Test func tiltShiftTakesShortValuesAttached() throws {
    // `-j4` was refused ("unknown option '-4' in '-j4'"); only `-j 4` worked.
    let command = try TiltShiftCommand.parse(["a.jpg", "-oout", "-j4"])
    #expect(command.jobs == 4 && command.outputFolder == "out")
    let bundled = try TiltShiftCommand.parse(["a.jpg", "-qrj2", "-o", "out"])
    #expect(bundled.jobs == 2 && bundled.quiet && bundled.recursive)
    #expect(try DemoCommand.parse(["-j3", "-od"]).jobs == 3)
    #expect(
      usageMessage { _ = try TiltShiftCommand.parse(["a.jpg", "-o", "out", "-j0"]) }
        == "--jobs expects a whole number from 1 to 256, got '0'")
    #expect(
      usageMessage { _ = try TiltShiftCommand.parse(["a.jpg", "-o", "out", "-json"]) }
        == "unknown option '-json'; did you mean '--json'?")
  }

  @Test func tiltShiftBadUsage() {
    let base = ["x.jpg", "-o", "out"]
    let cases: [([String], String)] = [
      (["x.jpg"], "missing -o/--output <dir>"),
      (["x.jpg", "-o", ""], "--output expects a non-empty value, got ''"),
      ([], "missing -o/--output <dir>"),
      (["-o", "out"], "missing argument <inputs>"),
      (base + ["--jobs=0"], "--jobs expects a whole number from 1 to 256, got '0'"),
      (
        base + ["--radius", "abc"],
        "--radius expects a number from 0 to \(Int(TiltShiftParameters.maximumRadius)), got 'abc'"
      ),
      (base + ["--band", "0.7-0.2"], "--band expects two fractions 'a-b' with 0 ≤ a ≤ b ≤ 1, got '0.7-0.2'"),
      // A negative lower bound was read as "0.1-0.5": the leading '-' was dropped as an empty piece.
      (base + ["--band=-0.1-0.5"], "--band expects two fractions 'a-b' with 0 ≤ a ≤ b ≤ 1, got '-0.1-0.5'"),
      (base + ["--band", "0.2-0.3-0.4"], "--band expects two fractions 'a-b' with 0 ≤ a ≤ b ≤ 1, got '0.2-0.3-0.4'"),
      (base + ["--shard", "4/3"], "--shard expects K/N with 1 ≤ K ≤ N, got '4/3'"),
      (base + ["--format", "gif"], "--format expects one of jpeg, jpg, png, same, got 'gif'"),
      (base + ["--format", "pgn"], "--format expects one of jpeg, jpg, png, same, got 'pgn'; did you mean 'png'?"),
      (base + ["--suffix", "a/b"], "--suffix must not contain '/'"),
      (base + ["--jbos", "2"], "unknown option '--jbos'; did you mean '--jobs'?"),
      (base + ["--qiet"], "unknown option '--qiet'; did you mean '--quiet'?"),
    ]
    for (arguments, message) in cases {
      #expect(usageMessage { _ = try TiltShiftCommand.parse(arguments) } == message, "\(arguments)")
    }
  }

  @Test func tiltShiftRadiusBoundComesFromTheFilter() {
    let limit = TiltShiftParameters.maximumRadius
    #expect(usageMessage { _ = try TiltShiftCommand.parse(["x", "-o", "o", "--radius", "\(limit)"]) } == nil)
    #expect(usageMessage { _ = try TiltShiftCommand.parse(["x", "-o", "o", "--radius", "\(limit + 1)"]) } != nil)
  }

  @Test func helpIsACleanExitWithTheCommandsHelp() {
    for command in SpindleTool.subcommands {
      do {
        _ = try command.parse(["--help"])
        Issue.record("\(command) --help did not exit")
      } catch let exit as CleanExit {
        #expect(exit.output.contains("USAGE: spindle \(command.configuration.name)"))
        for option in command.spec.options { #expect(exit.output.contains("--\(option.name)")) }
      } catch {
        Issue.record("\(error)")
      }
    }
  }

  @Test func demoOptions() throws {
    let defaults = try DemoCommand.parse([])
    #expect(defaults.size == DemoCommand.Size(width: 2400, height: 1600))
    #expect(defaults.count == 6)
    #expect(defaults.output == "spindle-demo-output")
    let command = try DemoCommand.parse(["-o", "d", "--count", "3", "--size", "320X200", "-j", "2"])
    #expect(command.size == DemoCommand.Size(width: 320, height: 200))
    #expect(command.output == "d" && command.count == 3 && command.jobs == 2)
    #expect(usageMessage { _ = try DemoCommand.parse(["--size", "3x3"]) }?.hasPrefix("--size expects WxH") == true)
    #expect(usageMessage { _ = try DemoCommand.parse(["--size", "10x"]) } != nil)
    #expect(usageMessage { _ = try DemoCommand.parse(["--count", "201"]) } != nil)
    #expect(usageMessage { _ = try DemoCommand.parse(["extra"]) } == "unexpected argument 'extra'")
  }

  @Test func tourPagesByNameOrNumber() throws {
    #expect(try TourCommand.parse([]).selected?.count == TourCommand.pages.count)
    #expect(try TourCommand.parse(["gcd"]).selected?.map(\.name) == ["gcd"])
    #expect(try TourCommand.parse(["1"]).selected?.map(\.name) == [TourCommand.pages[0].name])
    #expect(try TourCommand.parse(["--list"]).list)
    #expect(usageMessage { _ = try TourCommand.parse(["nope"]) }?.hasPrefix("no tour page 'nope' (pages: ") == true)
    #expect(usageMessage { _ = try TourCommand.parse(["piepline"]) }?.hasSuffix("did you mean 'pipeline'?") == true)
    #expect(usageMessage { _ = try TourCommand.parse(["99"]) } != nil)
  }

  @Test func benchSuitesAreCheckedBeforeAnythingRuns() throws {
    let command = try BenchCommand.parse(["--quick", "--runs", "3", "queues", "executors"])
    #expect(command.quick && command.runs == 3 && command.suites == ["queues", "executors"])
    #expect(try BenchCommand.parse([]).runs == nil, "no --runs: each suite's own default")
    #expect(usageMessage { _ = try BenchCommand.parse(["--runs", "0"]) } != nil)
    #expect(usageMessage { _ = try BenchCommand.parse(["queuse"]) }?.hasSuffix("did you mean 'queues'?") == true)
  }

  @Test func quietPrintsOnlyErrors() {
    let item = BatchItem(input: "in.jpg", output: "out.jpg")
    let succeeded = FileReport(
      item: item, outcome: .succeeded(width: 1, height: 1, bytesRead: 1, bytesWritten: 1), timings: StageTimings())
    let failed = FileReport(
      item: item, outcome: .failed(ImageError(.emptyFile, path: "in.jpg")), timings: StageTimings())
    let cancelled = FileReport(item: item, outcome: .cancelled, timings: StageTimings())
    #expect(TiltShiftCommand.prints(failed, quiet: true))
    #expect(!TiltShiftCommand.prints(cancelled, quiet: true), "Ctrl-C under --quiet: no line per cancelled file")
    #expect(!TiltShiftCommand.prints(succeeded, quiet: true))
    for report in [succeeded, failed, cancelled] { #expect(TiltShiftCommand.prints(report, quiet: false)) }
  }
}
