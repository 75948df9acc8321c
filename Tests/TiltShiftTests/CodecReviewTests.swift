import CJPEG
import SpindleTestSupport
import Testing

@testable import TiltShift

/// A second review of the codecs: what a damaged file costs before it is refused, and metadata kept byte for byte.
@Suite(.offThePool) struct CodecReviewTests {
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
    case .corruptData(.jpeg, _), .damagedData(.jpeg, _, 30000, _): break
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

  // MARK: 3. IPTC in a PNG's `Raw profile type iptc`

  /// A `zTXt` chunk's data as ExifTool 12.57 wrote it (`exiftool -IPTC:Caption-Abstract="Caf tést"
  /// -IPTC:Keywords=boats a.png`): keyword, compression method, then the zlib stream of "\nIPTC profile\n      42\n"
  /// and the hex of one Photoshop IPTC resource (8BIM 0x0404), with no `Photoshop 3.0` header.
  static let exifToolIPTC: [UInt8] =
    Array("Raw profile type iptc".utf8) + [0, 0] + [
      0x78, 0x9C, 0x3D, 0x8B, 0x31, 0x0A, 0x80, 0x30, 0x10, 0x04, 0xFB, 0x7B, 0x45, 0x9E, 0x90, 0xBB, 0x5B, 0xEF,
      0x92, 0xDA, 0xCA, 0xCE, 0xC2, 0x1F, 0xC4, 0x04, 0x04, 0x41, 0xF1, 0xFF, 0x85, 0x89, 0x85, 0xB3, 0xB0, 0x2C,
      0x03, 0x4B, 0xCB, 0xBA, 0xCD, 0xE1, 0x7E, 0xAE, 0x76, 0x9C, 0x95, 0xC2, 0x07, 0x84, 0x34, 0x41, 0x90, 0xB1,
      0x47, 0xF4, 0xFC, 0x70, 0xE5, 0x12, 0x85, 0x73, 0x9F, 0x93, 0x89, 0x35, 0x63, 0x87, 0xEB, 0x70, 0x9E, 0xBA,
      0x4B, 0x50, 0x63, 0x33, 0x89, 0x8E, 0x9A, 0x5D, 0x1D, 0x5C, 0x28, 0xCA, 0xF7, 0x1C, 0x0D, 0x7A, 0x01, 0x48,
      0xD9, 0x17, 0x96,
    ]

  /// IPTC-IIM records: a caption and a keyword.
  static let iim: [UInt8] =
    [0x1C, 2, 120, 0, 7] + Array("harbour".utf8) + [0x1C, 2, 25, 0, 5] + Array("boats".utf8)

  /// `records` in one Photoshop IPTC resource, as APP13 carries them.
  static func resource(_ records: [UInt8]) -> [UInt8] {
    Array("8BIM".utf8) + [0x04, 0x04, 0, 0] + TestImages.be32(UInt32(records.count)) + records
      + (records.count % 2 == 1 ? [0] : [])
  }

  /// A small PNG holding `chunks` before its image data.
  static func png(_ chunks: [(String, [UInt8])]) -> [UInt8] {
    TestImages.png(width: 2, height: 1, bitDepth: 8, colorType: 0, rows: [[7, 9]], before: chunks)
  }

  /// A text chunk of each type holding `text`.
  static func textChunk(_ type: String, _ keyword: String, _ text: String) -> (String, [UInt8]) {
    let name = Array(keyword.utf8) + [0]
    switch type {
    case "zTXt": return (type, name + [0] + TestImages.zlibStored(Array(text.utf8)))
    case "iTXt": return (type, name + [0, 0, 0, 0] + Array(text.utf8))
    default: return (type, name + Array(text.utf8))
    }
  }

  /// The APP13 payloads of a JPEG file.
  static func app13(_ jpeg: [UInt8]) -> [[UInt8]] {
    PhotoFixtures.jpegMarkers(jpeg).filter { $0.code == 0xED }.map(\.payload)
  }

