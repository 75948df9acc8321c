import SpindleTestSupport
import Testing

@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

private func meanAbsoluteError(_ a: [UInt8], _ b: [UInt8]) -> Double {
  zip(a, b).reduce(0.0) { $0 + Double(abs(Int($1.0) - Int($1.1))) } / Double(max(1, a.count))
}

/// The kind of `ImageError` that `body` throws (nil when it throws nothing or something else).
private func caughtKind(_ body: () throws -> Void) -> ImageError.Kind? {
  caught(body)?.kind
}

private func isCorrupt(_ kind: ImageError.Kind?, _ format: ImageFormat) -> Bool {
  switch kind {
  case .corruptData(format, let message)?, .invalidFile(format, let message)?: !message.isEmpty
  case .truncated(format, _, _, let message)?, .damagedData(format, _, _, let message)?: !message.isEmpty
  default: false
  }
}

private func isUnreadable(_ kind: ImageError.Kind?) -> Bool {
  if case .unreadableFile? = kind { return true }
  return false
}

@Suite("Image codecs", .offThePool)
struct CodecTests {
  let decoder = ImageDecoder()

  @Test(arguments: Image.Layout.allCases)
  func pngRoundTripsEveryLayout(layout: Image.Layout) throws {
    let image = TestImages.noise(width: 23, height: 17, layout: layout)
    for interlaced in [false, true] {
      let bytes = try ImageEncoder(format: .png, pngInterlaced: interlaced).encode(image)
      #expect(ImageFormat(detecting: bytes) == .png)
      #expect(try decoder.decode(bytes) == image)
    }
  }

  @Test func pngPaletteWithTransparencyBecomesRGBA() throws {
    let palette: [UInt8] = [255, 0, 0, 0, 255, 0, 0, 0, 255]
    let bytes = TestImages.png(
      width: 3, height: 2, bitDepth: 8, colorType: 3, rows: [[0, 1, 2], [2, 1, 0]],
      before: [("PLTE", palette), ("tRNS", [255, 128])])
    let image = try decoder.decode(bytes)
    #expect(image.layout == .rgba)
    #expect(Array(image[0, 0]) == [255, 0, 0, 255])
    #expect(Array(image[1, 0]) == [0, 255, 0, 128])
    #expect(Array(image[2, 0]) == [0, 0, 255, 255])
    #expect(Array(image[0, 1]) == [0, 0, 255, 255])
  }

  @Test func pngPaletteWithoutTransparencyBecomesRGB() throws {
    let bytes = TestImages.png(
      width: 2, height: 1, bitDepth: 8, colorType: 3, rows: [[1, 0]], before: [("PLTE", [10, 20, 30, 40, 50, 60])])
    let image = try decoder.decode(bytes)
    #expect(image.layout == .rgb)
    #expect(image.pixels == [40, 50, 60, 10, 20, 30])
  }

  @Test func png16BitIsScaledTo8() throws {
    // RGB 16-bit: 0xFFFF, 0x8080, 0x0000 per pixel.
    let bytes = TestImages.png(
      width: 1, height: 1, bitDepth: 16, colorType: 2, rows: [[0xFF, 0xFF, 0x80, 0x80, 0x00, 0x00]])
    let image = try decoder.decode(bytes)
    #expect(image.layout == .rgb)
    #expect(image.pixels == [255, 128, 0])
    let gray16 = TestImages.png(
      width: 2, height: 1, bitDepth: 16, colorType: 4, rows: [[0, 0, 255, 255, 255, 255, 0, 0]])
    #expect(try decoder.decode(gray16).pixels == [0, 255, 255, 0])
  }

  @Test func pngLowBitDepthGrayExpands() throws {
    let bytes = TestImages.png(width: 8, height: 1, bitDepth: 1, colorType: 0, rows: [[0b1010_0000]])
    let image = try decoder.decode(bytes)
    #expect(image.layout == .gray)
    #expect(image.pixels == [255, 0, 255, 0, 0, 0, 0, 0])
  }

