import Foundation
import SpindleTestSupport
import Testing

@testable import SpindleCLI
@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// A photographer's review of `spindle tiltshift`: folders it cannot read, output folders it cannot make, and
/// advice it gives.
@Suite struct TiltShiftReviewTests {
  @Test func aSubFolderThatCannotBeListedIsAnErrorNotASilentGap() throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    for folder in ["photos/2023", "photos/locked", "photos/.cache"] {
      try FileManager.default.createDirectory(
        at: root.appendingPathComponent(folder), withIntermediateDirectories: true)
      try Data([0xFF, 0xD8]).write(to: root.appendingPathComponent("\(folder)/IMG_0001.jpg"))
    }
    let photos = root.appendingPathComponent("photos").path
    // Root reads any folder: the stand-in lister refuses one as the system refuses an unreadable folder.
    let list = { (path: String) -> Result<[String], BatchPlan.FolderListingError> in
      path.hasSuffix("/locked") || path.hasSuffix("/.cache")
        ? .failure(BatchPlan.FolderListingError(reason: "Permission denied")) : BatchPlan.listFolder(path)
    }
    let (inputs, rejected) = BatchPlan.collectInputs([photos], recursive: true, list: list)
    #expect(inputs.map(\.path) == ["\(photos)/2023/IMG_0001.jpg"])
    let reasons = rejected.compactMap { decision -> String? in
      if case .reject(let path, let reason, _) = decision { return "\(path): \(reason)" }
      return nil
    }
    // A hidden folder is never read, so it is never an error.
    #expect(reasons == ["\(photos)/locked: cannot list folder: Permission denied"])
    // Not recursive: the folder argument itself, with the system's reason.
    let flat = BatchPlan.collectInputs(["\(photos)/locked"], recursive: false, list: list).rejected
    guard case .reject(_, "cannot list folder: Permission denied", _)? = flat.first else {
      Issue.record("\(flat)")
      return
    }
  }

  @Test(.enabled(if: getuid() != 0, "root reads every folder"))
  func anUnreadableSubFolderFailsTheRun() async throws {
    let root = try CLI.temporaryFolder()
    defer {
      chmod(root.appendingPathComponent("photos/locked").path, 0o755)
      try? FileManager.default.removeItem(at: root)
    }
    for folder in ["photos/2023", "photos/locked"] {
      try FileManager.default.createDirectory(
        at: root.appendingPathComponent(folder), withIntermediateDirectories: true)
      try TiltShiftCommandTests.writePhoto(
        root.appendingPathComponent("\(folder)/IMG_0001.jpg"), seed: 1, width: 32, height: 24)
    }
    chmod(root.appendingPathComponent("photos/locked").path, 0)
    let result = try await CLI.run([
      "tiltshift", "-qr", root.appendingPathComponent("photos").path, "-o", root.appendingPathComponent("out").path,
    ])
    #expect(result.status == 1, "\(result.stderr)")
    #expect(result.stderr.contains("locked: cannot list folder: Permission denied"), "\(result.stderr)")
  }

  @Test func anOutputFolderThatCannotBeMadeSaysWhy() throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let file = root.appendingPathComponent("photo.jpg").path
    try Data([1]).write(to: URL(fileURLWithPath: file))
    #expect(BatchPlan.makeFolder(file) == "a file of that name exists")
    #expect(BatchPlan.makeFolder(file + "/out/2024") == "\(file) is a file, not a folder")
    let nested = root.appendingPathComponent("a/b/c").path
    #expect(BatchPlan.makeFolder(nested) == nil)
    #expect(BatchPlan.isDirectory(nested))
    #expect(BatchPlan.makeFolder(nested) == nil, "an existing folder is fine")
  }

  /// The parent of a path, as `NSString.deletingLastPathComponent` gives it, for the one-character names on which that
  /// method traps in Swift 6.3.1's Foundation on Linux.
  @Test(arguments: [
    ("x", ""), ("q/r", "q"), ("r/qq", "r"), ("/", "/"), ("/a", "/"), ("a/b/", "a"), ("a//b", "a"), ("./x", "."),
    ("/tmp/out/2024", "/tmp/out"), ("", ""),
  ])
  func parentPathsOfShortNames(path: String, parent: String) {
    #expect(BatchPlan.parentPath(of: path) == parent)
  }

  /// `-o x` (a one-character folder that does not exist yet) crashed the tool with a trap inside Foundation.
  @Test func aOneCharacterOutputFolderIsMade() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent("photo.jpg"), seed: 3, width: 32, height: 24)
    for output in ["x", "q/r"] {
      let result = try await CLI.run(["tiltshift", "photo.jpg", "-o", output], in: root)
      #expect(result.status == 0, "-o \(output): \(result.status) \(result.stderr)")
      #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(output + "/photo-tiltshift.jpg").path))
    }
  }

  /// helper-51's review: with the working folder deleted, `realpath(".")` fails, and resolving a relative output
  /// folder looked at "." again and again until the stack overflowed (exit 139).
  @Test func aDeletedWorkingFolderIsAnErrorNotACrash() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let photo = root.appendingPathComponent("photo.jpg")
    try TiltShiftCommandTests.writePhoto(photo, seed: 4, width: 32, height: 24)
    let gone = root.appendingPathComponent("gone")
    try FileManager.default.createDirectory(at: gone, withIntermediateDirectories: false)
    // The shell enters the folder, removes it, and only then becomes spindle: its working folder no longer exists.
    let result = try await CLI.runThroughShell(
      "cd gone && rmdir \"$PWD\" && exec \"$0\" tiltshift '\(photo.path)' -o relative-out", in: root)
    #expect(result.status == 1, "\(result.status) \(result.stderr)")
    #expect(result.stderr.contains("cannot create output folder relative-out"), "\(result.stderr)")
  }

  /// helper-51's review: text from a file (its name, a PNG keyword, a profile name in libpng's words) reached the
  /// terminal raw, so a crafted file could set the window title or move the cursor.
  @Test func controlCharactersAreShownEscapedButColoursStay() {
    #expect(Terminal.shown("a\u{1B}]0;PWNED\u{07}b") == "a\\x1B]0;PWNED\\x07b")
    #expect(Terminal.shown("x\u{9B}31my\u{7F}\r") == "x\\u{9B}31my\\x7F\\x0D")
    #expect(Terminal.shown("\u{1B}[2Jclear\u{1B}[1;31mred\u{1B}[0m") == "\\x1B[2Jclear\u{1B}[1;31mred\u{1B}[0m")
    #expect(Terminal.shown("two\nlines\tand a tab") == "two\nlines\tand a tab")
    #expect(Terminal.shown("trailing \u{1B}[") == "trailing \\x1B[")
  }

  @Test func aFileNameWithATerminalSequenceIsPrintedEscaped() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let name = "title\u{1B}]0;PWNED\u{07}"
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent(name + ".jpg"), seed: 5, width: 32, height: 24)
    let result = try await CLI.run(["tiltshift", ".", "-o", "out"], in: root)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("out/\(name)-tiltshift.jpg").path))
    #expect(!result.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(result.stderr)")
    #expect(result.stderr.contains("title\\x1B]0;PWNED\\x07"), "\(result.stderr)")
  }

  @Test func anOutputFolderUnderAFileFailsWithPlainWords() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let photo = root.appendingPathComponent("photo.jpg")
    try TiltShiftCommandTests.writePhoto(photo, seed: 2, width: 32, height: 24)
    let result = try await CLI.run(["tiltshift", photo.path, "-o", photo.path + "/out"])
    #expect(result.status == 1)
    #expect(
      result.stderr.contains("cannot create output folder \(photo.path)/out: \(photo.path) is a file, not a folder"),
      "\(result.stderr)")
    #expect(!result.stderr.contains("NSCocoaErrorDomain"))
  }

  @Test func lenientIsNotSuggestedWhenItWasGiven() {
    let error = ImageError(
      .truncated(format: .png, firstMissingRow: nil, height: 1, message: "unexpected end of file"), path: "a.png")
    #expect(TiltShiftCommand.hint(for: error) == " (--lenient decodes what is there)")
    #expect(TiltShiftCommand.hint(for: error, lenient: true) == "")
    let report = FileReport(
      item: BatchItem(input: "a.png", output: "out/a.png"), outcome: .failed(error), timings: StageTimings())
    #expect(!TiltShiftCommand.line(for: report, lenient: true).contains("--lenient"))
    let summary = TiltShiftCommand.Summary(
      processed: [report], rejected: [], interrupted: false, seconds: 0, megapixels: 0, lenient: true)
    #expect(!summary.json.contains("--lenient"))
  }

  @Test func aLimitThatCannotBeRaisedIsNotSuggested() async throws {
    // 100000×100000 is over the highest --max-pixels (8589934588): "raise the limit" was advice no value could follow.
    let highest = TiltShiftCommand.highestMaxPixels
    let huge = ImageError(.tooManyPixels(width: 100_000, height: 100_000, limit: highest))
    #expect(
      TiltShiftCommand.hint(for: huge) == " (the highest --max-pixels allows: this image is too large to process)")
    let hugeUnderALowLimit = ImageError(.tooManyPixels(width: 100_000, height: 100_000, limit: 100))
    #expect(
      TiltShiftCommand.hint(for: hugeUnderALowLimit)
        == " (more than the highest --max-pixels allows, 8589934588: this image is too large to process)")
    // Within reach: raising the limit is the advice, as before; exactly the highest fits.
    let fits = ImageError(.tooManyPixels(width: 92_681, height: 92_681, limit: 100))
    #expect(92_681 * 92_681 <= highest)
    #expect(TiltShiftCommand.hint(for: fits) == " (raise the limit with --max-pixels)")
    #expect(
      TiltShiftCommand.hint(for: ImageError(.tooManyPixels(width: Int.max, height: 2, limit: 100))).contains(
        "too large"))

    // End to end, with the default limit: a PNG header declaring 100000×100000.
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
      let body = Array(type.utf8) + data
      return Self.be32(UInt32(data.count)) + body + Self.be32(Self.crc32(body))
    }
    let png =
      [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
      + chunk("IHDR", Self.be32(100_000) + Self.be32(100_000) + [8, 2, 0, 0, 0])
      + chunk("IDAT", [0x78, 0x01, 1, 4, 0, 0xFB, 0xFF, 0, 1, 2, 3, 0, 0x0E, 0, 7]) + chunk("IEND", [])
    let input = root.appendingPathComponent("huge.png")
    try Data(png).write(to: input)
    let result = try await CLI.run(["tiltshift", input.path, "-o", root.appendingPathComponent("out").path])
    #expect(result.status == 1)
    #expect(
      result.stderr.contains(
        "more than the limit of 8589934588 pixels (the highest --max-pixels allows: this image is too large to process)"
      ), "\(result.stderr)")
    #expect(!result.stderr.contains("raise the limit"))
  }

  @Test func anOutputNameOf233To255BytesIsWritten() async throws {
    // Its temporary `.NAME.spindle-tmp-XXXXXXXX` was past the 255-byte limit: "File name too long", nothing written.
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let name = String(repeating: "a", count: 236) + ".jpg"
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent(name), seed: 3, width: 32, height: 24)
    let out = root.appendingPathComponent("out")
    let result = try await CLI.run([
      "tiltshift", root.appendingPathComponent(name).path, "-o", out.path, "--suffix", "",
    ])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: out.path) == [name])
    // A name the file system cannot hold is refused for what it is, and leaves nothing behind.
    let longer = String(repeating: "b", count: 259)  // b + 259 + .jpg: 264 bytes
    try TiltShiftCommandTests.writePhoto(root.appendingPathComponent("b.jpg"), seed: 4, width: 32, height: 24)
    let refused = try await CLI.run([
      "tiltshift", root.appendingPathComponent("b.jpg").path, "-o", out.path, "--suffix", longer,
    ])
    #expect(refused.status == 1)
    #expect(
      refused.stderr.contains("the file name is 264 bytes, longer than its file system allows"), "\(refused.stderr)")
    #expect(!refused.stderr.contains("File name too long"))
    #expect(try FileManager.default.contentsOfDirectory(atPath: out.path) == [name], "no temporary left")
  }

  static func be32(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
  }

  static func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
      crc ^= UInt32(byte)
      for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
  }
}
