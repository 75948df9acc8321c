import CJPEG
import SpindleTestSupport
import Testing

@testable import TiltShift

/// A second review of the codecs: what a damaged file costs before it is refused, and metadata kept byte for byte.
@Suite(.offThePool) struct CodecReviewTests {
  func caught(_ body: () throws -> Void) -> ImageError? {
    do {
      try body()
      return nil
    } catch let error as ImageError {
      return error
    } catch {
      return nil
    }
  }

  /// Reads `jpeg`'s pixels with the C shim into a buffer filled with `mark`: the status and the buffer.
  func readPixels(_ jpeg: [UInt8], lenient: Bool, mark: UInt8) -> (status: Int32, pixels: [UInt8], width: Int) {
    jpeg.withUnsafeBufferPointer { data in
      guard let decoder = spindle_jpeg_decoder_create(data.baseAddress, data.count) else { return (-1, [], 0) }
      defer { spindle_jpeg_decoder_destroy(decoder) }
      var width: Int32 = 0
      var height: Int32 = 0
      var channels: Int32 = 0
      guard spindle_jpeg_decoder_read_header(decoder, 1 << 30, &width, &height, &channels) == 0 else {
        return (-1, [], 0)
      }
      var pixels = [UInt8](repeating: mark, count: Int(width) * Int(height) * Int(channels))
      let status = pixels.withUnsafeMutableBufferPointer {
        spindle_jpeg_decoder_read_pixels(decoder, $0.baseAddress, $0.count, lenient ? 1 : 0)
      }
      return (status, pixels, Int(width) * Int(channels))
    }
  }

  // MARK: 1. A truncated JPEG is refused at the first missing row

  @Test func aStrictDecodeStopsWhereTheDataEnds() throws {
    // Refused anyway, the rows after the cut were still decoded, gray, one by one: a 57 KB file declaring
    // 30000×30000 took 14 s and 2.6 GB before its error. They are no longer decoded, so never written either.
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 64, height: 256, layout: .gray))
    let cut = Array(jpeg.prefix(jpeg.count / 4))
    let strict = readPixels(cut, lenient: false, mark: 7)
    #expect(strict.status == Int32(SPINDLE_JPEG_TRUNCATED))
    #expect(strict.pixels.suffix(strict.width).allSatisfy { $0 == 7 }, "the last row is never decoded")
    // Lenient decodes what is there and pads the rest, as before.
    let lenient = readPixels(cut, lenient: true, mark: 7)
    #expect(lenient.status == Int32(SPINDLE_JPEG_OK))
    #expect(lenient.pixels.suffix(lenient.width).allSatisfy { $0 != 7 }, "the last row is gray padding")
  }

  @Test func aHugeDeclaredSizeThatEndsEarlyIsRefusedWithItsRow() throws {
    // The reviewer's file: a small JPEG whose frame header says 30000×30000.
    var jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 64, height: 64, layout: .gray))
    let sof = try #require(jpeg.indices.first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 })
    jpeg.replaceSubrange(sof + 5..<sof + 9, with: [0x75, 0x30, 0x75, 0x30])
    let error = try #require(caught { _ = try ImageDecoder(maxPixels: 1_000_000_000).decode(jpeg) })
    switch error.kind {
    case .truncated(.jpeg, let first?, 30000, _): #expect(first < 100, "stops near the data's end: row \(first)")
    case .corruptData(.jpeg, _): break
    default: Issue.record("expected a truncated or damaged JPEG, got \(error.kind)")
    }
  }
}
