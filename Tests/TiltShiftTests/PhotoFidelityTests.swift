import SpindleTestSupport
import Testing

@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 14: photos come out as they went in — no silent damage, metadata, orientation, depth, alpha.
@Suite(.offThePool) struct PhotoFidelityTests {
  let decoder = ImageDecoder()

  /// Decode → filter → encode as `output`, as the batch does.
  func roundTrip(_ bytes: [UInt8], to output: ImageFormat, strip: Bool = false, radius: Double = 4) throws -> [UInt8] {
    let image = try ImageDecoder(keeps16Bits: output == .png).decode(bytes)
    var filtered = TiltShiftFilter(parameters: try TiltShiftParameters(radius: radius)).apply(to: image, bands: 2)
    if strip {
      filtered = filtered.orientedUpright()
      filtered.metadata.strip()
    }
    return try ImageEncoder(format: output).encode(filtered)
  }

  // MARK: 1. Truncation

  @Test func truncatedJPEGIsAnErrorEvenWhenAHarmlessWarningComesFirst() throws {
    var jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 64, height: 64, layout: .rgb))
    // Stray bytes before the scan: libjpeg's first warning is "extraneous bytes", not the end of file.
    let sos = try #require(jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
    jpeg.insert(contentsOf: [0x12, 0x34], at: sos)
    let cut = Array(jpeg.prefix(sos + (jpeg.count - sos) / 2))
    let error = try #require(caught { _ = try decoder.decode(cut) })
    guard case .truncated(.jpeg, let first?, 64, _) = error.kind else {
      Issue.record("expected a truncated JPEG, got \(error.kind)")
      return
    }
    #expect((1..<64).contains(first), "about half the rows decode: \(first)")
    #expect(error.description.hasPrefix("the JPEG file ends too early: rows \(first)–63 of 64 are missing (libjpeg:"))
    // Lenient: decoded, with a warning naming the rows.
    var warnings: [String] = []
    let image = try ImageDecoder(isLenient: true).decode(cut, warnings: &warnings)
    #expect(image.width == 64 && image.height == 64)
    #expect(warnings.count == 1 && warnings[0].contains("rows \(first)–63 of 64 are missing"), "\(warnings)")
    // A progressive file is read whole before any row is made: no row is known, the whole image is incomplete.
    let progressive = try ImageEncoder(format: .jpeg, jpegProgressive: true).encode(
      TestImages.picture(width: 64, height: 64, layout: .rgb))
    let cutProgressive = caught { _ = try decoder.decode(Array(progressive.prefix(progressive.count * 7 / 10))) }
    #expect(
      cutProgressive?.kind
        == .truncated(format: .jpeg, firstMissingRow: nil, height: 64, message: "Premature end of JPEG file"))
    #expect(cutProgressive?.description.hasPrefix("the JPEG file ends too early: the image is incomplete") == true)
    // The file cut right before its end marker has every row: it decodes, and a warning says the marker is missing.
    let noEnd = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 16, height: 16, layout: .gray))
    var notes: [String] = []
    #expect(try decoder.decode(Array(noEnd.dropLast(2)), warnings: &notes).pixels == decoder.decode(noEnd).pixels)
    #expect(notes.count == 1 && notes[0].contains("end marker (EOI) is missing"), "\(notes)")
  }

  @Test func truncatedPNGNamesTheMissingRowsAndLenientKeepsTheRest() throws {
    let image = TestImages.noise(width: 40, height: 30, layout: .rgb)
    let png = try ImageEncoder(format: .png, pngCompressionLevel: 0).encode(image)
    let iend = 12
    let cut = Array(png.prefix((png.count - iend) * 2 / 3))
    let error = try #require(caught { _ = try decoder.decode(cut) })
    guard case .truncated(.png, let first?, 30, _) = error.kind else {
      Issue.record("expected a truncated PNG, got \(error.kind)")
      return
    }
    #expect((1..<30).contains(first))
    #expect(error.description.contains("rows \(first)–29 of 30 are missing"))
    var warnings: [String] = []
    let partial = try ImageDecoder(isLenient: true).decode(cut, warnings: &warnings)
    #expect(warnings.count == 1)
    #expect(partial.pixels.prefix(first * 120) == image.pixels.prefix(first * 120), "the rows before the cut are kept")
    // Every row, but no IEND: still an error, saying the rows are all there.
    let noEnd = caught { _ = try decoder.decode(Array(png.dropLast(iend))) }
    #expect(
      noEnd?.kind
        == .truncated(format: .png, firstMissingRow: 30, height: 30, message: "unexpected end of file (truncated PNG)"))
    #expect(noEnd?.description.contains("every row is there") == true)
    // Lenient, it decodes; no pixel is missing, so the warning names none as filled in.
    var endWarnings: [String] = []
    let whole = try ImageDecoder(isLenient: true).decode(Array(png.dropLast(iend)), warnings: &endWarnings)
    #expect(whole.pixels == image.pixels)
    #expect(endWarnings.count == 1 && endWarnings[0].hasSuffix("decoded anyway (--lenient), every row from the file"))
  }

  @Test func aChunkDeclaringGigabytesCostsNothing() throws {
    // Found by Scripts/fuzz-decoders.sh: libpng allocates and zeroes a chunk's declared length before reading
    // it, so 300 bytes declaring a 1.6 GB iTXt chunk took 1.6 GB. Now it is the truncation it is.
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 8, height: 8, layout: .rgb))
    let hostile =
      Array(png.prefix(33)) + TestImages.be32(0x6174_6122) + Array("iTXt".utf8) + Array(repeating: 0x41, count: 200)
    let before = peakResidentKilobytes()
    let error = try #require(caught { _ = try decoder.decode(hostile) })
    // The peak is the whole process's, and other suites decode 12 MP photos beside this one: a bound far below the
    // 1.6 GB the bug cost, and far above what a neighbour can add between the two reads.
    #expect(peakResidentKilobytes() - before < 512 * 1024, "no gigabyte allocation")
    guard case .truncated(.png, 0, 8, _) = error.kind else {
      Issue.record("expected truncation before any row, got \(error.kind)")
      return
    }
  }

  // MARK: 2, 3. Metadata in every format combination

  @Test(arguments: [ImageFormat.jpeg, .png], [ImageFormat.jpeg, .png])
  func metadataSurvivesWhereTheOutputCanCarryIt(input: ImageFormat, output: ImageFormat) throws {
    var source = TestImages.picture(width: 48, height: 32, layout: .rgb)
    source.metadata = PhotoFixtures.fullMetadata(orientation: 1)
    source.metadata.comments = ["shot on a tripod"]
    let bytes = try ImageEncoder(format: input).encode(source)
    let result = try decoder.decode(try roundTrip(bytes, to: output))
    let kept = result.metadata
    #expect(kept.iccProfile?.data == PhotoFixtures.iccProfile(), "ICC \(input)→\(output)")
    #expect(kept.exif == source.metadata.exif, "EXIF \(input)→\(output)")
    #expect(kept.xmp == source.metadata.xmp, "XMP \(input)→\(output)")
    #expect(kept.iptc == source.metadata.iptc, "IPTC \(input)→\(output)")
    #expect(kept.comments + kept.text.filter { $0.keyword == "Comment" }.map(\.text) == ["shot on a tripod"])
    let density = try #require(kept.density)
    switch (input, output) {
    case (.png, .png):
      #expect(kept.text.filter { $0.keyword != "Comment" } == source.metadata.text)
      #expect(kept.gamma == 45455 && kept.chromaticities == source.metadata.chromaticities)
      #expect(density == source.metadata.density)
    case (_, .png):
      #expect(density == ImageMetadata.PixelDensity(x: 11811, y: 11811, unit: .perMetre), "300 dpi and back")
    default:
      #expect(density == ImageMetadata.PixelDensity(x: 300, y: 300, unit: .perInch), "JFIF: 11811 px/m is 300 dpi")
      #expect(kept.gamma == nil && kept.text.isEmpty, "JPEG has no gAMA or text chunks: dropped")
    }
    if output == .jpeg {
      let app2 = PhotoFixtures.jpegMarkers(try roundTrip(bytes, to: .jpeg)).filter { $0.code == 0xE2 }
      #expect(app2.count == 3, "a 150 KB profile takes three APP2 segments")
    }
  }

  @Test func stripRemovesEveryMetadataBlock() throws {
    var source = TestImages.picture(width: 32, height: 16, layout: .rgb)
    source.metadata = PhotoFixtures.fullMetadata()
    for format in [ImageFormat.jpeg, .png] {
      let out = try roundTrip(try ImageEncoder(format: format).encode(source), to: format, strip: true)
      #expect(try decoder.decode(out).metadata.isEmpty, "\(format)")
      if format == .png {
        #expect(PhotoFixtures.pngChunkTypes(out) == ["IHDR", "IDAT", "IEND"])
      } else {
        #expect(PhotoFixtures.jpegMarkers(out).allSatisfy { ![0xE1, 0xE2, 0xED, 0xFE].contains($0.code) })
      }
    }
  }

  @Test func extendedXMPStaysWholeAndMergesIntoPNG() throws {
    let (main, extended) = PhotoFixtures.extendedXMPPair()
    var source = TestImages.picture(width: 16, height: 16, layout: .rgb)
    source.metadata.xmp = main
    source.metadata.extendedXMP = extended
    let jpeg = try ImageEncoder(format: .jpeg).encode(source)
    #expect(PhotoFixtures.jpegMarkers(jpeg).filter { $0.code == 0xE1 }.count == 1 + 2, "main + two extension chunks")
    let again = try decoder.decode(try roundTrip(jpeg, to: .jpeg)).metadata
    #expect(again.xmp == main && again.extendedXMP == extended)
    let png = try decoder.decode(try roundTrip(jpeg, to: .png)).metadata
    let merged = String(decoding: try #require(png.xmp), as: UTF8.self)
    #expect(merged.contains("© 2026 A. Photographer") && merged.contains("Extended Caption Writer"))
    #expect(!merged.contains("HasExtendedXMP"), "PNG holds one packet, with no pointer to an extension")
    // And back to JPEG: too big for one marker, so split again, every property kept.
    let back = try decoder.decode(
      try roundTrip(try ImageEncoder(format: .png).encode(try decoder.decode(try roundTrip(jpeg, to: .png))), to: .jpeg)
    ).metadata
    let whole = XMPPacket.merging(main: try #require(back.xmp), extended: try #require(back.extendedXMP))
    #expect(String(decoding: whole, as: UTF8.self).contains("Extended Caption Writer"))
    #expect(XMPPacket.extendedGUID(in: try #require(back.xmp)) == MD5.hex(of: try #require(back.extendedXMP)))
  }

  @Test func md5MatchesTheRFCVectors() {
    #expect(MD5.hex(of: []) == "D41D8CD98F00B204E9800998ECF8427E")
    #expect(MD5.hex(of: Array("abc".utf8)) == "900150983CD24FB0D6963F7D28E17F72")
    #expect(
      MD5.hex(of: Array("12345678901234567890123456789012345678901234567890123456789012345678901234567890".utf8))
        == "57EDF4A22BE3C955AC49DA2E2107B67A")
  }

  // MARK: 4. Orientation, all 8, every format combination

  @Test(arguments: 1...8)
  func outputDisplaysAsTheInputDid(orientation: Int) throws {
    var source = PhotoFixtures.asymmetric(width: 24, height: 16)
    source.exif = TestImages.exif(orientation: UInt8(orientation))
    for input in [ImageFormat.jpeg, .png] {
      let bytes = try ImageEncoder(format: input, jpegQuality: 100).encode(source)
      let shown = try decoder.decode(bytes).orientedUpright()
      for output in [ImageFormat.jpeg, .png] {
        for strip in [false, true] {
          let result = try decoder.decode(try roundTrip(bytes, to: output, strip: strip, radius: 0))
          #expect(result.orientation == (strip ? 1 : orientation), "\(input)→\(output) strip \(strip)")
          let displayed = result.orientedUpright()
          #expect(displayed.width == shown.width && displayed.height == shown.height)
          let error = zip(displayed.pixels, shown.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
          #expect(error <= 12, "o\(orientation) \(input)→\(output) strip \(strip): \(error)")
        }
      }
    }
  }

  @Test(arguments: 1...8)
  func theSharpBandIsHorizontalAsDisplayed(orientation: Int) throws {
    // Odd sizes: the displayed middle row sits exactly mid-band, where the mask is 0 (fully sharp).
    var source = TestImages.noise(width: 41, height: 29, layout: .rgb)
    source.exif = TestImages.exif(orientation: UInt8(orientation))
    for viaXMP in [false, true] {
      if viaXMP {
        source.exif = nil
        source.metadata.xmp = PhotoFixtures.xmp(orientation: orientation)
      }
      let png = try ImageEncoder(format: .png).encode(source)
      let shownIn = try decoder.decode(png).orientedUpright()
      let out = try decoder.decode(try roundTrip(png, to: .png, radius: 3))
      let shownOut = out.orientedUpright()
      let row = shownIn.bytesPerRow
      let middle = shownIn.height / 2
      #expect(
        shownOut.pixels[middle * row..<(middle + 1) * row] == shownIn.pixels[middle * row..<(middle + 1) * row],
        "the displayed middle row is sharp (o\(orientation), XMP \(viaXMP))")
      #expect(shownOut.pixels[0..<row] != shownIn.pixels[0..<row], "the displayed top row is blurred")
      if viaXMP {
        // A JPEG shows orientation through EXIF: the XMP-only orientation is said there too.
        let jpeg = try decoder.decode(try roundTrip(png, to: .jpeg, radius: 0))
        #expect(jpeg.exifOrientation == (orientation == 1 ? nil : orientation))
      }
    }
  }

  // MARK: 5. 16 bits

  @Test func sixteenBitPNGStaysSixteenBitThroughTheFilter() throws {
    var samples: [UInt16] = []
    for y in 0..<24 { for x in 0..<32 { for c in 0..<3 { samples.append(UInt16(x * 2000 + y * 37 + c * 5 + 1)) } } }
    let image = Image(width: 32, height: 24, layout: .rgb, samples16: samples)
    let png = try ImageEncoder(format: .png).encode(image)
    #expect(png[24] == 16, "IHDR bit depth")
    let decoded = try ImageDecoder(keeps16Bits: true).decode(png)
    #expect(decoded.bitDepth == 16 && decoded.samples16 == samples)
    let out = try ImageDecoder(keeps16Bits: true).decode(try roundTrip(png, to: .png))
    #expect(out.bitDepth == 16)
    #expect(out.samples16.contains { $0 % 257 != 0 }, "real 16-bit values, not 8-bit ones widened")
    #expect(try ImageDecoder().decode(png).bitDepth == 8, "without keeps16Bits: scaled to 8")
    // JPEG output takes 8 bits: v · 255 / 65535.
    let jpeg = try decoder.decode(try ImageEncoder(format: .jpeg, jpegQuality: 100).encode(image))
    #expect(abs(Int(jpeg.pixels[3 * 31]) - 31 * 2000 * 255 / 65535) <= 3)
  }

  @Test(arguments: [Image.Layout.gray, .grayAlpha, .rgb, .rgba])
  func sixteenBitFilterMatchesTheReference(layout: Image.Layout) throws {
    for (width, height, radius) in [(1, 1, 2.0), (7, 5, 3.0), (33, 21, 5.0), (5, 40, 9.0)] {
      var state: UInt32 = 99
      let samples = (0..<width * height * layout.channels).map { _ -> UInt16 in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt16(truncatingIfNeeded: state >> 16)
      }
      let image = Image(width: width, height: height, layout: layout, samples16: samples)
      let parameters = try TiltShiftParameters(radius: radius, clearBand: 0.3...0.6, innerIntensity: 0.4)
      let expected = reference16(image, parameters)
      for bands in [1, 3] {
        let output = TiltShiftFilter(parameters: parameters).apply(to: image, bands: bands)
        #expect(output.samples16 == expected, "\(width)x\(height) \(layout) r\(radius) bands \(bands)")
      }
    }
  }

  @Test func sixteenBitAverageIsExactForEveryWidth() {
    for width in stride(from: 3, through: BoxKernel.maximumWidth, by: 2) {
      let kernel = BoxKernel16(width: width)
      let radius = width / 2
      for sum in [0, 1, width - 1, width, 65535 * width / 2, 65535 * width - 1, 65535 * width] {
        #expect(Int(kernel.average(UInt32(sum))) == (sum + radius) / width, "width \(width) sum \(sum)")
      }
    }
  }

  // MARK: 6. Alpha into JPEG

  @Test func transparentPixelsGoOnTheBackgroundNotBlack() throws {
    // Left half fully transparent black, right half opaque red.
    var pixels: [UInt8] = []
    for _ in 0..<8 { for x in 0..<16 { pixels += x < 8 ? [0, 0, 0, 0] : [255, 0, 0, 255] } }
    let image = Image(width: 16, height: 8, layout: .rgba, pixels: pixels)
    func corner(_ background: BackgroundColour) throws -> [Int] {
      let decoded = try decoder.decode(
        try ImageEncoder(format: .jpeg, jpegQuality: 100, background: background).encode(image))
      return decoded[1, 4].map { Int($0) }
    }
    #expect(try corner(.white).allSatisfy { $0 >= 250 }, "white by default")
    #expect(try corner(.black).allSatisfy { $0 <= 5 })
    let blue = try #require(BackgroundColour(parsing: "#1E90FF"))
    #expect(zip(try corner(blue), [0x1E, 0x90, 0xFF]).allSatisfy { abs($0 - $1) <= 6 })
    #expect(BackgroundColour(parsing: "#12345") == nil && BackgroundColour(parsing: "blue") == nil)
    // A gray profile stays with gray output and goes when a coloured background makes the output RGB.
    var tagged = Image(width: 4, height: 4, layout: .grayAlpha, filledWith: 128)
    tagged.metadata.iccProfile = ImageMetadata.ICCProfile(
      data: PhotoFixtures.iccProfile(size: 512, colourSpace: "GRAY"))
    #expect(try decoder.decode(try ImageEncoder(format: .jpeg).encode(tagged)).metadata.iccProfile != nil)
    #expect(
      try decoder.decode(try ImageEncoder(format: .jpeg, background: blue).encode(tagged)).metadata.iccProfile == nil)
    // Half-transparent gray on a coloured background becomes colour.
    let gray = Image(width: 1, height: 1, layout: .grayAlpha, pixels: [200, 128]).compositedOn(blue)
    #expect(
      gray.layout == .rgb
        && gray.pixels == [Image.blend(200, 128, 0x1E), Image.blend(200, 128, 0x90), Image.blend(200, 128, 0xFF)])
  }

  // MARK: 8. EXIF size limit

  @Test func exifOfOneFullMarkerFitsAndOneByteMoreIsRefusedPlainly() throws {
    var image = TestImages.picture(width: 8, height: 8, layout: .rgb)
    for size in [65532, 65533] {
      image.exif = PhotoFixtures.exif(size: size, orientation: 3)
      let decoded = try decoder.decode(try ImageEncoder(format: .jpeg).encode(image))
      #expect(decoded.exif == image.exif && decoded.exifOrientation == 3, "\(size) bytes")
    }
    image.exif = PhotoFixtures.exif(size: 65534)
    let error = try #require(caught { _ = try ImageEncoder(format: .jpeg).encode(image) })
    #expect(error.kind == .metadataTooLarge(what: "EXIF", bytes: 65534, limit: 65533, format: .jpeg))
    #expect(error.description.hasPrefix("the EXIF metadata is 65534 bytes, more than JPEG can hold (65533)"))
    // PNG has no such limit.
    #expect(try decoder.decode(try ImageEncoder(format: .png).encode(image)).exif == image.exif)
  }

  // MARK: 9. Human words first

  @Test func errorsLeadWithPlainWordsAndKeepTheCodecsAfter() throws {
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 16, height: 16, layout: .rgb))
    var badChunk = png
    badChunk.replaceSubrange(37..<41, with: [0xF4, 0xA8, 0x81, 0xE1])  // the first chunk after IHDR: bad type
    var badData = png
    let idat = try #require(png.indices.first { png[$0..<$0 + 4].elementsEqual("IDAT".utf8) })
    badData[idat + 6] ^= 0x5A
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 16, height: 16, layout: .rgb))
    var badHeader = jpeg
    let sof = try #require(jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 })
    badHeader[sof + 4] = 13  // a sample precision no decoder supports
    for (bytes, lead) in [
      (badChunk, "not a readable PNG file: its structure is damaged (libpng: "),
      (badData, "corrupt PNG image data: the decoder found damage in row 0 of 16 (libpng: "),
      (badHeader, "not a readable JPEG file: its structure is damaged (libjpeg: "),
    ] {
      let text = caught { _ = try decoder.decode(bytes) }?.naming("x").description ?? "no error"
      #expect(text.hasPrefix("x: \(lead)"), "\(text)")
      #expect(text.hasSuffix(")"))
    }
  }
}