  @Test func jpegRoundTripsGrayRGBAndProgressive() throws {
    for layout in [Image.Layout.gray, .rgb] {
      let image = TestImages.picture(width: 64, height: 48, layout: layout)
      for progressive in [false, true] {
        let bytes = try ImageEncoder(format: .jpeg, jpegQuality: 95, jpegProgressive: progressive).encode(image)
        #expect(ImageFormat(detecting: bytes) == .jpeg)
        let decoded = try decoder.decode(bytes)
        #expect(decoded.layout == layout && decoded.width == 64 && decoded.height == 48)
        #expect(meanAbsoluteError(decoded.pixels, image.pixels) < 6, "\(layout) progressive \(progressive)")
        #expect(decoded.exif == nil)
      }
    }
  }

  @Test func progressiveFlagReallyWritesProgressive() throws {
    let image = TestImages.picture(width: 16, height: 16, layout: .rgb)
    let baseline = try ImageEncoder(format: .jpeg).encode(image)
    let progressive = try ImageEncoder(format: .jpeg, jpegProgressive: true).encode(image)
    func hasMarker(_ bytes: [UInt8], _ marker: UInt8) -> Bool {
      zip(bytes, bytes.dropFirst()).contains { $0 == 0xFF && $1 == marker }
    }
    #expect(hasMarker(progressive, 0xC2) && !hasMarker(baseline, 0xC2))
  }

  @Test func adobeCMYKJPEGIsConvertedToRGB() throws {
    let image = try decoder.decode(CMYKSample.bytes)
    #expect(image.layout == .rgb && image.width == 16 && image.height == 8)
    func near(_ pixel: ArraySlice<UInt8>, _ expected: [Int]) -> Bool {
      zip(pixel, expected).allSatisfy { abs(Int($0) - $1) <= 12 }
    }
    #expect(near(image[2, 4], [255, 0, 0]), "\(Array(image[2, 4]))")
    #expect(near(image[13, 4], [0, 0, 255]), "\(Array(image[13, 4]))")
  }

