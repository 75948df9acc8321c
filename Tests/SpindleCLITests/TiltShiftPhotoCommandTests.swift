import Foundation
import Testing
import TiltShift

/// End-to-end tests of issue 14's flags: --lenient, --strip, --background, --memory, --max-pixels.
@Suite(.serialized) struct TiltShiftPhotoCommandTests {
  static func write(_ bytes: [UInt8], _ url: URL) throws { try Data(bytes).write(to: url) }

  @Test func aTruncatedPhotoFailsNamingTheRowsAndLenientWarns() async throws {
    let root = try CLI.temporaryFolder()
    let photo = root.appendingPathComponent("cut.jpg")
    let whole = try ImageEncoder(format: .jpeg).encode(SamplePhoto(seed: 5).render(width: 160, height: 120))
    try Self.write(Array(whole.prefix(whole.count * 3 / 5)), photo)
    let strict = try await CLI.run(["tiltshift", photo.path, "-o", root.appendingPathComponent("a").path])
    #expect(strict.status == 1)
    #expect(strict.stderr.contains("cut.jpg: the JPEG file ends too early: rows "), "\(strict.stderr)")
    #expect(strict.stderr.contains("of 120 are missing (libjpeg: Premature end of JPEG file) (--lenient"))
    let lenient = try await CLI.run(["tiltshift", photo.path, "-o", root.appendingPathComponent("b").path, "--lenient"])
    #expect(lenient.status == 0, "\(lenient.stderr)")
    #expect(lenient.stderr.contains("warning: \(photo.path): the JPEG file ends too early: rows "))
  }

