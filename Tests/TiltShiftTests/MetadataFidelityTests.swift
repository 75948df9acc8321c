import SpindleTestSupport
import Testing

@testable import TiltShift

/// What an adversarial run found `spindle tiltshift` losing or altering between PNG and JPEG: raw EXIF and XMP
/// profiles, comments spelled `comment` or longer than one COM, XMP-only orientation beside EXIF, Latin-1 text.
@Suite(.offThePool) struct MetadataFidelityTests {
  /// A text chunk of `type` whose keyword and text are the given bytes (Latin-1 for `tEXt`/`zTXt`).
  static func textChunk(_ type: String, keyword: [UInt8], text: [UInt8]) -> (String, [UInt8]) {
    switch type {
    case "zTXt": return (type, keyword + [0, 0] + TestImages.zlibStored(text))
    case "iTXt": return (type, keyword + [0, 0, 0, 0, 0] + text)
    default: return (type, keyword + [0] + text)
    }
  }

  /// A text chunk of `type` holding `text` (ASCII here) under `keyword`.
  static func textChunk(_ type: String, _ keyword: String, _ text: String) -> (String, [UInt8]) {
    textChunk(type, keyword: Array(keyword.utf8), text: Array(text.utf8))
  }

  /// Decodes `bytes`, with the decoder's warnings.
  static func decode(_ bytes: [UInt8]) throws -> (image: Image, warnings: [String]) {
    var warnings: [String] = []
    let image = try ImageDecoder().decode(bytes, warnings: &warnings)
    return (image, warnings)
  }

  /// The APP1 payloads of a JPEG that start with `header`.
  static func app1(_ jpeg: [UInt8], _ header: [UInt8]) -> [[UInt8]] {
    PhotoFixtures.jpegMarkers(jpeg).filter { $0.code == 0xE1 && $0.payload.starts(with: header) }.map(\.payload)
  }

  /// The COM payloads of a JPEG.
  static func comments(_ jpeg: [UInt8]) -> [[UInt8]] {
    PhotoFixtures.jpegMarkers(jpeg).filter { $0.code == 0xFE }.map(\.payload)
  }

  // MARK: 2. Comment keywords in any case

  @Test(arguments: ["comment", "COMMENT", "Comment"])
  func aCommentInAnyCaseBecomesACOMMarker(keyword: String) throws {
    let png = CodecReviewTests.png([Self.textChunk("tEXt", keyword, "shot from the pier")])
    let jpeg = try ImageEncoder(format: .jpeg).encode(try ImageDecoder().decode(png))
    #expect(Self.comments(jpeg) == [Array("shot from the pier".utf8)])
  }

  // MARK: 3. Comments over one COM marker

