import Foundation
import SpindleTestSupport
import Testing
import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// Which files `spindle tiltshift` finds, what it names their outputs and what it refuses before decoding (findings
/// of helper-47's adversarial run).
@Suite(.serialized) struct TiltShiftFileDiscoveryTests {
  /// Writes `bytes` to the file whose path is the bytes `path` (which Foundation cannot name when they are not UTF-8).
  static func write(_ bytes: [UInt8], toPathBytes path: [UInt8]) throws {
    let fd = (path + [0]).withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    }
    #expect(fd >= 0)
    _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    close(fd)
  }

  /// The names in `folder` as their bytes, sorted (leaving out `.` and `..`).
  static func names(in folder: String) -> [[UInt8]] {
    guard let directory = opendir(folder) else { return [] }
    defer { closedir(directory) }
    var names: [[UInt8]] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
      if name != Array(".".utf8) && name != Array("..".utf8) { names.append(name) }
    }
    return names.sorted { $0.lexicographicallyPrecedes($1) }
  }

  static func photo(_ format: ImageFormat, seed: UInt64) throws -> [UInt8] {
    try ImageEncoder(format: format).encode(SamplePhoto(seed: seed).render(width: 32, height: 24))
  }

  @Test func systemPathRoundTripsEveryName() {
    let names: [[UInt8]] = [
      Array("plain.jpg".utf8), [0xFF, 0x2E, 0x6A, 0x70, 0x67], Array("caf".utf8) + [0xE9, 0x2E, 0x70, 0x6E, 0x67],
      Array("café.jpg".utf8), [0xED, 0xA0, 0x80], [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82],
      // A name that really holds an escape scalar (U+10FFFF) is escaped byte by byte: still one-to-one.
      [0xF4, 0x8F, 0xBF, 0xBF], Array("e\u{301}.jpg".utf8),
    ]
    for name in names {
      let path = SystemPath.string(decoding: name)
      #expect(SystemPath.bytes(of: path) == name, "\(name)")
      #expect(SystemPath.byteCount(of: path) == name.count)
    }
    #expect(SystemPath.displayed(SystemPath.string(decoding: [0xFF, 0x2E, 0x6A, 0x70, 0x67])) == "\\xFF.jpg")
    #expect(SystemPath.string(decoding: Array("café.jpg".utf8)) == "café.jpg")
  }

  @Test func namesThatAreNotUTF8AreProcessedUnderTheirOwnBytes() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    let outputs = root.appendingPathComponent("out")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    let folder = Array(inputs.path.utf8) + [UInt8(ascii: "/")]
    // Latin-1 "café.png", a lone 0xFF, and "é" composed and decomposed (two files on Linux, equal Swift Strings).
    try Self.write(Self.photo(.png, seed: 1), toPathBytes: folder + Array("caf".utf8) + [0xE9] + Array(".png".utf8))
    try Self.write(Self.photo(.jpeg, seed: 2), toPathBytes: folder + [0xFF] + Array(".jpg".utf8))
    try Self.write(Self.photo(.jpeg, seed: 3), toPathBytes: folder + Array("\u{E9}.jpg".utf8))
    try Self.write(Self.photo(.jpeg, seed: 4), toPathBytes: folder + Array("e\u{301}.jpg".utf8))

    let result = try await CLI.run(["tiltshift", inputs.path, "-o", outputs.path, "--json"])

    #expect(result.status == 0, "\(result.stderr)")
    let expected: [[UInt8]] = [
      Array("caf".utf8) + [0xE9] + Array("-tiltshift.png".utf8), Array("e\u{301}-tiltshift.jpg".utf8),
      [0xFF] + Array("-tiltshift.jpg".utf8), Array("\u{E9}-tiltshift.jpg".utf8),
    ].sorted { $0.lexicographicallyPrecedes($1) }
    #expect(Self.names(in: outputs.path) == expected)
    #expect(result.stdout.contains("\"succeeded\" : 4"), "\(result.stdout)")
    #expect(result.stdout.contains("\\\\xFF-tiltshift.jpg"), "escaped in the JSON: \(result.stdout)")
  }

  /// helper-51's review: with `-r`, sub-folders `café` composed and decomposed (two folders on Linux) were mirrored as
  /// one, since equal `String`s made one entry of the set of folders to create; the second file then failed.
  @Test func foldersThatDifferOnlyInNormalizationAreMirroredApart() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    let outputs = root.appendingPathComponent("out")
    let composed = Array("caf\u{E9}".utf8)
    let decomposed = Array("cafe\u{301}".utf8)
    for (folder, seed) in [(composed, UInt64(1)), (decomposed, 2)] {
      let path = Array(inputs.path.utf8) + [UInt8(ascii: "/")] + folder
      try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
      #expect(
        (path + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) } }
          == 0)
      try Self.write(Self.photo(.jpeg, seed: seed), toPathBytes: path + Array("/p\(seed).jpg".utf8))
    }

    let result = try await CLI.run(["tiltshift", "-r", inputs.path, "-o", outputs.path])

    #expect(result.status == 0, "\(result.stderr)")
    #expect(Self.names(in: outputs.path) == [composed, decomposed].sorted { $0.lexicographicallyPrecedes($1) })
    #expect(Self.names(in: outputs.path + "/caf\u{E9}").count == 1)
    let decomposedFolder = String(decoding: Array(outputs.path.utf8) + [UInt8(ascii: "/")] + decomposed, as: UTF8.self)
    #expect(Self.names(in: decomposedFolder) == [Array("p2-tiltshift.jpg".utf8)])
  }

  @Test func aTraceFileNameThatIsNotUTF8IsRefusedBeforeTheRun() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    try Data(Self.photo(.jpeg, seed: 9)).write(to: root.appendingPathComponent("a.jpg"))

    let result = try await CLI.runThroughShell(
      #"exec "$0" tiltshift a.jpg -o out --trace "$(printf 't\377.json')""#, in: root)

    #expect(result.status == 2, "\(result.stderr)")
    #expect(result.stderr.contains("--trace expects a file name in UTF-8"), "\(result.stderr)")
    #expect(result.stderr.contains("t\\xFF.json"), "\(result.stderr)")
    #expect(Self.names(in: root.path) == [Array("a.jpg".utf8)], "neither the output folder nor a trace")
  }

  @Test func anArgumentThatIsNotUTF8NamesItsFile() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let outputs = root.appendingPathComponent("out")
    try Self.write(
      Self.photo(.jpeg, seed: 5),
      toPathBytes: Array(root.path.utf8) + [UInt8(ascii: "/"), 0xFF, 0x2E, 0x6A, 0x70, 0x67])
    try Self.write([1, 2, 3], toPathBytes: Array(root.path.utf8) + [UInt8(ascii: "/"), 0xFE, 0x2E, 0x6A, 0x70, 0x67])
    let result = try await CLI.runThroughShell(
      #"exec "$0" tiltshift "$(printf '\377.jpg')" "$(printf '\376.jpg')" -o out"#, in: root)

    #expect(result.status == 1, "the damaged one fails: \(result.stderr)")
    #expect(Self.names(in: outputs.path) == [[0xFF] + Array("-tiltshift.jpg".utf8)])
    #expect(result.stderr.contains("\\xFE.jpg"), "the failure names the file, escaped: \(result.stderr)")
    #expect(result.stderr.contains("\\xFF.jpg → out/\\xFF-tiltshift.jpg"), "\(result.stderr)")
  }

  @Test func jfifAndJpeAreJPEGsWrittenAsJpg() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let inputs = root.appendingPathComponent("in")
    try FileManager.default.createDirectory(at: inputs, withIntermediateDirectories: true)
    try Data(Self.photo(.jpeg, seed: 6)).write(to: inputs.appendingPathComponent("a.jfif"))
    try Data(Self.photo(.jpeg, seed: 7)).write(to: inputs.appendingPathComponent("b.JPE"))
    let outputs = root.appendingPathComponent("out")

    let result = try await CLI.run(["tiltshift", "-q", inputs.path, "-o", outputs.path])

    #expect(result.status == 0, "\(result.stderr)")
    #expect(try TiltShiftCommandTests.files(in: outputs) == ["a-tiltshift.jpg", "b-tiltshift.jpg"])
    let help = try await CLI.run(["tiltshift", "--help"])
    #expect(help.stdout.contains(".jpe/.jfif"), "\(help.stdout)")
  }

  @Test(arguments: ["photos/out", "photos/x/../out", "link"])
  func anOutputFolderInsideARecursiveInputIsNotScanned(output: String) async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let photos = root.appendingPathComponent("photos")
    try FileManager.default.createDirectory(
      at: photos.appendingPathComponent("x"), withIntermediateDirectories: true)
    try FileManager.default.createDirectory(
      at: photos.appendingPathComponent("out"), withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(
      atPath: root.appendingPathComponent("link").path, withDestinationPath: "photos/out")
    try Data(Self.photo(.jpeg, seed: 8)).write(to: photos.appendingPathComponent("a.jpg"))

    let first = try await CLI.run(["tiltshift", "-qr", "photos", "-o", output], in: root)
    #expect(first.status == 0, "\(first.stderr)")
    let second = try await CLI.run(["tiltshift", "-r", "photos", "-o", output, "--json"], in: root)

    // Only a.jpg again: refused because its output exists; the output is not taken for an input.
    #expect(second.stdout.contains("\"failed\" : 1"), "\(second.stdout)")
    #expect(!second.stdout.contains("a-tiltshift-tiltshift"), "\(second.stdout)")
    #expect(!second.stderr.contains("a-tiltshift-tiltshift"), "\(second.stderr)")
    #expect(try TiltShiftCommandTests.files(in: photos.appendingPathComponent("out")) == ["a-tiltshift.jpg"])
  }

  /// A PNG claiming `width` × `height` 8-bit RGB in its header, whose pixel data is four bytes of junk: its header
  /// reads, but decoding it fails.
  static func pngHeader(width: UInt32, height: UInt32) -> [UInt8] {
    func be(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }
    func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
      let body = Array(type.utf8) + data
      var crc: UInt32 = 0xFFFF_FFFF
      for byte in body {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
      }
      return be(UInt32(data.count)) + body + be(~crc)
    }
    return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", be(width) + be(height) + [8, 2, 0, 0, 0])
      + chunk("IDAT", [0, 1, 2, 3]) + chunk("IEND", [])
  }

  @Test func anImageTooWideForJPEGIsRefusedBeforeDecodingNamingTheLimit() async throws {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let wide = root.appendingPathComponent("wide.png")
    // Decoding its junk pixel data would fail with libpng's words: this error shows the header alone was read.
    try Data(Self.pngHeader(width: 70_000, height: 8)).write(to: wide)

    let result = try await CLI.run([
      "tiltshift", wide.path, "-o", root.appendingPathComponent("out").path, "--format", "jpeg",
    ])

    #expect(result.status == 1)
    for part in ["wide.png", "70000x8", "at most 65500 pixels", "65535", "PNG has no such limit", "--format png"] {
      #expect(result.stderr.contains(part), "\(part): \(result.stderr)")
    }
    #expect(!result.stderr.contains("libpng"), "\(result.stderr)")
  }
}
