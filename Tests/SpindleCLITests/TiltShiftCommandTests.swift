import Foundation
import SpindleTestSupport
import Testing
import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// End-to-end tests: they run the built `spindle` binary as a user would.
@Suite(.serialized) struct TiltShiftCommandTests {
  /// Writes a small sample photo as JPEG or PNG.
  static func writePhoto(_ path: URL, seed: UInt64, format: ImageFormat = .jpeg, width: Int = 160, height: Int = 120)
    throws
  {
    let image = SamplePhoto(seed: seed).render(width: width, height: height)
    let bytes = try ImageEncoder(format: format).encode(image)
    try Data(bytes).write(to: path)
  }

  /// Writes `photos` 640×480 PNGs into `root/in`, starts `spindle tiltshift` on them (one job, into `root/out`) and
  /// runs `action` (on a polling thread, see ``CLI/waitWhileRunning(_:within:until:then:)``) as soon as the first
  /// output exists, so that the signals it sends land mid-batch.
  static func startMidBatch(
    photos: Int,
    seed: UInt64,
    in root: URL,
    then action: @escaping @Sendable (Process) -> Void
  ) async throws -> (Process, Pipe, Pipe) {
    let inputs = root.appendingPathComponent("in")
    let outputs = root.appendingPathComponent("out")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    let photo = try ImageEncoder(format: .png).encode(SamplePhoto(seed: seed).render(width: 640, height: 480))
    for index in 0..<photos {
      try Data(photo).write(to: inputs.appendingPathComponent(String(format: "p%02d.png", index)))
    }
    let (process, out, err) = try CLI.start(["tiltshift", inputs.path, "-o", outputs.path, "--jobs", "1"])
    let acted = await CLI.waitWhileRunning(
      process, until: { (try? files(in: outputs).contains { !$0.hasPrefix(".") }) == true }, then: action)
    #expect(acted, "the batch ended before its first output was seen")
    return (process, out, err)
  }

  static func files(in folder: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
  }

  @Test func mixedFolderProcessesGoodFilesAndReportsEachBadOne() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    let outputs = root.appendingPathComponent("out")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    try Self.writePhoto(inputs.appendingPathComponent("good1.jpg"), seed: 1)
    try Self.writePhoto(inputs.appendingPathComponent("good2.png"), seed: 2, format: .png)
    // A JPEG cut off in the middle of its data, a text file posing as PNG, an empty file.
    let whole = try ImageEncoder(format: .jpeg).encode(SamplePhoto(seed: 3).render(width: 160, height: 120))
    try Data(whole.prefix(whole.count / 3)).write(to: inputs.appendingPathComponent("corrupt.jpg"))
    try Data("just some text\n".utf8).write(to: inputs.appendingPathComponent("text.png"))
    try Data().write(to: inputs.appendingPathComponent("empty.jpg"))
    try Data("notes".utf8).write(to: inputs.appendingPathComponent("readme.txt"))

    let result = try await CLI.run(["tiltshift", inputs.path, "-o", outputs.path, "--radius", "4"])

