import Foundation
import Testing
import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 15, items 12 to 14: `spindle tiltshift` under signals, write faults and SIGKILL. Every output that exists
/// is a complete image, no temporary file survives, every failed file gets one clear error, and a rerun with the
/// same arguments finishes the batch.
@Suite(.serialized) struct ToolFaultTests {
  static let isFull: Bool = {
    let value = ProcessInfo.processInfo.environment["SPINDLE_STRESS"]
    return value == "full" || value == "1"
  }()

  /// The ThreadSanitizer run of CI (`SPINDLE_EXPECT_TSAN=1`), where each run of the instrumented tool takes seconds:
  /// the signal and kill tests then try fewer moments.
  static let underThreadSanitizer = ProcessInfo.processInfo.environment["SPINDLE_EXPECT_TSAN"] == "1"

  static let count = 6
  static let width = 160
  static let height = 120

  /// A folder of `count` PNG photos, `width`×`height`, made once per process (per count).
  static func inputs(count: Int = count) throws -> URL {
    let folder = FileManager.default.temporaryDirectory
      .appendingPathComponent(
        "spindle-fault-inputs-\(getpid())-\(width)x\(height)\(count == Self.count ? "" : "-\(count)")",
        isDirectory: true)
    if (try? FileManager.default.contentsOfDirectory(atPath: folder.path).count) == count { return folder }
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for index in 0..<count {
      let image = SamplePhoto(seed: UInt64(index + 1)).render(width: Self.width, height: Self.height)
      let bytes = try ImageEncoder(format: .png).encode(image)
      try Data(bytes).write(to: folder.appendingPathComponent(String(format: "p%02d.png", index)))
    }
    return folder
  }

  /// The files in `folder`, split into complete outputs and temporaries; records a problem for any output that
  /// does not decode to the full size.
  static func inspect(_ folder: URL) -> (
    outputs: [String], temporaries: [String], partial: [String]
  ) {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    let temporaries = names.filter { $0.contains(ImageFile.temporaryMarker) }
    let outputs = names.filter { !$0.contains(ImageFile.temporaryMarker) }.sorted()
    let partial = outputs.filter { name in
      guard let image = try? ImageDecoder().decode(contentsOf: folder.appendingPathComponent(name).path) else {
        return true
      }
      return image.width != Self.width || image.height != Self.height
    }
    return (outputs, temporaries, partial)
  }

  /// How long an uninterrupted run of the batch takes, in seconds (the window the signals land in), and the size of
  /// its largest output.
  static func cleanRun(_ inputs: URL) async throws -> (seconds: Double, largestOutput: Int) {
    let out = try CLI.temporaryFolder().appendingPathComponent("out")
    let start = Date()
    let result = try await CLI.run(["tiltshift", inputs.path, "-o", out.path, "--jobs", "2", "-q"])
    #expect(result.status == 0, "\(result.stderr)")
    let seconds = Date().timeIntervalSince(start)
    let sizes = try FileManager.default.contentsOfDirectory(atPath: out.path).map { name in
      (try FileManager.default.attributesOfItem(atPath: out.appendingPathComponent(name).path)[.size] as? Int) ?? 0
    }
    return (seconds, sizes.max() ?? 0)
  }