/// The process's peak resident memory so far, in KiB.
private func peakResidentKilobytes() -> Int {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return usage.ru_maxrss
}

/// The 16-bit tilt-shift from its definition: direct window sums, every pass rounded to 16 bits, then the blend.
private func reference16(_ image: Image, _ parameters: TiltShiftParameters) -> [UInt16] {
  let (w, h, c) = (image.width, image.height, image.layout.channels)
  let d = parameters.boxWidth
  let r = d / 2
  let source = image.samples16
  func pass(_ p: [UInt16], horizontal: Bool) -> [UInt16] {
    var out = p
    for y in 0..<h {
      for x in 0..<w {
        for ch in 0..<c {
          var sum = 0
          for k in -r...r {
            let (sx, sy) = horizontal ? (min(max(x + k, 0), w - 1), y) : (x, min(max(y + k, 0), h - 1))
            sum += Int(p[(sy * w + sx) * c + ch])
          }
          out[(y * w + x) * c + ch] = UInt16((sum + r) / d)
        }
      }
    }
    return out
  }
  var blurred = source
  for _ in 0..<3 { blurred = pass(blurred, horizontal: true) }
  for _ in 0..<3 { blurred = pass(blurred, horizontal: false) }
  let weights = GradientMask(count: h, parameters: parameters).weights
  var out = source
  for y in 0..<h {
    let m = Int(weights[y])
    for i in (y * w * c)..<((y + 1) * w * c) where !(image.layout.hasAlpha && i % c == c - 1) {
      out[i] = UInt16((Int(source[i]) * (255 - m) + Int(blurred[i]) * m + 127) / 255)
    }
  }
  return out
}