    #expect(result.status == 1, "some files failed, so exit 1: \(result.stderr)")
    for bad in ["corrupt.jpg", "text.png", "empty.jpg"] {
      #expect(result.stderr.contains(bad), "\(bad) must be reported: \(result.stderr)")
    }
    #expect(!result.stderr.contains("readme.txt"), "non-image extensions are not inputs")
    let written = try Self.files(in: outputs)
    #expect(
      written == ["good1-tiltshift.jpg", "good2-tiltshift.png"], "only complete outputs, no temp files: \(written)")
    let decoded = try ImageDecoder().decode(contentsOf: outputs.appendingPathComponent("good2-tiltshift.png").path)
    #expect(decoded.width == 160 && decoded.height == 120)
    #expect(result.stderr.contains("2 written"))
  }

  @Test func refusesToOverwriteInputsOrExistingOutputs() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let photo = root.appendingPathComponent("photo.jpg")
    try Self.writePhoto(photo, seed: 4)
    let before = try Data(contentsOf: photo)

    let sameName = try await CLI.run(["tiltshift", photo.path, "-o", root.path, "--suffix", ""])
    #expect(sameName.status == 1)
    #expect(sameName.stderr.contains("would overwrite an input"))
    #expect(try Data(contentsOf: photo) == before, "the input is untouched")

    let out = root.appendingPathComponent("out")
    #expect(try await CLI.run(["tiltshift", photo.path, "-o", out.path]).status == 0)
    let again = try await CLI.run(["tiltshift", photo.path, "-o", out.path])
    #expect(again.status == 1)
    #expect(again.stderr.contains("--overwrite"))
    #expect(try await CLI.run(["tiltshift", photo.path, "-o", out.path, "--overwrite"]).status == 0)
  }

  @Test func shardsAreDisjointAndCoverTheInput() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    let names = (0..<7).map { "p\($0).jpg" }
    for (index, name) in names.enumerated() {
      try Self.writePhoto(inputs.appendingPathComponent(name), seed: UInt64(index), width: 48, height: 32)
    }
    var seen: [String] = []
    for shard in 1...3 {
      let out = root.appendingPathComponent("out\(shard)")
      let result = try await CLI.run(["tiltshift", inputs.path, "-o", out.path, "--shard", "\(shard)/3", "--json"])
      #expect(result.status == 0, "\(result.stderr)")
      let object = try #require(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
      let files = try #require(object["files"] as? [[String: Any]])
      seen += files.compactMap { ($0["input"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } }
      #expect(files.allSatisfy { $0["status"] as? String == "ok" })
    }
    #expect(seen.sorted() == names.sorted(), "every input exactly once across the shards: \(seen)")
  }

  @Test func badUsageExitsTwoWithUsage() async throws {
    let cases: [([String], String)] = [
      (["tiltshift", "x.jpg"], "--output"),
      (["tiltshift", "x.jpg", "-o", "/tmp/x", "--radius", "abc"], "--radius"),
      (["tiltshift", "x.jpg", "-o", "/tmp/x", "--jobs=0"], "--jobs"),
      (["tiltshift", "x.jpg", "-o", "/tmp/x", "--shard", "4/3"], "--shard"),
      (["tiltshift", "x.jpg", "-o", "/tmp/x", "--format", "gif"], "--format"),
      (["tiltshift", "x.jpg", "-o", "/tmp/x", "--bogus"], "--bogus"),
      (["tiltshift"], "<inputs>"),
      (["frobnicate"], "frobnicate"),
      (["demo", "--size", "3x3"], "--size"),
      (["demo", "--rounds", "0"], "--rounds"),
    ]
    for (arguments, mention) in cases {
      let result = try await CLI.run(arguments)
      #expect(result.status == 2, "\(arguments) should be bad usage")
      #expect(result.stderr.contains(mention), "\(arguments): error should name \(mention): \(result.stderr)")
      #expect(result.stderr.contains("USAGE:"), "\(arguments): usage shown")
    }
  }

  @Test func helpAndVersion() async throws {
    let help = try await CLI.run(["--help"])
    #expect(help.status == 0)
    for subcommand in ["demo", "tiltshift", "tour", "bench"] { #expect(help.stdout.contains(subcommand)) }
    for subcommand in ["demo", "tiltshift", "tour", "bench"] {
      let result = try await CLI.run([subcommand, "--help"])
      #expect(result.status == 0)
      #expect(result.stdout.contains("USAGE: spindle \(subcommand)"))
    }
    let version = try await CLI.run(["--version"])
    #expect(version.status == 0)
    #expect(version.stdout.split(separator: ".").count == 3)
  }

  @Test func interruptLeavesOnlyCompleteOutputsAndExits130() async throws {
    for interrupts in [1, 2] {
      let root = try CLI.temporaryFolder()
      defer { try? FileManager.default.removeItem(at: root) }
      let outputs = root.appendingPathComponent("out")
      let (process, out, err) = try await Self.startMidBatch(photos: 40, seed: 9, in: root) { process in
        for _ in 0..<interrupts {
          CLI.signal(process, SIGINT)
          usleep(20_000)
        }
      }
      let result = await CLI.wait(process, out, err, timeout: 60)
      #expect(result.status == 130, "interrupted ×\(interrupts): \(result.stderr)")
      let written = try Self.files(in: outputs)
      #expect(written.allSatisfy { !$0.contains(ImageFile.temporaryMarker) }, "no temporary files: \(written)")
      #expect(written.count < 40, "the batch stopped early")
      for name in written {
        let image = try ImageDecoder().decode(contentsOf: outputs.appendingPathComponent(name).path)
        #expect(image.width == 640, "\(name) is a complete image")
      }
    }
  }

  @Test func sigquitPrintsTheStuckQueueReportAndTheBatchGoesOn() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let outputs = root.appendingPathComponent("out")
    // Twice, a little apart: one report may land in the instant between two files when nothing runs.
    let (process, out, err) = try await Self.startMidBatch(photos: 24, seed: 4, in: root) { process in
      CLI.signal(process, SIGQUIT)
      usleep(60_000)
      CLI.signal(process, SIGQUIT)
    }
    let result = await CLI.wait(process, out, err, timeout: 60)
    #expect(result.status == 0, "SIGQUIT neither kills nor stops the batch: \(result.status) \(result.stderr)")
    #expect(result.stderr.contains("spindle: SIGQUIT, the batch goes on"), "\(result.stderr)")
    #expect(result.stderr.contains("TiltShiftBatch: "), "\(result.stderr)")
    #expect(result.stderr.contains("WorkQueue 'tiltshift': width 1"), "\(result.stderr)")
    #expect(result.stderr.contains("  running '"), "a report names the running item: \(result.stderr)")
    #expect(result.stderr.contains("done: 24 written"), "\(result.stderr)")
    let written = try Self.files(in: outputs)
    #expect(written.count == 24, "every output written: \(written)")
    #expect(written.allSatisfy { !$0.contains(ImageFile.temporaryMarker) })
    let help = try await CLI.run(["tiltshift", "--help"])
    #expect(help.stdout.contains("Ctrl-\\ (SIGQUIT)"), "--help tells: \(help.stdout)")
  }

  @Test func quietInterruptPrintsOnlyTheSummary() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    let outputs = root.appendingPathComponent("out")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    let photo = try ImageEncoder(format: .png).encode(SamplePhoto(seed: 5).render(width: 640, height: 480))
    for index in 0..<40 {
      try Data(photo).write(to: inputs.appendingPathComponent(String(format: "q%02d.png", index)))
    }
    let (process, out, err) = try CLI.start(["tiltshift", "-q", inputs.path, "-o", outputs.path, "--jobs", "1"])
    let interrupted = await CLI.waitWhileRunning(
      process, until: { (try? Self.files(in: outputs).contains { !$0.hasPrefix(".") }) == true },
      then: { CLI.signal($0, SIGINT) })
    #expect(interrupted, "the batch ended before its first output was seen")
    let result = await CLI.wait(process, out, err, timeout: 60)
    #expect(result.status == 130, "\(result.stderr)")
    let lines = result.stderr.split(separator: "\n")
    #expect(!lines.contains { $0.hasPrefix("cancelled ") }, "no line per cancelled file: \(result.stderr)")
    #expect(lines.count == 1, "--quiet and no error: the summary alone: \(result.stderr)")
    #expect(lines.last?.hasPrefix("interrupted: ") == true, "the summary still comes: \(result.stderr)")
    #expect(result.stderr.contains(" cancelled"), "the summary counts the cancelled files: \(result.stderr)")
  }
}