  @Test("SIGINT and SIGTERM at random moments: complete outputs only, 130/143, a rerun finishes the rest")
  func signalsAtRandomMoments() async throws {
    let moments = Self.isFull ? 50 : Self.underThreadSanitizer ? 2 : 4
    let inputs = try Self.inputs()
    // The first run of a freshly built tool is slow (loading, cold caches): the window is the faster of two runs.
    let window = min(try await Self.cleanRun(inputs).seconds, try await Self.cleanRun(inputs).seconds)
    var generator = SystemRandomNumberGenerator()
    var interruptedRuns = 0
    var stoppedBeforeStart = 0
    for moment in 0..<moments {
      let out = try CLI.temporaryFolder().appendingPathComponent("out")
      let arguments = ["tiltshift", inputs.path, "-o", out.path, "--jobs", "2", "-q"]
      let signalNumber = moment % 2 == 0 ? SIGINT : SIGTERM
      let twice = moment % 5 == 4
      let delay = Double.random(in: 0...(window * 0.9), using: &generator)
      let (process, stdout, stderr) = try CLI.start(arguments)
      try await Task.sleep(for: .seconds(delay))
      if process.isRunning { kill(process.processIdentifier, signalNumber) }
      if twice {
        try await Task.sleep(for: .milliseconds(10))
        if process.isRunning { kill(process.processIdentifier, signalNumber) }
      }
      let result = await CLI.wait(process, stdout, stderr, timeout: 60)
      let label =
        "moment \(moment) (\(signalNumber == SIGINT ? "SIGINT" : "SIGTERM")\(twice ? " ×2" : "") at "
        + "\(Int(delay * 1000)) ms)"
      let seen = Self.inspect(out)
      if process.terminationReason == .uncaughtSignal {
        // The signal beat the handler's installation, before anything was planned or written.
        #expect(result.status == signalNumber, "\(label): killed by signal \(result.status)")
        #expect(seen.outputs.isEmpty, "\(label): killed before the handler, yet outputs exist")
        stoppedBeforeStart += 1
      } else if result.status == 0 {
        #expect(seen.outputs.count == Self.count, "\(label): exit 0 but outputs missing: \(seen.outputs)")
      } else {
        #expect(result.status == 128 + signalNumber, "\(label): exit \(result.status): \(result.stderr)")
        interruptedRuns += 1
      }
      #expect(seen.temporaries.isEmpty, "\(label): temporaries left: \(seen.temporaries)")
      #expect(seen.partial.isEmpty, "\(label): partial outputs: \(seen.partial)")

      let rerun = try await CLI.run(arguments)
      let after = Self.inspect(out)
      #expect(after.outputs.count == Self.count, "\(label): the rerun did not finish: \(after.outputs) \(rerun.stderr)")
      #expect(after.temporaries.isEmpty && after.partial.isEmpty, "\(label): after the rerun \(after)")
      // Files the first run completed are refused (never overwritten) and reported; nothing else fails.
      let refused = rerun.stderr.split(separator: "\n").filter { $0.contains("error:") }
      #expect(refused.count == seen.outputs.count, "\(label): \(rerun.stderr)")
      #expect(refused.allSatisfy { $0.contains("exists (pass --overwrite") }, "\(label): \(rerun.stderr)")
      #expect(rerun.status == (seen.outputs.isEmpty ? 0 : 1), "\(label): rerun exit \(rerun.status)")
    }
    print("signals: \(moments) moments, \(interruptedRuns) interrupted mid-run, \(stoppedBeforeStart) before start")
  }