  @Test func aPhotoLackingOnlyItsEndMarkerIsWrittenWithAWarningAndCorruptDataIsNotCalledTruncated() async throws {
    let root = try CLI.temporaryFolder()
    let whole = try ImageEncoder(format: .jpeg).encode(SamplePhoto(seed: 5).render(width: 300, height: 200))
    let noEnd = root.appendingPathComponent("noend.jpg")
    try Self.write(Array(whole.dropLast(2)), noEnd)
    let written = try await CLI.run(["tiltshift", noEnd.path, "-o", root.appendingPathComponent("a").path])
    #expect(written.status == 0, "\(written.stderr)")
    #expect(
      written.stderr.contains(
        "warning: \(noEnd.path): the JPEG file's end marker (EOI) is missing, but every row was decoded"),
      "\(written.stderr)")
    // A marker in the middle of the entropy-coded data: corrupt, with libjpeg's words and the row.
    var marked = whole
    let sos = try #require(whole.indices.first { whole[$0] == 0xFF && whole[$0 + 1] == 0xDA })
    let middle = sos + (whole.count - sos) / 2
    marked.replaceSubrange(middle..<middle + 2, with: [0xFF, 0xD3])
    let corrupt = root.appendingPathComponent("corrupt.jpg")
    try Self.write(marked, corrupt)
    let refused = try await CLI.run(["tiltshift", corrupt.path, "-o", root.appendingPathComponent("b").path])
    #expect(refused.status == 1)
    #expect(
      refused.stderr.contains("corrupt.jpg: corrupt JPEG image data: the decoder found damage in row "),
      "\(refused.stderr)")
    #expect(refused.stderr.contains("(libjpeg: Corrupt JPEG data: premature end of data segment)"))
  }

  @Test func refusalsNameTheFlagThatChangesThem() async throws {
    let root = try CLI.temporaryFolder()
    let photo = root.appendingPathComponent("p.png")
    try Self.write(try ImageEncoder(format: .png).encode(SamplePhoto(seed: 1).render(width: 160, height: 120)), photo)
    let limited = try await CLI.run([
      "tiltshift", photo.path, "-o", root.appendingPathComponent("a").path, "--max-pixels", "100",
    ])
    #expect(limited.status == 1)
    #expect(limited.stderr.contains("more than the limit of 100 pixels (raise the limit with --max-pixels)"))
    // 3000 × 2000 gray: 6 MB decoded, about 18 MB to filter: over a 16 MiB budget.
    let big = root.appendingPathComponent("big.png")
    let rows = [[UInt8]](repeating: [UInt8](repeating: 90, count: 3000), count: 2000)
    try Self.write(TestImagesCLI.storedPNG(width: 3000, height: 2000, rows: rows), big)
    let budget = try await CLI.run([
      "tiltshift", big.path, "-o", root.appendingPathComponent("b").path, "--memory", "16M",
    ])
    #expect(budget.status == 1)
    #expect(
      budget.stderr.contains("more than the memory budget of 16 MiB (raise the budget with --memory)"),
      "\(budget.stderr)")
    let bad = try await CLI.run(["tiltshift", big.path, "-o", root.path, "--memory", "lots"])
    #expect(bad.status == 2 && bad.stderr.contains("--memory"))
  }

  @Test func transparentPixelsTakeTheBackground() async throws {
    let root = try CLI.temporaryFolder()
    let logo = root.appendingPathComponent("logo.png")
    try Self.write(
      try ImageEncoder(format: .png).encode(Image(width: 32, height: 32, layout: .rgba, filledWith: 0)), logo)
    for (flag, expected) in [(nil, [255, 255, 255]), ("black", [0, 0, 0]), ("#00ff00", [0, 255, 0])] {
      let out = root.appendingPathComponent("out-\(flag ?? "default")")
      let result = try await CLI.run(
        ["tiltshift", logo.path, "-o", out.path, "--format", "jpeg"] + (flag.map { ["--background", $0] } ?? []))
      #expect(result.status == 0, "\(result.stderr)")
      let image = try ImageDecoder().decode(contentsOf: out.appendingPathComponent("logo-tiltshift.jpg").path)
      #expect(
        zip(image[16, 16], expected).allSatisfy { abs(Int($0) - $1) <= 3 },
        "\(flag ?? "white"): \(Array(image[16, 16]))")
    }
    let bad = try await CLI.run(["tiltshift", logo.path, "-o", root.path, "--background", "teal"])
    #expect(bad.status == 2 && bad.stderr.contains("--background expects white, black or #rrggbb"))
  }

  @Test func metadataAndOrientationCrossFormatsAndStripTurnsThePixels() async throws {
    let root = try CLI.temporaryFolder()
    let photo = root.appendingPathComponent("portrait.jpg")
    var image = SamplePhoto(seed: 2).render(width: 96, height: 64)
    image.exif =
      [UInt8]("Exif".utf8) + [
        0, 0, 0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0,
      ]
    image.metadata.xmp = Array("<x:xmpmeta><rdf:RDF><rdf:Description xmp:Rating=\"5\"/></rdf:RDF></x:xmpmeta>".utf8)
    try Self.write(try ImageEncoder(format: .jpeg).encode(image), photo)
    let kept = try await CLI.run([
      "tiltshift", photo.path, "-o", root.appendingPathComponent("kept").path, "--format", "png",
    ])
    #expect(kept.status == 0, "\(kept.stderr)")
    let png = try ImageDecoder().decode(contentsOf: root.appendingPathComponent("kept/portrait-tiltshift.png").path)
    #expect(png.exifOrientation == 6 && png.width == 96, "eXIf carries the orientation into PNG")
    #expect(png.metadata.xmp == image.metadata.xmp)
    let stripped = try await CLI.run([
      "tiltshift", photo.path, "-o", root.appendingPathComponent("bare").path, "--strip",
    ])
    #expect(stripped.status == 0)
    let bare = try ImageDecoder().decode(contentsOf: root.appendingPathComponent("bare/portrait-tiltshift.jpg").path)
    #expect(bare.metadata.isEmpty && bare.width == 64 && bare.height == 96, "upright pixels, no tag to apply twice")
  }

  @Test func sixteenBitPNGStaysSixteenBit() async throws {
    let root = try CLI.temporaryFolder()
    let deep = root.appendingPathComponent("deep.png")
    let samples = (0..<48 * 32 * 3).map { UInt16(truncatingIfNeeded: $0 &* 977) }
    try Self.write(
      try ImageEncoder(format: .png).encode(Image(width: 48, height: 32, layout: .rgb, samples16: samples)), deep)
    let result = try await CLI.run(["tiltshift", deep.path, "-o", root.appendingPathComponent("out").path])
    #expect(result.status == 0, "\(result.stderr)")
    let bytes = [UInt8](try Data(contentsOf: root.appendingPathComponent("out/deep-tiltshift.png")))
    #expect(bytes[24] == 16, "IHDR bit depth 16")
    #expect(try ImageDecoder(keeps16Bits: true).decode(bytes).bitDepth == 16)
  }
}

/// A PNG with stored (uncompressed) deflate blocks, made without the encoder, so a big image costs no time.
enum TestImagesCLI {
  static func storedPNG(width: Int, height: Int, rows: [[UInt8]]) -> [UInt8] {
    func be32(_ value: UInt32) -> [UInt8] {
      [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
    func crc32(_ bytes: [UInt8]) -> UInt32 {
      var table = [UInt32](repeating: 0, count: 256)
      for index in 0..<256 {
        var c = UInt32(index)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        table[index] = c
      }
      var crc: UInt32 = 0xFFFF_FFFF
      for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
      return ~crc
    }
    func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
      let body = Array(type.utf8) + data
      return be32(UInt32(data.count)) + body + be32(crc32(body))
    }
    var raw: [UInt8] = []
    raw.reserveCapacity(height * (width + 1))
    for row in rows { raw += [0] + row }
    var zlib: [UInt8] = [0x78, 0x01]
    var offset = 0
    while offset < raw.count {
      let length = min(65535, raw.count - offset)
      let final: UInt8 = offset + length == raw.count ? 1 : 0
      zlib += [final, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
      zlib += raw[offset..<offset + length]
      offset += length
    }
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in raw {
      a = (a + UInt32(byte)) % 65521
      b = (b + a) % 65521
    }
    zlib += be32(b << 16 | a)
    return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
      + chunk("IHDR", be32(UInt32(width)) + be32(UInt32(height)) + [8, 0, 0, 0, 0]) + chunk("IDAT", zlib)
      + chunk("IEND", [])
  }
}