  @Test func iptcThatExifToolWroteInAPNGReachesTheJPEG() throws {
    let image = try ImageDecoder().decode(Self.png([("zTXt", Self.exifToolIPTC)]))
    let caption: [UInt8] = [0x1C, 2, 120, 0, 8] + Array("Caf t".utf8) + [0xE9] + Array("st".utf8)
    let iptc = try #require(image.metadata.iptc, "the IPTC was dropped")
    #expect(iptc.starts(with: Array("8BIM".utf8) + [0x04, 0x04]) && iptc.count == 42)
    #expect(iptc.indices.contains { iptc[$0...].starts(with: caption) }, "the caption is in it")
    #expect(!image.metadata.text.contains { $0.keyword == "Raw profile type iptc" })
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.app13(jpeg) == [Array("Photoshop 3.0".utf8) + [0] + iptc])
    #expect(try ImageDecoder().decode(jpeg).metadata.iptc == iptc)
  }

  @Test(arguments: ["tEXt", "zTXt", "iTXt"])
  func bareIPTCRecordsGetTheirPhotoshopResource(type: String) throws {
    // ImageMagick's form: the IPTC-IIM records alone, no 8BIM resource around them.
    let text = ImageMetadata.rawProfileText("iptc", Self.iim)
    let image = try ImageDecoder().decode(Self.png([Self.textChunk(type, "Raw profile type iptc", text)]))
    #expect(image.metadata.iptc == Self.resource(Self.iim))
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.app13(jpeg) == [Array("Photoshop 3.0".utf8) + [0] + Self.resource(Self.iim)])
  }

  @Test func aPNGKeepsItsIPTCProfileAsItCameUnlessTheIPTCChanged() throws {
    let text = ImageMetadata.rawProfileText("iptc", Self.iim)
    var image = try ImageDecoder().decode(Self.png([Self.textChunk("tEXt", "Raw profile type iptc", text)]))
    var written = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image)).metadata
    // PNG to PNG: the same chunk (keyword, kind, text), not a new `Raw profile type 8bim`.
    #expect(written.pngIPTCText == ImageMetadata.TextEntry(keyword: "Raw profile type iptc", text: text))
    #expect(written.iptc == Self.resource(Self.iim))
    image.metadata.iptc = Self.resource(Array(Self.iim.prefix(12)))
    written = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image)).metadata
    #expect(written.pngIPTCText == nil && written.iptc == Self.resource(Array(Self.iim.prefix(12))))
    image.metadata.iptc = nil
    image.metadata.iptc = Self.resource(Self.iim)
    #expect(image.metadata.pngIPTCText == nil, "a change forgets the text even when changed back")
  }

  @Test func aPhotoshopProfileIsPreferredToTheIPTCOneWhateverTheirOrder() throws {
    // ImageMagick writes both: `8bim` holds every resource, `iptc` only the IPTC. The `iptc` one stays text.
    let full = Self.resource(Self.iim) + Array("8BIM".utf8) + [0x04, 0x25, 0, 0, 0, 0, 0, 2, 1, 2]
    let image = try ImageDecoder().decode(
      Self.png([
        Self.textChunk("tEXt", "Raw profile type iptc", ImageMetadata.rawProfileText("iptc", Self.iim)),
        Self.textChunk("zTXt", "Raw profile type 8bim", ImageMetadata.rawProfileText("8bim", full)),
      ]))
    #expect(image.metadata.iptc == full)
    #expect(image.metadata.text.map(\.keyword) == ["Raw profile type iptc"])
    // Neither form: text as before.
    let neither = try ImageDecoder().decode(
      Self.png([Self.textChunk("tEXt", "Raw profile type iptc", ImageMetadata.rawProfileText("iptc", [1, 2, 3]))]))
    #expect(neither.metadata.iptc == nil && neither.metadata.text.count == 1)
  }
}