/// Metadata blocks from a hostile file: parsed without a trap and without allocating what they claim.
@Suite(.offThePool) struct HostileMetadataTests {
  @Test func declaredSizesBeyondTheDataAreIgnored() {
    // An extended-XMP chunk claiming 60 MB, and a raw IPTC profile claiming a terabyte.
    let extended =
      ImageMetadata.jpegExtendedXMPHeader + Array(repeating: UInt8(ascii: "A"), count: 32)
      + ImageMetadata.bigEndian(60_000_000) + ImageMetadata.bigEndian(0) + [1, 2, 3]
    let main =
      ImageMetadata.jpegXMPHeader + Array("<x xmpNote:HasExtendedXMP=\"\(String(repeating: "A", count: 32))\"/>".utf8)
    let metadata = ImageMetadata(jpegMarkers: [(0xE1, main), (0xE1, extended)], density: nil)
    #expect(metadata.extendedXMP == nil && metadata.xmp != nil)
    #expect(ImageMetadata.rawProfileBytes("\n8bim\n1000000000000\nabcd\n") == nil)
    #expect(ImageMetadata.rawProfileBytes(ImageMetadata.rawProfileText("8bim", [1, 2, 255])) == [1, 2, 255])
    // Truncated EXIF and ICC segments are skipped, never read past their end.
    let broken = ImageMetadata(
      jpegMarkers: [(0xE1, Array("Exif".utf8) + [0, 0, 0x4D]), (0xE2, Array("ICC_PROFILE".utf8) + [0, 1])], density: nil
    )
    #expect(broken.iccProfile == nil)
    var image = Image(width: 1, height: 1, layout: .gray, pixels: [0])
    image.metadata = broken
    #expect(image.orientation == 1)
  }
}