@Suite struct DemoCommandTests {
  @Test func demoRunsAndItsOutputsDecode() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let result = try await CLI.run(["demo", "-o", root.path, "--count", "3", "--size", "320x200", "--rounds", "2"])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.stdout.contains("speed-up"))
    // Two alternating rounds: each line is a median run, the speed-up the median of the two rounds' ratios.
    #expect(result.stdout.components(separatedBy: "the median round of 2)").count - 1 == 2, "\(result.stdout)")
    #expect(result.stdout.contains("cores (median of 2 rounds, "), "\(result.stdout)")
    #expect(result.stdout.contains("byte-identical"))
    for folder in ["serial", "concurrent"] {
      let names = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)
      #expect(names.count == 3)
      for name in names {
        let image = try ImageDecoder().decode(
          contentsOf: root.appendingPathComponent(folder).appendingPathComponent(name).path)
        #expect(image.width == 320 && image.height == 200)
      }
    }
  }

  // A CI run sent no signal at all: the test polled for the serial batch's first output from a starved cooperative
  // thread, and the demo had ended before it looked. Now the first signal goes as soon as the demo's first line
  // (printed once Ctrl-\ is watched) is read on a thread of its own, while sample photos are drawn.
  @Test func sigquitDuringTheDemoPrintsTheReportAndTheRunGoesOn() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let serial = root.appendingPathComponent("serial")
    let (process, out, err) = try CLI.start(["demo", "-o", root.path, "--count", "10", "--size", "1200x800"])
    // Everything on one thread of its own: a task could resume too late, after the demo ended.
    let (firstLine, sent) = await offPool { () -> (String?, Int) in
      let line = CLI.readLine(from: out, within: 60)
      var sent = 0
      // While the samples are drawn, then once the serial batch has written a file (mid-batch): each signal the
      // demo gets while it runs must come out as a report, never as a crash report or the end of the process.
      if line != nil, CLI.signal(process, SIGQUIT) { sent += 1 }
      let midBatch = eventually(within: 60) {
        !process.isRunning
          || (try? FileManager.default.contentsOfDirectory(atPath: serial.path).contains { !$0.hasPrefix(".") }) == true
      }
      if midBatch, CLI.signal(process, SIGQUIT) { sent += 1 }
      return (line, sent)
    }
    #expect(firstLine?.hasPrefix("Spindle demo") == true, "\(firstLine ?? "no line")")
    let result = await CLI.wait(process, out, err, timeout: 120)
    #expect(sent >= 1, "the demo ended before its first line was read")
    #expect(result.status == 0, "\(result.status): \(result.stderr)")
    let reports = result.stderr.components(separatedBy: "spindle: SIGQUIT, ").count - 1
    #expect(reports == sent, "one report per signal (\(sent) sent): \(result.stderr)")
    #expect(!result.stderr.contains("Crash") && !result.stderr.contains("swift-runtime"), "\(result.stderr)")
    // Whichever phase each signal met (drawing the samples, a batch, between batches), it got that phase's report.
    let phases = [
      "starting; going on", "drawing the sample photos; going on", "the batch goes on", "between two batches; going on",
      "comparing a round's outputs; going on",
    ]
    let reported = result.stderr.components(separatedBy: "spindle: SIGQUIT, ").dropFirst()
    #expect(reported.allSatisfy { report in phases.contains { report.hasPrefix($0) } }, "\(result.stderr)")
    #expect(result.stdout.contains("byte-identical"), "\(result.stdout)")
    let written = try FileManager.default.contentsOfDirectory(atPath: serial.path).filter { !$0.hasPrefix(".") }
    #expect(written.count == 10)
  }
}

