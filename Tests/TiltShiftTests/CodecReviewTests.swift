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

  // MARK: 2. JPEG comments keep their bytes

  /// A JPEG with COM markers holding `comments` (raw bytes), right after SOI.
  static func jpeg(comments: [[UInt8]]) throws -> [UInt8] {
    let plain = try ImageEncoder(format: .jpeg).encode(TestImages.picture(width: 16, height: 16, layout: .rgb))
    let markers: [UInt8] = comments.flatMap { comment -> [UInt8] in
      [0xFF, 0xFE, UInt8((2 + comment.count) >> 8), UInt8((2 + comment.count) & 0xFF)] + comment
    }
    return Array(plain.prefix(2)) + markers + Array(plain.dropFirst(2))
  }

  /// The chunks (type, data) of a PNG file, in order.
  static func pngChunks(_ bytes: [UInt8]) -> [(type: String, data: [UInt8])] {
    var chunks: [(type: String, data: [UInt8])] = []
    var at = 8
    while at + 12 <= bytes.count {
      let length = ImageMetadata.bigEndian32(bytes[at..<at + 4])
      chunks.append((String(decoding: bytes[at + 4..<at + 8], as: UTF8.self), Array(bytes[at + 8..<at + 8 + length])))
      at += 12 + length
    }
    return chunks
  }

  static let latin1Cafe: [UInt8] = [0x43, 0x61, 0x66, 0xE9]  // "Café" in Latin-1
  static let utf8Cafe: [UInt8] = Array("Café ☕".utf8)

  @Test func aLatin1CommentIsWrittenBackByteForByte() throws {
    // A Latin-1 COM was read as "Café" and written back as UTF-8 (43 61 66 C3 A9): the bytes changed.
    let source = try Self.jpeg(comments: [Self.latin1Cafe, Self.utf8Cafe, Array("plain\0".utf8)])
    let image = try ImageDecoder().decode(source)
    #expect(image.metadata.comments == ["Café", "Café ☕", "plain"])
    let written = try ImageEncoder(format: .jpeg).encode(image)
    let comments = PhotoFixtures.jpegMarkers(written).filter { $0.code == 0xFE }.map(\.payload)
    #expect(comments == [Self.latin1Cafe, Self.utf8Cafe, Array("plain\0".utf8)])
  }

  @Test func changingTheCommentsKeepsTheBytesOfThoseLeftAsTheyWere() throws {
    var metadata = try ImageDecoder().decode(Self.jpeg(comments: [Array("first".utf8), Self.latin1Cafe])).metadata
    metadata.comments.removeFirst()
    metadata.comments.append("Thé")
    #expect(metadata.comments == ["Café", "Thé"])
    #expect(metadata.commentBytes == [Self.latin1Cafe, Array("Thé".utf8)], "the old one as it was, the new one UTF-8")
    metadata.comments = []
    #expect(metadata.isEmpty)
  }

  @Test func aCommentGoesToPNGInTheChunkThatHoldsItsBytes() throws {
    // tEXt is Latin-1, iTXt UTF-8: the Latin-1 comment goes in tEXt and the UTF-8 one in iTXt, both unchanged.
    let utf8 = Array("Café".utf8)  // 43 61 66 C3 A9: Latin-1 could hold the text, not the bytes
    let image = try ImageDecoder().decode(
      Self.jpeg(comments: [Self.latin1Cafe, utf8, Self.utf8Cafe, Array("ascii".utf8)]))
    let chunks = Self.pngChunks(try ImageEncoder(format: .png).encode(image))
    let comment = Array("Comment".utf8) + [0]
    let texts = chunks.filter { $0.type == "tEXt" && $0.data.starts(with: comment) }.map { Array($0.data.dropFirst(8)) }
    #expect(texts == [Self.latin1Cafe, Array("ascii".utf8)])
    let international = chunks.filter { $0.type == "iTXt" && $0.data.starts(with: comment) }
    // Keyword, NUL, compression flag 0, method 0, empty language and translated keyword, then the text.
    #expect(international.map { Array($0.data.dropFirst(12)) } == [utf8, Self.utf8Cafe])
    // And back: the text is the same.
    let back = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image)).metadata.text
    #expect(back.filter { $0.keyword == "Comment" }.map(\.text) == ["Café", "Café", "Café ☕", "ascii"])
  }
}