  @Test func aLongCommentTakesSeveralCOMMarkersAndComesBackWhole() throws {
    let long = (0..<150_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
    let png = CodecReviewTests.png([Self.textChunk("tEXt", keyword: Array("Comment".utf8), text: long)])
    let jpeg = try ImageEncoder(format: .jpeg).encode(try ImageDecoder().decode(png))
    let segments = Self.comments(jpeg)
    #expect(segments.map(\.count) == [65533, 65533, 150_000 - 2 * 65533])
    #expect(segments.flatMap { $0 } == long)
    // JPEG to JPEG and JPEG to PNG: one comment.
    let image = try ImageDecoder().decode(jpeg)
    #expect(image.metadata.commentBytes == [long])
    let again = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.comments(again) == segments)
    let back = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image))
    #expect(
      back.metadata.text == [ImageMetadata.TextEntry(keyword: "Comment", text: String(decoding: long, as: UTF8.self))])
  }

  @Test func aCommentThatFillsItsLastMarkerIsNotJoinedToTheNext() throws {
    let full = [UInt8](repeating: UInt8(ascii: "x"), count: 65533)
    var image = try ImageDecoder().decode(try CodecReviewTests.jpeg(comments: []))
    image.metadata.comments = [String(decoding: full, as: UTF8.self), "next", ""]
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.comments(jpeg) == [full, [], Array("next".utf8), []])
    #expect(try ImageDecoder().decode(jpeg).metadata.commentBytes == [full, Array("next".utf8), []])
  }

  // MARK: 5. Latin-1 keywords and text

  /// Keywords may hold 161...255 besides printable ASCII (160, no-break space, is not allowed in a keyword).
  static let latin1Keywords: [[UInt8]] = [Array(0xA1...0xCF), Array(0xD0...0xFF)]
  /// Text with every byte from 0xA0 up.
  static let latin1Text: [UInt8] = Array("Caf".utf8) + Array(0xA0...0xFF)

  static func latin1(_ bytes: [UInt8]) -> String { String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) })) }

  @Test(arguments: ["tEXt", "zTXt"])
  func latin1KeywordsAndTextSurvivePNGToPNG(type: String) throws {
    // The keyword was read as UTF-8 (each byte from 0xA0 a U+FFFD) and written back with those characters gone.
    let png = CodecReviewTests.png(Self.latin1Keywords.map { Self.textChunk(type, keyword: $0, text: Self.latin1Text) })
    let image = try ImageDecoder().decode(png)
    #expect(image.metadata.text.map(\.keyword) == Self.latin1Keywords.map(Self.latin1))
    #expect(image.metadata.text.allSatisfy { $0.text == Self.latin1(Self.latin1Text) })
    let written = CodecReviewTests.pngChunks(try ImageEncoder(format: .png).encode(image)).filter { $0.type == type }
    let keywords = written.map { Array($0.data.prefix { $0 != 0 }) }
    #expect(keywords == Self.latin1Keywords)
    if type == "tEXt" {
      #expect(written.map { Array($0.data.drop { $0 != 0 }.dropFirst()) } == [Self.latin1Text, Self.latin1Text])
    }
    let back = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image))
    #expect(back.metadata.text == image.metadata.text)
  }

  @Test func anInternationalTextKeepsItsLatin1KeywordAndUTF8Text() throws {
    let text = "Café ☕ 東京"
    let png = CodecReviewTests.png([Self.textChunk("iTXt", keyword: Self.latin1Keywords[0], text: Array(text.utf8))])
    let image = try ImageDecoder().decode(png)
    #expect(image.metadata.text.map(\.keyword) == [Self.latin1(Self.latin1Keywords[0])])
    #expect(image.metadata.text.map(\.text) == [text])
    let written = CodecReviewTests.pngChunks(try ImageEncoder(format: .png).encode(image)).filter { $0.type == "iTXt" }
    #expect(written.map { Array($0.data.prefix { $0 != 0 }) } == [Self.latin1Keywords[0]])
    #expect(written.map { Array($0.data.dropFirst(Self.latin1Keywords[0].count + 5)) } == [Array(text.utf8)])
  }

  @Test func anInternationalTextThatIsNotUTF8IsReadAsLatin1AndReported() throws {
    // Latin-1 bytes in an `iTXt` (which must be UTF-8) became U+FFFD: "Caf\u{FFFD}" lost its letter for good.
    let (image, warnings) = try Self.decode(
      CodecReviewTests.png([Self.textChunk("iTXt", keyword: Array("Title".utf8), text: Self.latin1Text)]))
    #expect(image.metadata.text.map(\.text) == [Self.latin1(Self.latin1Text)])
    #expect(warnings == ["PNG iTXt chunk \"Title\" holds text that is not UTF-8; read as Latin-1"])
  }

  @Test(arguments: ["tEXt", "zTXt", "iTXt"])
  func aPNGCommentBecomesAUTF8COMWhateverItsChunk(type: String) throws {
    // tEXt/zTXt bytes are Latin-1, iTXt bytes UTF-8: the same text either way, written to COM as UTF-8.
    let text = Self.latin1(Self.latin1Text)
    let bytes = type == "iTXt" ? Array(text.utf8) : Self.latin1Text
    let png = CodecReviewTests.png([Self.textChunk(type, keyword: Array("Comment".utf8), text: bytes)])
    let jpeg = try ImageEncoder(format: .jpeg).encode(try ImageDecoder().decode(png))
    #expect(Self.comments(jpeg) == [Array(text.utf8)])
    #expect(try ImageDecoder().decode(jpeg).metadata.comments == [text])
  }
}