  @Test("SIGKILL mid-batch: no partial output ever; the next run removes the temporaries and finishes")
  func sigkillMidBatch() async throws {
    let moments = Self.isFull ? 20 : Self.underThreadSanitizer ? 1 : 2
    let inputs = try Self.inputs()
    let window = try await Self.cleanRun(inputs).seconds
    var generator = SystemRandomNumberGenerator()
    var leftovers = 0
    for moment in 0..<moments {
      let out = try CLI.temporaryFolder().appendingPathComponent("out")
      let arguments = ["tiltshift", inputs.path, "-o", out.path, "--jobs", "2", "-q"]
      let (process, stdout, stderr) = try CLI.start(arguments)
      let delay = Double.random(in: (window * 0.2)...(window * 0.9), using: &generator)
      try await Task.sleep(for: .seconds(delay))
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      _ = await CLI.wait(process, stdout, stderr, timeout: 60)
      let seen = Self.inspect(out)
      #expect(seen.partial.isEmpty, "moment \(moment): partial outputs \(seen.partial)")
      leftovers += seen.temporaries.count
      // What a kill during a write leaves (made by hand, since a kill rarely lands inside the short write): a
      // half-written temporary for an output the next run writes, and one of another name, which it must keep.
      try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
      let missing = (0..<Self.count).map { String(format: "p%02d-tiltshift.png", $0) }
        .first { !seen.outputs.contains($0) }
      let ours = missing.map { out.appendingPathComponent(".\($0)\(ImageFile.temporaryMarker)0badc0de") }
      let foreign = out.appendingPathComponent(".other.png\(ImageFile.temporaryMarker)0badc0de")
      for url in [ours, foreign].compactMap({ $0 }) { try Data([0x89, 0x50]).write(to: url) }

      let rerun = try await CLI.run(arguments)
      let after = Self.inspect(out)
      #expect(after.outputs.count == Self.count, "moment \(moment): \(after.outputs) \(rerun.stderr)")
      #expect(after.partial.isEmpty)
      #expect(
        after.temporaries == [foreign.lastPathComponent],
        "moment \(moment): the rerun must remove its own leftovers and keep others': \(after.temporaries)")
    }
    print("sigkill: \(moments) kills, \(leftovers) temporaries left by the kills themselves")
  }

  /// What SIGKILL leaves between `link` (the finished output in place) and `unlink` (its temporary name gone): both.
  /// The rerun refuses that output (it exists) and must still remove its temporary. `sigkillMidBatch` hit this window
  /// once in many runs and failed; here it is made by hand. A temporary of an existing output that is another file
  /// (a live run replacing it) must stay: a review found the first version of the fix removed it.
  @Test("a temporary that is its finished output (a kill between link and unlink) goes on a rerun; another file stays")
  func temporaryBesideAFinishedOutput() async throws {
    let inputs = try Self.inputs()
    let out = try CLI.temporaryFolder().appendingPathComponent("out")
    let arguments = ["tiltshift", inputs.path, "-o", out.path, "--jobs", "2", "-q"]
    let first = try await CLI.run(arguments)
    #expect(first.status == 0, "\(first.stderr)")
    let done = Self.inspect(out)
    #expect(done.outputs.count == Self.count && done.temporaries.isEmpty)
    let finished = try #require(done.outputs.first)
    let bytes = try Data(contentsOf: out.appendingPathComponent(finished))
    // Hard-linked like the real thing: the temporary name and the output are one file.
    let temporary = out.appendingPathComponent(".\(finished)\(ImageFile.temporaryMarker)0badc0de")
    #expect(link(out.appendingPathComponent(finished).path, temporary.path) == 0)
    let foreign = out.appendingPathComponent(".other.png\(ImageFile.temporaryMarker)0badc0de")
    try Data([0x89, 0x50]).write(to: foreign)
    // Another file under the temporary name of an existing output: what a live `--overwrite` run replacing that
    // output writes. The rerun refuses the output and must not take the other run's file away.
    let replacing = try #require(done.outputs.last)
    let live = out.appendingPathComponent(".\(replacing)\(ImageFile.temporaryMarker)12345678")
    try Data([0x89, 0x50]).write(to: live)

    let rerun = try await CLI.run(arguments)
    let after = Self.inspect(out)
    #expect(
      after.temporaries == [live.lastPathComponent, foreign.lastPathComponent].sorted(), "left: \(after.temporaries)")
    #expect(try Data(contentsOf: out.appendingPathComponent(finished)) == bytes, "the finished output is untouched")
    #expect(after.outputs == done.outputs && after.partial.isEmpty)
    // Every output exists, so every file is refused, each with the reason.
    #expect(rerun.status == 1, "exit \(rerun.status): \(rerun.stderr)")
    #expect(rerun.stderr.components(separatedBy: "exists (pass --overwrite").count - 1 == Self.count, "\(rerun.stderr)")
  }

  @Test("the output folder removed mid-batch: one clear error per remaining file, no crash, nothing partial")
  func folderRemovedMidBatch() async throws {
    // Thirty files, so that the batch is still running when the removal lands: with six, a CI run under
    // ThreadSanitizer saw the first output only after the last one was written, and the batch ended with exit 0.
    // An attempt whose removal still came after the last write (every file written, exit 0) is tried again.
    let count = 30
    let inputs = try Self.inputs(count: count)
    for attempt in 1...3 {
      let out = try CLI.temporaryFolder().appendingPathComponent("out")
      let (process, stdout, stderr) = try CLI.start(["tiltshift", inputs.path, "-o", out.path, "--jobs", "1"])
      // Files appear and vanish (temporaries renamed) while the folder is removed: retry until it is gone.
      let removedMidBatch = await CLI.waitWhileRunning(
        process, until: { !Self.inspect(out).outputs.isEmpty },
        then: { _ in
          for _ in 0..<100 where FileManager.default.fileExists(atPath: out.path) {
            try? FileManager.default.removeItem(at: out)
          }
        })
      #expect(removedMidBatch, "the batch ended before its first output was seen")
      #expect(!FileManager.default.fileExists(atPath: out.path))
      let result = await CLI.wait(process, stdout, stderr, timeout: 60)
      let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
      let written = result.stderr.split(separator: "\n").filter { $0.hasPrefix("ok ") }
      if attempt < 3 && result.status == 0 && written.count == count {
        print("folder removed mid-batch: attempt \(attempt) removed the folder after the last write; again")
        continue
      }
      #expect(process.terminationReason == .exit && result.status == 1, "exit \(result.status): \(result.stderr)")
      #expect(errors.count + written.count == count, "every file accounted once: \(result.stderr)")
      #expect(errors.count >= 1)
      #expect(errors.allSatisfy { $0.contains("No such file or directory") && $0.contains(".png") }, "\(errors)")
      #expect(!FileManager.default.fileExists(atPath: out.path) || Self.inspect(out).temporaries.isEmpty)
      return
    }
  }

  // MARK: - A small file system of our own

  /// Whether this machine lets an unprivileged user namespace mount a tmpfs (`unshare -rm`).
  static let canMountTmpfs: Bool = {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    let probe = FileManager.default.temporaryDirectory.appendingPathComponent("spindle-mount-probe-\(getpid())")
    try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)
    process.arguments = ["-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs \"$0\"", probe.path]
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
  }()

  /// Runs `spindle tiltshift INPUTS -o MOUNT/out` inside a private mount namespace with a tmpfs of `kilobytes` on
  /// MOUNT (read-only when asked); copies what the run left into the returned folder, since the tmpfs vanishes
  /// with the namespace.
  static func runOnTmpfs(kilobytes: Int, readOnly: Bool, extra: [String] = []) async throws -> (CLIResult, URL) {
    let root = try CLI.temporaryFolder()
    let mount = root.appendingPathComponent("mnt")
    let copy = root.appendingPathComponent("copy")
    try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
    let script = """
      mount -t tmpfs -o size=\(kilobytes)k tmpfs "$0" || exit 97
      mkdir "$0/out" || exit 97
      \(readOnly ? "mount -o remount,ro \"$0\" || exit 97" : "")
      "$1" tiltshift "$2" -o "$0/out" --jobs 2 \(extra.joined(separator: " "))
      status=$?
      cp -a "$0/out/." "$3/"
      exit $status
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    process.arguments = ["-rm", "sh", "-c", script, mount.path, CLI.binary.path, try inputs().path, copy.path]
    var environment = ProcessInfo.processInfo.environment
    environment["NO_COLOR"] = "1"
    process.environment = environment
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let result = await CLI.wait(process, out, err, timeout: 120)
    return (result, copy)
  }

  @Test(
    "a read-only output file system: one clear error per file, nothing written, exit 1",
    .enabled(if: canMountTmpfs, "needs unshare -rm and a tmpfs mount"))
  func readOnlyFileSystem() async throws {
    let (result, copy) = try await Self.runOnTmpfs(kilobytes: 1024, readOnly: true)
    #expect(result.status == 1, "\(result.stderr)")
    let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
    #expect(errors.count == Self.count, "\(result.stderr)")
    #expect(errors.allSatisfy { $0.contains("Read-only file system") }, "\(errors)")
    #expect(Self.inspect(copy).outputs.isEmpty && Self.inspect(copy).temporaries.isEmpty)
  }

  @Test(
    "a full disk: the files that fit are complete, every other one fails with a clear error, no temporaries",
    .enabled(if: canMountTmpfs, "needs unshare -rm and a tmpfs mount"))
  func fullDisk() async throws {
    // Room for two and a half of the largest output (in whole 4 kB pages): two fit, then the disk is full.
    let largest = try await Self.cleanRun(try Self.inputs()).largestOutput
    let pages = (largest * 5 / 2 + 4095) / 4096
    let (result, copy) = try await Self.runOnTmpfs(kilobytes: pages * 4, readOnly: false)
    #expect(result.status == 1, "\(result.stderr)")
    let seen = Self.inspect(copy)
    let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
    #expect(seen.partial.isEmpty, "partial outputs: \(seen.partial)")
    #expect(seen.temporaries.isEmpty, "temporaries: \(seen.temporaries)")
    #expect(seen.outputs.count >= 1 && seen.outputs.count < Self.count, "\(seen.outputs)")
    #expect(errors.count + seen.outputs.count == Self.count, "one error per file that did not fit: \(result.stderr)")
    #expect(errors.allSatisfy { $0.contains("No space left on device") }, "\(errors)")
  }
}
