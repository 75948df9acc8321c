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

  // MARK: 1. ImageMagick's and exiv2's raw EXIF and XMP profiles

  @Test(arguments: ["tEXt", "zTXt", "iTXt"], ["Raw profile type exif", "Raw profile type APP1"])
  func aRawEXIFProfileBecomesTheJPEGsEXIF(type: String, keyword: String) throws {
    // ImageMagick writes the block with its `Exif\0\0` prefix, as APP1 holds it; it was kept as PNG text only.
    let exif = PhotoFixtures.exif(size: 200, orientation: 6)
    let png = CodecReviewTests.png([Self.textChunk(type, keyword, ImageMetadata.rawProfileText("exif", exif))])
    let (image, warnings) = try Self.decode(png)
    #expect(warnings.isEmpty)
    #expect(image.metadata.exif == exif)
    #expect(image.metadata.text.isEmpty, "read as EXIF, not kept as text as well")
    #expect(image.orientation == 6)
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.app1(jpeg, ImageMetadata.jpegEXIFHeader) == [exif])
    // PNG output carries it in the standard chunk.
    let back = try ImageDecoder().decode(try ImageEncoder(format: .png).encode(image))
    #expect(back.metadata.exif == exif)
  }

  @Test func aRawProfileOfABareTIFFStructureGetsTheEXIFPrefix() throws {
    let tiff = Array(PhotoFixtures.exif(size: 120, orientation: 3).dropFirst(6))
    let png = CodecReviewTests.png([
      Self.textChunk("zTXt", "Raw profile type exif", ImageMetadata.rawProfileText("exif", tiff))
    ])
    let image = try ImageDecoder().decode(png)
    #expect(image.metadata.exif == ImageMetadata.jpegEXIFHeader + tiff)
    #expect(image.orientation == 3)
  }

  @Test(arguments: ["tEXt", "zTXt", "iTXt"])
  func aRawXMPProfileBecomesTheJPEGsXMP(type: String) throws {
    let xmp = PhotoFixtures.xmp(title: "Raw harbour")
    let png = CodecReviewTests.png([
      Self.textChunk(type, "Raw profile type xmp", ImageMetadata.rawProfileText("xmp", xmp))
    ])
    let (image, warnings) = try Self.decode(png)
    #expect(warnings.isEmpty)
    #expect(image.metadata.xmp == xmp)
    #expect(image.metadata.text.isEmpty)
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    #expect(Self.app1(jpeg, ImageMetadata.jpegXMPHeader) == [ImageMetadata.jpegXMPHeader + xmp])
  }

  @Test func anAPP1ProfileHoldingXMPBecomesTheXMP() throws {
    let xmp = PhotoFixtures.xmp(title: "APP1 harbour")
    let text = ImageMetadata.rawProfileText("APP1", ImageMetadata.jpegXMPHeader + xmp)
    let image = try ImageDecoder().decode(CodecReviewTests.png([Self.textChunk("zTXt", "Raw profile type APP1", text)]))
    #expect(image.metadata.xmp == xmp && image.metadata.exif == nil)
  }

  @Test func theStandardChunksWinOverRawProfilesWhateverTheOrder() throws {
    // eXIf and iTXt `XML:com.adobe.xmp` are what the PNG specification names; the raw profiles stay text.
    let standardEXIF = PhotoFixtures.exif(size: 100, orientation: 8)
    let rawEXIF = PhotoFixtures.exif(size: 140, orientation: 6)
    let standardXMP = PhotoFixtures.xmp(title: "Standard")
    let rawXMP = PhotoFixtures.xmp(title: "Raw")
    let rawEXIFChunk = Self.textChunk("zTXt", "Raw profile type exif", ImageMetadata.rawProfileText("exif", rawEXIF))
    let rawXMPChunk = Self.textChunk("zTXt", "Raw profile type xmp", ImageMetadata.rawProfileText("xmp", rawXMP))
    let png = CodecReviewTests.png([
      rawEXIFChunk, rawXMPChunk, ("eXIf", Array(standardEXIF.dropFirst(6))),
      Self.textChunk("iTXt", keyword: Array("XML:com.adobe.xmp".utf8), text: standardXMP),
    ])
    let (image, warnings) = try Self.decode(png)
    #expect(warnings.isEmpty)
    #expect(image.metadata.exif == standardEXIF)
    #expect(image.metadata.xmp == standardXMP)
    #expect(image.metadata.text.map(\.keyword) == ["Raw profile type exif", "Raw profile type xmp"])
    // PNG to PNG: both forms still there.
    let chunks = CodecReviewTests.pngChunks(try ImageEncoder(format: .png).encode(image))
    #expect(chunks.contains { $0.type == "zTXt" && $0.data.starts(with: Array("Raw profile type exif".utf8) + [0]) })
    #expect(chunks.contains { $0.type == "zTXt" && $0.data.starts(with: Array("Raw profile type xmp".utf8) + [0]) })
  }

  @Test(arguments: [
    ("\nexif\n     999\n45786966000049492a00\n", "declares 999 bytes"),
    ("\nexif\n       9\n45786966000049492a0\n", "declares 9 bytes, its hex holds 19 digits"),
    ("\nexif\n       8\n45786966zz0049492a00\n", "'z' is not a hex digit"),
    ("\nexif\n      10\n45786966000049492a00ff\n", "declares 10 bytes, its hex holds 22 digits"),
    ("\nexif\n       4\n01020304\n", "no TIFF header"),
    ("exif", "no name and length lines"),
  ])
  func aMalformedRawProfileStaysTextAndIsReported(text: String, problem: String) throws {
    // Bad hex was skipped: `45786966zz00...` read as other bytes than the writer meant, made into EXIF.
    let chunk = Self.textChunk("tEXt", "Raw profile type exif", text)
    let (image, warnings) = try Self.decode(CodecReviewTests.png([chunk]))
    #expect(image.metadata.exif == nil)
    #expect(image.metadata.text == [ImageMetadata.TextEntry(keyword: "Raw profile type exif", text: text)])
    #expect(warnings.count == 1)
    #expect(warnings.first?.contains("\"Raw profile type exif\"") == true)
    #expect(warnings.first?.contains(problem) == true, "\(warnings)")
    // PNG to PNG: the chunk as it came.
    let chunks = CodecReviewTests.pngChunks(try ImageEncoder(format: .png).encode(image))
    #expect(chunks.contains { $0.type == "tEXt" && $0.data == chunk.1 })
  }

  @Test func hexWithOtherCharactersInItIsNotReadAsIPTCEither() throws {
    // The stray characters were skipped: `0102zz0304` gave four bytes, as declared, and became IPTC.
    let text = "\n8bim\n       4\n0102zz0304\n"
    let image = try ImageDecoder().decode(CodecReviewTests.png([Self.textChunk("zTXt", "Raw profile type 8bim", text)]))
    #expect(image.metadata.iptc == nil)
    #expect(image.metadata.text.map(\.text) == [text])
  }

  @Test func aRawXMPProfileThatIsNotUTF8StaysTextAndIsReported() throws {
    let text = ImageMetadata.rawProfileText("xmp", [0x3C, 0xFF, 0xFE, 0x3E])
    let (image, warnings) = try Self.decode(
      CodecReviewTests.png([Self.textChunk("tEXt", "Raw profile type xmp", text)]))
    #expect(image.metadata.xmp == nil && image.metadata.text.count == 1)
    #expect(warnings.count == 1 && warnings.first?.contains("UTF-8") == true)
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

  // MARK: 4. Orientation known only from XMP, beside an EXIF block without one

  /// A big- or little-endian EXIF block whose IFD0 holds Make and Model, and an orientation only when given.
  static func exifWithoutOrientation(littleEndian: Bool, orientationValue: UInt8? = nil) -> [UInt8] {
    func u16(_ value: Int) -> [UInt8] {
      littleEndian ? [UInt8(value & 0xFF), UInt8(value >> 8)] : [UInt8(value >> 8), UInt8(value & 0xFF)]
    }
    func u32(_ value: Int) -> [UInt8] {
      littleEndian ? u16(value & 0xFFFF) + u16(value >> 16) : u16(value >> 16) + u16(value & 0xFFFF)
    }
    // Make and Model, ASCII; Model's text is at an offset after IFD0, so a moved IFD would break it.
    let count = orientationValue == nil ? 2 : 3
    var entries: [[UInt8]] = [
      u16(0x010F) + u16(2) + u32(4) + Array("Can".utf8) + [0],
      u16(0x0110) + u16(2) + u32(6) + u32(8 + 2 + count * 12 + 4),
    ]
    if let orientationValue { entries.append(u16(0x0112) + u16(3) + u32(1) + u16(Int(orientationValue)) + [0, 0]) }
    return Array("Exif".utf8) + [0, 0] + (littleEndian ? [0x49, 0x49, 42, 0] : [0x4D, 0x4D, 0, 42]) + u32(8)
      + u16(entries.count) + entries.flatMap { $0 } + u32(0) + Array("EOS R".utf8) + [0]
  }

  /// IFD0's (tag, value field) pairs of an EXIF block, read plainly.
  static func ifd0(_ exif: [UInt8]) -> [(tag: Int, value: [UInt8])] {
    let little = exif[6] == 0x49
    func u16(_ at: Int) -> Int {
      little ? Int(exif[at]) | Int(exif[at + 1]) << 8 : Int(exif[at]) << 8 | Int(exif[at + 1])
    }
    let ifd = 6 + (little ? u16(12) << 16 | u16(10) : u16(10) << 16 | u16(12))
    return (0..<u16(ifd)).map { index in
      let entry = ifd + 2 + index * 12
      return (u16(entry), Array(exif[entry + 8..<entry + 12]))
    }
  }

  @Test(arguments: [false, true])
  func anXMPOrientationIsAddedToAnEXIFBlockThatHasNone(littleEndian: Bool) throws {
    // Only a missing EXIF block got the XMP orientation; one without the tag was written as it was, so JPEG
    // viewers (EXIF only) showed the photo unturned while the filter had laid the band out turned.
    let exif = Self.exifWithoutOrientation(littleEndian: littleEndian)
    let png = CodecReviewTests.png([
      ("eXIf", Array(exif.dropFirst(6))),
      Self.textChunk("iTXt", keyword: Array("XML:com.adobe.xmp".utf8), text: PhotoFixtures.xmp(orientation: 6)),
    ])
    let image = try ImageDecoder().decode(png)
    #expect(image.orientation == 6 && image.exifOrientation == nil)
    let jpeg = try ImageEncoder(format: .jpeg).encode(image)
    let written = try #require(Self.app1(jpeg, ImageMetadata.jpegEXIFHeader).first)
    #expect(EXIFReader(written).orientation == 6)
    // Everything else is still there and still right: the tags in order, the offsets still pointing at the model.
    let tags = Self.ifd0(written)
    #expect(tags.map(\.tag) == [0x010F, 0x0110, 0x0112])
    #expect(written[14..<exif.count] == exif[14...], "after the TIFF header, nothing of the old block moved")
    let model = try #require(tags.first { $0.tag == 0x0110 }?.value)
    let offset = 6 + (littleEndian ? model.reversed() : model).reduce(0) { $0 << 8 | Int($1) }
    #expect(Array(written[offset..<offset + 6]) == Array("EOS R".utf8) + [0])
    let decoded = try ImageDecoder().decode(jpeg)
    #expect(decoded.orientation == 6 && decoded.metadata.exif == written)
  }

  @Test func anXMPOrientationReplacesAnUnreadableEXIFOrientationValue() throws {
    let exif = Self.exifWithoutOrientation(littleEndian: false, orientationValue: 0)
    var image = Image(width: 2, height: 1, layout: .gray, pixels: [1, 2])
    image.metadata.exif = exif
    image.metadata.xmp = PhotoFixtures.xmp(orientation: 8)
    let written = try #require(
      Self.app1(try ImageEncoder(format: .jpeg).encode(image), ImageMetadata.jpegEXIFHeader).first)
    #expect(EXIFReader(written).orientation == 8 && written.count == exif.count)
  }

  @Test func anEXIFBlockThatIsNotTIFFIsLeftAsItWas() throws {
    let exif = ImageMetadata.jpegEXIFHeader + Array("not a TIFF header".utf8)
    var image = Image(width: 2, height: 1, layout: .gray, pixels: [1, 2])
    image.metadata.exif = exif
    image.metadata.xmp = PhotoFixtures.xmp(orientation: 6)
    #expect(Self.app1(try ImageEncoder(format: .jpeg).encode(image), ImageMetadata.jpegEXIFHeader) == [exif])
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

  /// helper-51's review: the ICC profile's name, Latin-1 like a keyword, was read as UTF-8, so `Profil\xE9 RGB` came
  /// back as `Profil RGB`.
  @Test func aLatin1ICCProfileNameSurvivesPNGToPNG() throws {
    var image = TestImages.picture(width: 16, height: 8, layout: .rgb)
    image.metadata.iccProfile = ImageMetadata.ICCProfile(
      name: "Profil\u{E9} RGB", data: PhotoFixtures.iccProfile(size: 4_096))
    let png = try ImageEncoder(format: .png).encode(image)
    let iccp = try #require(CodecReviewTests.pngChunks(png).first { $0.type == "iCCP" })
    #expect(Array(iccp.data.prefix { $0 != 0 }) == Array("Profil".utf8) + [0xE9] + Array(" RGB".utf8))
    let back = try ImageDecoder().decode(png)
    #expect(back.metadata.iccProfile?.name == "Profil\u{E9} RGB")
    let again = try ImageEncoder(format: .png).encode(back)
    let againName = CodecReviewTests.pngChunks(again).first { $0.type == "iCCP" }.map {
      Array($0.data.prefix { $0 != 0 })
    }
    #expect(againName == Array(iccp.data.prefix { $0 != 0 }))
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
