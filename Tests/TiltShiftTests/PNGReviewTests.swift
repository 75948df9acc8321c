import SpindleTestSupport
import Testing

@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#endif

/// A photographer's review of the PNG codec: what `spindle tiltshift` writes, and what reading a header costs.
@Suite(.offThePool) struct PNGReviewTests {
  /// A PNG whose header declares `width` × `height` RGB pixels, with a few bytes of image data after it.
  static func declaring(width: UInt32, height: UInt32) -> [UInt8] {
    let header = TestImages.be32(width) + TestImages.be32(height) + [8, 2, 0, 0, 0]
    return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + TestImages.chunk("IHDR", header)
      + TestImages.chunk("IDAT", TestImages.zlibStored([0, 1, 2, 3])) + TestImages.chunk("IEND", [])
  }

  @Test func exifIsWrittenOnceBeforeTheImageData() throws {
    var image = TestImages.picture(width: 24, height: 16, layout: .rgb)
    image.exif = TestImages.exif(orientation: 6)
    let types = PhotoFixtures.pngChunkTypes(try ImageEncoder(format: .png).encode(image))
    // libpng wrote it again after IDAT when png_write_end was given the info: PNG allows one eXIf.
    #expect(types.filter { $0 == "eXIf" }.count == 1, "\(types)")
    let exif = try #require(types.firstIndex(of: "eXIf"))
    let data = try #require(types.firstIndex(of: "IDAT"))
    #expect(exif < data, "\(types)")
  }

  @Test func aHeaderDeclaringAHugeWidthIsReadWithoutAllocatingItsRows() throws {
    // 2147483647 × 1 RGB: 6 GB a row. Reading the header (the batch's memory estimate) made libpng allocate and
    // zero its row buffers: 6 GB and 20 s for a file of 80 bytes, before the budget could refuse it.
    let bytes = Self.declaring(width: 0x7FFF_FFFF, height: 1)
    let before = peakResidentKilobytes()
    let info = try ImageDecoder(maxPixels: Int(Int32.max) * 4).info(bytes)
    #expect(peakResidentKilobytes() - before < 512 * 1024, "no gigabyte allocation")
    #expect(info == ImageInfo(format: .png, width: 0x7FFF_FFFF, height: 1, layout: .rgb))
  }

  @Test(
    arguments: [
      (0, false, 1), (0, true, 2), (2, false, 3), (2, true, 4), (3, false, 3), (3, true, 4), (4, false, 2),
      (6, false, 4),
    ] as [(UInt8, Bool, Int)])
  func theHeaderSaysTheLayoutADecodeProduces(colorType: UInt8, transparency: Bool, channels: Int) throws {
    // Worked out from the header now, no longer by libpng's row set-up: gray and RGB with tRNS gain alpha, palette
    // becomes RGB (RGBA with tRNS).
    let samples = [0: 1, 2: 3, 3: 1, 4: 2, 6: 4][Int(colorType)] ?? 1
    let row = [UInt8](repeating: 0, count: 2 * samples)
    var before: [(String, [UInt8])] = []
    if colorType == 3 { before.append(("PLTE", [1, 2, 3, 4, 5, 6])) }
    if transparency { before.append(("tRNS", colorType == 3 ? [128] : colorType == 2 ? [0, 9, 0, 9, 0, 9] : [0, 9])) }
    let bytes = TestImages.png(width: 2, height: 1, bitDepth: 8, colorType: colorType, rows: [row], before: before)
    let info = try ImageDecoder().info(bytes)
    let image = try ImageDecoder().decode(bytes)
    #expect(info.layout.channels == channels)
    #expect(image.layout == info.layout && image.bitDepth == info.bitDepth)
  }

  @Test func theHeaderSaysSixteenBitsOnlyWhenTheyAreKept() throws {
    let bytes = TestImages.png(width: 1, height: 1, bitDepth: 16, colorType: 2, rows: [[0xFF, 0xFF, 0x80, 0x80, 0, 0]])
    for keeps in [false, true] {
      let decoder = ImageDecoder(keeps16Bits: keeps)
      #expect(try decoder.info(bytes).bitDepth == (keeps ? 16 : 8))
      #expect(try decoder.decode(bytes).bitDepth == (keeps ? 16 : 8))
    }
  }

  @Test func aFileCutBeforeItsSizeNamesNoRowCount() throws {
    let png = try ImageEncoder(format: .png).encode(TestImages.picture(width: 8, height: 8, layout: .rgb))
    let error = try #require(caught { _ = try ImageDecoder().decode(Array(png.prefix(20))) })
    #expect(error.kind == .truncated(format: .png, firstMissingRow: nil, height: 1, message: error.message))
    #expect(!error.description.contains("row 0 of 1"), "\(error)")
  }
}

extension ImageError {
  /// The codec's message of a truncation, for comparisons.
  fileprivate var message: String {
    if case .truncated(_, _, _, let message) = kind { return message }
    return ""
  }
}

/// The process's peak resident memory so far, in KiB.
private func peakResidentKilobytes() -> Int {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return usage.ru_maxrss
}
