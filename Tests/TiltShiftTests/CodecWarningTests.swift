import SpindleTestSupport
import Testing

@testable import TiltShift

/// helper-47's adversarial run: a JPEG lacking only its end marker, corrupt data told from truncation, and metadata
/// a codec left out said so, never dropped silently.
@Suite(.offThePool) struct CodecWarningTests {
  let decoder = ImageDecoder()

  /// The position of the first `marker` (0xFF `code`) in `jpeg`.
  func marker(_ code: UInt8, in jpeg: [UInt8]) throws -> Int {
    try #require(jpeg.indices.dropLast().first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == code })
  }

  // MARK: A JPEG without its end marker

  @Test(arguments: [false, true])
  func aJPEGLackingOnlyItsEndMarkerDecodesWholeWithAWarning(progressive: Bool) throws {
    // 200 rows: the last iMCU row starts at 192, where libjpeg's read-ahead meets the end of the data.
    let image = TestImages.picture(width: 300, height: 200, layout: .gray)
    let jpeg = try ImageEncoder(format: .jpeg, jpegProgressive: progressive).encode(image)
    let whole = try decoder.decode(jpeg)
    var warnings: [String] = []
    let noEnd = try decoder.decode(Array(jpeg.dropLast(2)), warnings: &warnings)
    #expect(noEnd.pixels == whole.pixels, "every pixel is the file's own")
    #expect(warnings.count == 1, "\(warnings)")
    #expect(warnings.first?.hasPrefix("the JPEG file's end marker (EOI) is missing, but every row was decoded") == true)
  }