  @Test func jpegDropsAlpha() throws {
    let image = TestImages.picture(width: 20, height: 10, layout: .rgba)
    let decoded = try decoder.decode(try ImageEncoder(format: .jpeg).encode(image))
    #expect(decoded.layout == .rgb)
    let gray = try decoder.decode(
      try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 20, height: 10, layout: .grayAlpha)))
    #expect(gray.layout == .gray)
  }

  @Test func exifSurvivesDecodeFilterEncode() throws {
    var image = TestImages.picture(width: 40, height: 30, layout: .rgb)
    image.exif = TestImages.exif(orientation: 6)
    let first = try decoder.decode(try ImageEncoder(format: .jpeg).encode(image))
    #expect(first.exif == image.exif)
    #expect(first.exifOrientation == 6)
    let filtered = TiltShiftFilter().apply(to: first)
    let second = try decoder.decode(try ImageEncoder(format: .jpeg).encode(filtered))
    #expect(second.exif == image.exif)
    #expect(second.exifOrientation == 6)
  }

  @Test func corruptAndTruncatedJPEGAreErrors() throws {
    let bytes = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 64, height: 64, layout: .rgb))
    #expect(
      isCorrupt(
        caughtKind {
          _ = try decoder.decode(Array(bytes.prefix(bytes.count / 2)))
        }, .jpeg))
    #expect(
      isCorrupt(
        caughtKind {
          _ = try decoder.decode(Array(bytes.prefix(40)))
        }, .jpeg))
    var garbage = bytes
    for i in 20..<min(400, garbage.count) { garbage[i] = UInt8(truncatingIfNeeded: i &* 37) }
    #expect(isCorrupt(caughtKind { _ = try decoder.decode(garbage) }, .jpeg))
    #expect(
      isCorrupt(
        caughtKind {
          _ = try decoder.decode([0xFF, 0xD8, 0xFF])
        }, .jpeg))
  }

  @Test func corruptAndTruncatedPNGAreErrors() throws {
    let bytes = try ImageEncoder(format: .png).encode(TestImages.noise(width: 64, height: 64, layout: .rgb))
    #expect(
      isCorrupt(
        caughtKind {
          _ = try decoder.decode(Array(bytes.prefix(bytes.count / 2)))
        }, .png))
    var badCRC = bytes
    badCRC[29] ^= 0xFF  // inside IHDR's CRC
    #expect(isCorrupt(caughtKind { _ = try decoder.decode(badCRC) }, .png))
    var badData = bytes
    for i in 60..<200 { badData[i] ^= 0x5A }
    #expect(isCorrupt(caughtKind { _ = try decoder.decode(badData) }, .png))
  }

  @Test func emptyTextAndMissingFilesAreNamedErrors() throws {
    let folder = try TemporaryFolder()
    let empty = folder.path + "/empty.jpg"
    let text = folder.path + "/notes.png"
    try ImageFile.writeAtomically([], to: empty)
    try ImageFile.writeAtomically(Array("hello, not an image\n".utf8), to: text)
    #expect(caughtKind { _ = try decoder.decode(contentsOf: empty) } == .emptyFile)
    #expect(caughtKind { _ = try decoder.decode(contentsOf: text) } == .notAnImage)
    #expect(
      isUnreadable(
        caughtKind {
          _ = try decoder.decode(contentsOf: folder.path + "/missing.jpg")
        }))
    #expect(isUnreadable(caughtKind { _ = try decoder.decode(contentsOf: folder.path) }))
    do {
      _ = try decoder.decode(contentsOf: text)
    } catch {
      #expect(error.path == text)
      #expect(error.description == "\(text): not a JPEG or PNG image")
    }
  }

  @Test func recoverableDamageDecodesSilently() async throws {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let decoder = ImageDecoder()
      // A text chunk with a broken CRC: libpng warns and skips it.
      var text = TestImages.chunk("tEXt", Array("Comment\u{0}hello".utf8))
      text[text.count - 1] ^= 0xFF
      let png = TestImages.png(width: 2, height: 1, bitDepth: 8, colorType: 0, rows: [[7, 9]], before: [("tEXt", [])])
      let patched = Array(png.prefix(33)) + text + Array(png.dropFirst(33 + 12))
      guard (try? decoder.decode(patched))?.pixels == [7, 9] else { exit(1) }
      // Stray bytes before a JPEG marker: libjpeg warns ("extraneous bytes") and carries on.
      var jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 16, height: 16, layout: .rgb))
      guard let sos = zip(jpeg.indices, jpeg.dropFirst()).first(where: { jpeg[$0.0] == 0xFF && $0.1 == 0xDA })?.0 else {
        exit(2)
      }
      jpeg.insert(contentsOf: [0x12, 0x34, 0x56], at: sos)
      guard (try? decoder.decode(jpeg))?.width == 16 else { exit(3) }
    }
    #expect(result?.standardErrorContent.isEmpty == true)
  }

  @Test func scanBombIsRefused() throws {
    // A progressive JPEG whose last scan is repeated 1,100 times: each repeat is another full pass.
    let jpeg = try ImageEncoder(format: .jpeg, jpegProgressive: true).encode(
      TestImages.picture(width: 8, height: 8, layout: .gray))
    let lastScan = try #require(jpeg.indices.dropLast().last { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA })
    let scan = jpeg[lastScan..<(jpeg.count - 2)]
    var bomb = Array(jpeg[..<lastScan])
    for _ in 0..<1100 { bomb += scan }
    bomb += [0xFF, 0xD9]
    // A strict decode stops at the first damaged scan; a lenient one goes on past the damage, to the cap.
    let strict = caughtKind { _ = try decoder.decode(bomb) }
    guard case .damagedData(.jpeg, _, 8, let damage)? = strict else {
      Issue.record("expected corrupt JPEG data, got \(String(describing: strict))")
      return
    }
    #expect(damage.hasPrefix("Corrupt JPEG data"), "\(damage)")
    let kind = caughtKind { _ = try ImageDecoder(isLenient: true).decode(bomb) }
    guard case .corruptData(.jpeg, let message)? = kind else {
      Issue.record("expected corrupt JPEG data, got \(String(describing: kind))")
      return
    }
    #expect(message.contains("progressive scans"), "\(message)")
    var fine = Array(jpeg[..<lastScan])
    for _ in 0..<20 { fine += scan }
    fine += [0xFF, 0xD9]
    // Repeated refinement scans are damaged data (an error by default); under the cap they still decode.
    #expect(try ImageDecoder(isLenient: true).decode(fine).width == 8)
  }

  @Test func pixelLimitRefusesBeforeAllocating() throws {
    // Headers claiming 60000 x 60000 = 3.6 gigapixels (10.8 GB of RGB) with almost no data behind them.
    let png = TestImages.png(width: 60000, height: 60000, bitDepth: 8, colorType: 2, rows: [])
    #expect(
      caughtKind {
        _ = try decoder.decode(png)
      } == .tooManyPixels(width: 60000, height: 60000, limit: ImageDecoder.defaultMaxPixels))
    var jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 8, height: 8, layout: .rgb))
    let sof = try #require(zip(jpeg.indices, jpeg.dropFirst()).first { jpeg[$0.0] == 0xFF && $0.1 == 0xC0 }?.0)
    jpeg[sof + 5] = 0xEA  // height 0xEA60 = 60000
    jpeg[sof + 6] = 0x60
    jpeg[sof + 7] = 0xEA  // width
    jpeg[sof + 8] = 0x60
    #expect(
      caughtKind {
        _ = try decoder.decode(jpeg)
      } == .tooManyPixels(width: 60000, height: 60000, limit: ImageDecoder.defaultMaxPixels))
    let small = ImageDecoder(maxPixels: 63)
    let eightByEight = try ImageEncoder(format: .png).encode(TestImages.noise(width: 8, height: 8, layout: .gray))
    #expect(caughtKind { _ = try small.decode(eightByEight) } == .tooManyPixels(width: 8, height: 8, limit: 63))
    #expect(try ImageDecoder(maxPixels: 64).decode(eightByEight).pixelCount == 64)
  }

  @Test func infoReadsOnlyTheHeader() throws {
    let png = try ImageEncoder(format: .png).encode(TestImages.noise(width: 7, height: 5, layout: .grayAlpha))
    #expect(try decoder.info(png) == ImageInfo(format: .png, width: 7, height: 5, layout: .grayAlpha))
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 9, height: 4, layout: .rgba))
    let info = try decoder.info(jpeg)
    #expect(info == ImageInfo(format: .jpeg, width: 9, height: 4, layout: .rgb))
    #expect(info.decodedByteCount == 108)
    // A header promising far more pixels than it carries: info answers, decoding fails.
    let hollow = TestImages.png(width: 3000, height: 2000, bitDepth: 8, colorType: 6, rows: [])
    #expect(try decoder.info(hollow).decodedByteCount == 24_000_000)
    #expect(isCorrupt(caughtKind { _ = try decoder.decode(hollow) }, .png))
    #expect(
      caughtKind { _ = try ImageDecoder(maxPixels: 10).info(png) } == .tooManyPixels(width: 7, height: 5, limit: 10))
    #expect(caughtKind { _ = try decoder.info(Array("GIF89a".utf8)) } == .notAnImage)
  }

  @Test func formatComesFromMagicBytesNotTheName() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/really-a-png.jpg"
    let image = TestImages.noise(width: 4, height: 4, layout: .rgb)
    try ImageFile.writeAtomically(try ImageEncoder(format: .png).encode(image), to: path)
    #expect(try decoder.decode(contentsOf: path) == image)
    #expect(ImageFormat(pathExtensionOf: "a/b.JPEG") == .jpeg)
    #expect(ImageFormat(pathExtensionOf: "a.b/c") == nil)
    #expect(ImageFormat(detecting: [0x47, 0x49, 0x46]) == nil)
  }
}