@Suite struct TiltShiftPlanningTests {
  @Test func shardsAgreeOnCollisionsWithInputs() async throws {
    // a-tiltshift.jpg is an input (in shard 1) and the output of a.jpg (in shard 2): no shard may overwrite it.
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent("a.jpg"), seed: 1, width: 32, height: 24)
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent("a-tiltshift.jpg"), seed: 2, width: 32, height: 24)
    let before = try Data(contentsOf: root.appendingPathComponent("a-tiltshift.jpg"))
    for shard in ["1/2", "2/2"] {
      _ = try await CLI.run(["tiltshift", root.path, "-o", root.path, "--shard", shard, "--overwrite"])
    }
    #expect(try Data(contentsOf: root.appendingPathComponent("a-tiltshift.jpg")) == before)
  }

  @Test func sameFormatFollowsTheBytesNotTheName() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent("fake.png"), seed: 1, width: 32, height: 24)
    let out = root.appendingPathComponent("out")
    let result = try await CLI.run(["tiltshift", root.appendingPathComponent("fake.png").path, "-o", out.path])
    #expect(result.status == 0, "\(result.stderr)")
    let written = try TiltShiftCommandTests.files(in: out)
    #expect(written == ["fake-tiltshift.jpg"], "a JPEG named .png is written as .jpg: \(written)")
    let bytes = try [UInt8](Data(contentsOf: out.appendingPathComponent("fake-tiltshift.jpg")))
    #expect(ImageFormat(detecting: bytes) == .jpeg)
  }

  @Test func specialFilesAreRejectedNotOpened() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let fifo = root.appendingPathComponent("pipe.jpg")
    #expect(mkfifo(fifo.path, 0o600) == 0)
    let result = try await CLI.run(
      ["tiltshift", fifo.path, "-o", root.appendingPathComponent("out").path], timeout: 30)
    #expect(result.status == 1)
    #expect(result.stderr.contains("pipe.jpg: not a regular file"))
  }

  @Test func recursiveRunsMirrorSubfolders() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    for year in ["2023", "2024"] {
      let folder = root.appendingPathComponent("photos/\(year)")
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
      try TiltShiftCommandTests.writePhoto(
        folder.appendingPathComponent("IMG_0001.jpg"), seed: 1, width: 32, height: 24)
    }
    let out = root.appendingPathComponent("out")
    let result = try await CLI.run(["tiltshift", "-qr", root.appendingPathComponent("photos").path, "-o", out.path])
    #expect(result.status == 0, "\(result.stderr)")
    for year in ["2023", "2024"] {
      #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent("\(year)/IMG_0001-tiltshift.jpg").path))
    }
  }

  @Test func anOptionIsNeverTakenAsAValue() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let result = try await CLI.run(["tiltshift", root.path, "-o", "--json"])
    #expect(result.status == 2)
    #expect(result.stderr.contains("--output needs a value"))
    #expect(result.stderr.contains("See 'spindle tiltshift --help'"))
    #expect(!FileManager.default.fileExists(atPath: "--json"))
  }

}