  @Test func aJPEGCutShortIsStillRefusedNamingTheRows() throws {
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 300, height: 200, layout: .gray))
    for cut in [3, 40, jpeg.count / 2] {
      let error = try #require(caught { _ = try decoder.decode(Array(jpeg.dropLast(cut))) }, "cut \(cut)")
      guard case .truncated(.jpeg, let first?, 200, "Premature end of JPEG file") = error.kind else {
        Issue.record("cut \(cut): expected a truncated JPEG, got \(error.kind)")
        continue
      }
      #expect(first < 200, "cut \(cut): rows are missing")
      #expect(error.description.contains("rows \(first)–199 of 200 are missing"), "\(error)")
    }
  }

  @Test func aProgressiveJPEGCutBetweenTwoScansIsRefused() throws {
    let jpeg = try ImageEncoder(format: .jpeg, jpegProgressive: true).encode(
      TestImages.picture(width: 64, height: 64, layout: .rgb))
    // Cut right before the last scan: every scan read is whole, as in a file lacking only its end marker.
    let lastScan = try #require(jpeg.indices.dropLast().last { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
    let error = caught { _ = try decoder.decode(Array(jpeg[..<lastScan])) }
    #expect(
      error?.kind == .truncated(format: .jpeg, firstMissingRow: nil, height: 64, message: "Premature end of JPEG file"))
  }

  // MARK: Corrupt data is not truncation

  @Test func corruptJPEGDataIsReportedAsCorruptWithLibjpegsMessageAndTheRow() throws {
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 64, height: 64, layout: .rgb))
    let sos = try marker(0xDA, in: jpeg)
    // A marker in the middle of the entropy-coded data: the scan's data ends there, though the file goes on.
    var marked = jpeg
    let middle = sos + (jpeg.count - sos) / 2
    marked.replaceSubrange(middle..<middle + 2, with: [0xFF, 0xD0 + 3])
    // Bytes overwritten in the middle of the entropy-coded data: 32 one bits, which no Huffman code is.
    var overwritten = jpeg
    overwritten.replaceSubrange(middle..<middle + 8, with: [0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0])
    for (name, bytes) in [("marker", marked), ("overwritten", overwritten)] {
      let error = try #require(caught { _ = try decoder.decode(bytes) }, "\(name)")
      let text = error.description
      #expect(text.hasPrefix("corrupt JPEG image data: the decoder found damage in row "), "\(name): \(text)")
      #expect(text.contains("(libjpeg: Corrupt JPEG data"), "\(name): \(text)")
      #expect(!text.contains("ends too early") && !text.contains("truncated"), "\(name): \(text)")
    }
  }

  @Test func corruptPNGDataIsToldFromATruncatedFile() throws {
    let png = try ImageEncoder(format: .png, pngCompressionLevel: 0).encode(
      TestImages.noise(width: 40, height: 30, layout: .rgb))
    let idat = try #require(png.indices.first { png[$0..<$0 + 4].elementsEqual("IDAT".utf8) })
    let length = Int(png[idat - 2]) << 8 | Int(png[idat - 1])
    var badCRC = png
    badCRC[idat + 4 + length] ^= 0x5A  // the IDAT chunk's CRC
    var badAdler = png
    badAdler[idat + 4 + 100] ^= 0x5A  // stored zlib blocks: the data inflates, zlib's checksum disagrees
    var badZlib = png
    badZlib[idat + 4] = 0x00  // the zlib header
    let texts = [badCRC, badZlib, badAdler].map { bytes in
      caught { _ = try decoder.decode(bytes) }?.description ?? "no error"
    }
    // A checksum is checked at the end of what it covers: the damage may be in any row.
    #expect(texts[0] == "corrupt PNG image data: the image is damaged (libpng: IDAT: CRC error)")
    #expect(texts[1].hasPrefix("corrupt PNG image data: the decoder found damage in row 0 of 30 (libpng: IDAT: "))
    #expect(texts[2] == "corrupt PNG image data: the image is damaged (libpng: IDAT: incorrect data check)")
    let cut = caught { _ = try decoder.decode(Array(png.prefix(png.count / 2))) }?.description ?? "no error"
    #expect(cut.hasPrefix("the PNG file ends too early: rows "), "\(cut)")
    for text in texts { #expect(!text.contains("truncated") && !text.contains("ends too early"), "\(text)") }
  }

  /// helper-52's review: when the image data's zlib checksum (Adler-32) sits in an IDAT chunk of its own, libpng
  /// gives its failure only as a warning, so a PNG whose pixels were changed (every CRC made to match) decoded
  /// without a word. It is damaged data, as when the checksum shares the chunk with the data.
  @Test func aDataChecksumThatFailsInAChunkOfItsOwnIsDamage() throws {
    let (width, height) = (40, 30)
    let rows = (0..<height).map { y in (0..<width * 3).map { x in UInt8(truncatingIfNeeded: x * 7 + y * 13) } }
    var stream = TestImages.zlibStored(rows.flatMap { [0] + $0 })
    let header = TestImages.be32(UInt32(width)) + TestImages.be32(UInt32(height)) + [8, 2, 0, 0, 0]
    func png(_ stream: [UInt8], splitChecksum: Bool) -> [UInt8] {
      let idat =
        splitChecksum
        ? TestImages.chunk("IDAT", Array(stream.dropLast(4))) + TestImages.chunk("IDAT", Array(stream.suffix(4)))
        : TestImages.chunk("IDAT", stream)
      return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + TestImages.chunk("IHDR", header) + idat
        + TestImages.chunk("IEND", [])
    }
    // Sound, the checksum in a chunk of its own: decodes, no warning.
    var warnings: [String] = []
    let sound = try decoder.decode(png(stream, splitChecksum: true), warnings: &warnings)
    #expect(sound.pixels == rows.flatMap { $0 } && warnings.isEmpty, "\(warnings)")
    stream[2 + 5 + 500] ^= 0x55  // a pixel byte of the stored block: the data inflates, the checksum disagrees
    for split in [false, true] {
      let error = caught { _ = try decoder.decode(png(stream, splitChecksum: split)) }
      guard case .damagedData(.png, nil, 30, let message)? = error?.kind else {
        Issue.record("split \(split): expected damaged data in any row, got \(String(describing: error))")
        continue
      }
      #expect(message.contains("incorrect data check"), "split \(split): \(message)")
    }
    var lenientWarnings: [String] = []
    _ = try ImageDecoder(isLenient: true).decode(png(stream, splitChecksum: true), warnings: &lenientWarnings)
    #expect(
      lenientWarnings == [
        "corrupt PNG image data: the image is damaged (libpng: IDAT: incorrect data check (the zlib checksum of the "
          + "pixels)); decoded anyway (--lenient): any row may hold wrong pixels"
      ])
  }

  // MARK: Metadata left out is reported

  @Test(arguments: ["tEXt", "zTXt", "iTXt"])
  func aTextChunkWithABadCRCIsReported(type: String) throws {
    let text = CodecReviewTests.textChunk(type, "Comment", "hello")
    var chunk = TestImages.chunk(type, text.1)
    chunk[chunk.count - 1] ^= 0xFF
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 4, height: 4, layout: .gray))
    let damaged = Array(png.prefix(33)) + chunk + Array(png.dropFirst(33))
    var warnings: [String] = []
    let image = try decoder.decode(damaged, warnings: &warnings)
    #expect(image.metadata.text.isEmpty && image.metadata.comments.isEmpty, "a chunk with a bad CRC stays out")
    #expect(
      warnings == [
        "the \(type) chunk was left out: its CRC does not match its data, so it is damaged "
          + "(libpng: \(type): CRC error)"
      ])
  }

  /// helper-51's review: libpng's first eight warnings are kept; the ninth bad chunk on was left out without a word,
  /// and a refused profile after them was named without its reason.
  @Test func warningsPastTheKeptOnesAreCountedAndAProfileKeepsItsReason() throws {
    var chunks: [UInt8] = []
    for index in 0..<12 {
      var chunk = TestImages.chunk("tEXt", CodecReviewTests.textChunk("tEXt", "Note\(index)", "hello").1)
      chunk[chunk.count - 1] ^= 0xFF
      chunks += chunk
    }
    let profile = PhotoFixtures.iccProfile(size: 512)
    chunks += TestImages.chunk("iCCP", Array("ICC profile".utf8) + [0, 0] + TestImages.zlibStored(profile))
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 4, height: 4, layout: .gray))
    var warnings: [String] = []
    _ = try decoder.decode(Array(png.prefix(33)) + chunks + Array(png.dropFirst(33)), warnings: &warnings)
    #expect(warnings.filter { $0.hasPrefix("the tEXt chunk was left out") }.count == 8, "\(warnings)")
    #expect(warnings.contains { $0.hasPrefix("libpng gave 5 more warnings than are kept here") }, "\(warnings)")
    let icc = try #require(warnings.first { $0.hasPrefix("the ICC profile (iCCP chunk) was left out") })
    #expect(icc.contains("libpng: iCCP: ") && !icc.contains("iCCP: refused"), "\(icc)")
  }

  /// helper-51's review: an iCCP chunk in bytes after IEND (which libpng never reads) was reported as a profile left
  /// out, "iCCP: refused".
  @Test func anICCPChunkAfterTheEndIsNotReportedAsLeftOut() throws {
    let iccp = TestImages.chunk("iCCP", Array("ICC profile".utf8) + [0, 0] + TestImages.zlibStored([1, 2, 3]))
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 4, height: 4, layout: .gray))
    var warnings: [String] = []
    _ = try decoder.decode(png + iccp, warnings: &warnings)
    #expect(warnings.isEmpty, "\(warnings)")
  }

  @Test func anICCProfileLibpngRefusesOnReadIsReported() throws {
    // An RGB profile in a gray PNG, its CRC sound: libpng leaves it out.
    let profile = PhotoFixtures.iccProfile(size: 512)
    let iccp = TestImages.chunk("iCCP", Array("ICC profile".utf8) + [0, 0] + TestImages.zlibStored(profile))
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 4, height: 4, layout: .gray))
    var warnings: [String] = []
    let image = try decoder.decode(Array(png.prefix(33)) + iccp + Array(png.dropFirst(33)), warnings: &warnings)
    #expect(image.metadata.iccProfile == nil)
    #expect(warnings.count == 1, "\(warnings)")
    #expect(
      warnings.first?.hasPrefix("the ICC profile (iCCP chunk) was left out: libpng refused it (libpng: iCCP: ")
        == true, "\(warnings)")
  }

  /// `jpeg` with `profile` in one APP2 marker right after SOI.
  func jpeg(_ jpeg: [UInt8], profile: [UInt8]) -> [UInt8] {
    let payload = Array("ICC_PROFILE\u{0}".utf8) + [1, 1] + profile
    let app2 = [0xFF, 0xE2, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    return Array(jpeg.prefix(2)) + app2 + Array(jpeg.dropFirst(2))
  }

  /// A JPEG of `image` carrying `profile` in one APP2 marker.
  func jpeg(_ image: Image, profile: [UInt8]) throws -> [UInt8] {
    jpeg(try ImageEncoder(format: .jpeg).encode(image), profile: profile)
  }

  /// The report of a batch of one file, `bytes` (named `name`), written as `format`.
  func report(
    _ bytes: [UInt8], name: String, format: ImageFormat, background: BackgroundColour = .white
  ) async throws -> FileReport {
    let folder = try TemporaryFolder()
    try ImageFile.writeAtomically(bytes, to: folder.path + "/" + name)
    let item = BatchItem(input: folder.path + "/" + name, output: folder.path + "/out", format: format)
    let batch = TiltShiftBatch(items: [item], configuration: BatchConfiguration(background: background))
    var reports: [FileReport] = []
    for await event in batch.events() {
      if case .fileFinished(let report, _) = event { reports.append(report) }
    }
    let report = try #require(reports.first)
    #expect(report.succeeded)
    return report
  }

  @Test func aProfilePaddedPastItsDeclaredSizeReachesThePNGTrimmed() throws {
    let profile = PhotoFixtures.iccProfile(size: 1024)
    let source = try jpeg(TestImages.picture(width: 16, height: 16, layout: .rgb), profile: profile + [0, 0, 0])
    let png = try ImageEncoder(format: .png).encode(try decoder.decode(source))
    #expect(try decoder.decode(png).metadata.iccProfile?.data == profile)
  }

  @Test func aProfileLibpngRefusesIsReportedByTheBatch() async throws {
    // An RGB profile on a gray JPEG: PNG does not allow it on a gray image.
    let source = try jpeg(
      TestImages.picture(width: 16, height: 16, layout: .gray), profile: PhotoFixtures.iccProfile(size: 1024))
    let report = try await report(source, name: "gray.jpg", format: .png)
    #expect(report.warnings.count == 1, "\(report.warnings)")
    #expect(
      report.warnings.first?.hasPrefix(
        "\(report.item.input): the ICC profile was left out: libpng refused it (libpng: ") == true,
      "\(report.warnings)")
    #expect(report.warnings.first?.contains("RGB color space not permitted on grayscale PNG") == true)
  }

  @Test func profilesThatNoLongerDescribeThePixelsAreReportedByTheBatch() async throws {
    // A CMYK JPEG is decoded to RGB: its CMYK profile describes pixels that are gone.
    let cmyk = jpeg(CMYKSample.bytes, profile: PhotoFixtures.iccProfile(size: 512, colourSpace: "CMYK"))
    let converted = try await report(cmyk, name: "cmyk.jpg", format: .jpeg)
    #expect(
      converted.warnings == [
        "\(converted.item.input): the CMYK ICC profile was left out: the pixels were converted to RGB"
      ])
    // Gray + alpha composited on a coloured background is RGB: its gray profile no longer describes it.
    var tagged = Image(width: 4, height: 4, layout: .grayAlpha, filledWith: 128)
    tagged.metadata.iccProfile = ImageMetadata.ICCProfile(
      data: PhotoFixtures.iccProfile(size: 512, colourSpace: "GRAY"))
    let blue = try #require(BackgroundColour(parsing: "#1E90FF"))
    let png = try ImageEncoder(format: .png).encode(tagged)
    let composited = try await report(png, name: "gray.png", format: .jpeg, background: blue)
    #expect(
      composited.warnings == [
        "\(composited.item.input): the gray ICC profile was left out: composited on a coloured background, "
          + "the pixels are RGB in the JPEG"
      ])
  }
}
