@testable import TiltShift

/// Photo files made in code: ICC profiles, XMP, IPTC and EXIF blocks, and JPEG/PNG files carrying them.
///
/// Nothing here is a stored photo: every fixture is built from its specification at test time.
enum PhotoFixtures {
  /// An ICC v2 profile libpng accepts (header, `acsp` signature, a tag table) padded to `size` bytes
  /// with a private tag, so it can be made big enough to need several JPEG APP2 segments.
  static func iccProfile(size: Int = 150_000, colourSpace: String = "RGB ", seed: UInt8 = 1) -> [UInt8] {
    precondition(size >= 256 && size % 4 == 0)
    var bytes = [UInt8](repeating: 0, count: size)
    func put(_ at: Int, _ values: [UInt8]) { bytes.replaceSubrange(at..<at + values.count, with: values) }
    put(0, TestImages.be32(UInt32(size)))
    put(4, Array("none".utf8))
    put(8, [2, 0x10, 0, 0])  // version 2.1
    put(12, Array("mntr".utf8))
    put(16, Array(colourSpace.utf8))
    put(20, Array("XYZ ".utf8))
    put(36, Array("acsp".utf8))
    put(64, [0, 0, 0, 0])  // perceptual
    put(68, [0, 0, 0xF6, 0xD6, 0, 1, 0, 0, 0, 0, 0xD3, 0x2D])  // D50 illuminant
    // Tag table: one private tag covering the rest of the profile.
    put(128, TestImages.be32(1))
    put(132, Array("zzzz".utf8) + TestImages.be32(144) + TestImages.be32(UInt32(size - 144)))
    for index in 144..<size { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ Int(seed)) }
    return bytes
  }

  /// An XMP packet with a title, a creator, keywords and a rating (and optionally an orientation and filler).
  static func xmp(title: String = "Harbour at dawn", orientation: Int? = nil, filler: Int = 0) -> [UInt8] {
    let orientationAttribute = orientation.map { " tiff:Orientation=\"\($0)\"" } ?? ""
    let padding = String(repeating: "lorem ipsum ", count: filler / 12)
    return Array(
      ("<?xpacket begin=\"\u{FEFF}\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>\n"
        + "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
        + "<rdf:Description rdf:about=\"\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
        + "xmlns:xmp=\"http://ns.adobe.com/xap/1.0/\" xmlns:tiff=\"http://ns.adobe.com/tiff/1.0/\" "
        + "xmp:Rating=\"4\"\(orientationAttribute)><dc:title><rdf:Alt><rdf:li xml:lang=\"x-default\">\(title)"
        + "</rdf:li></rdf:Alt></dc:title><dc:creator><rdf:Seq><rdf:li>A. Photographer</rdf:li></rdf:Seq></dc:creator>"
        + "<dc:subject><rdf:Bag><rdf:li>harbour</rdf:li><rdf:li>boats</rdf:li></rdf:Bag></dc:subject>"
        + "<dc:description>\(padding)</dc:description></rdf:Description></rdf:RDF></x:xmpmeta>\n"
        + "<?xpacket end=\"w\"?>").utf8)
  }

  /// A main XMP packet that points to an extended packet, and that extended packet (with a caption).
  static func extendedXMPPair() -> (main: [UInt8], extended: [UInt8]) {
    let extended = Array(
      ("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
        + "<rdf:Description rdf:about=\"\" xmlns:photoshop=\"http://ns.adobe.com/photoshop/1.0/\" "
        + "photoshop:CaptionWriter=\"Extended Caption Writer\"><photoshop:History>"
        + String(repeating: "edited; ", count: 10_000)
        + "</photoshop:History></rdf:Description></rdf:RDF></x:xmpmeta>").utf8)
    let guid = MD5.hex(of: extended)
    let main = Array(
      ("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">"
        + "<rdf:Description rdf:about=\"\" xmlns:xmpNote=\"http://ns.adobe.com/xmp/note/\" "
        + "xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmpNote:HasExtendedXMP=\"\(guid)\">"
        + "<dc:rights>© 2026 A. Photographer</dc:rights></rdf:Description></rdf:RDF></x:xmpmeta>").utf8)
    return (main, extended)
  }

  /// Photoshop image resources holding one IPTC-IIM block: a caption, a byline and two keywords.
  static func iptc(caption: String = "Boats in the harbour") -> [UInt8] {
    func dataSet(_ record: UInt8, _ tag: UInt8, _ text: String) -> [UInt8] {
      let bytes = Array(text.utf8)
      return [0x1C, record, tag, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }
    let iim =
      dataSet(2, 120, caption) + dataSet(2, 80, "A. Photographer") + dataSet(2, 25, "harbour")
      + dataSet(2, 25, "boats")
    var resource = Array("8BIM".utf8) + [0x04, 0x04, 0, 0] + TestImages.be32(UInt32(iim.count)) + iim
    if iim.count % 2 == 1 { resource.append(0) }
    return resource
  }

  /// An EXIF block of exactly `size` bytes (prefix included) whose IFD0 holds an orientation and a long comment.
  static func exif(size: Int, orientation: UInt8 = 1) -> [UInt8] {
    // "Exif\0\0", TIFF header, IFD0 with 2 entries (Orientation, ImageDescription ASCII at offset 38), no next IFD.
    let headerBytes = 6 + 8 + 2 + 2 * 12 + 4
    let descriptionLength = size - headerBytes
    precondition(descriptionLength > 4)
    var block = Array("Exif".utf8) + [0, 0] + [0x4D, 0x4D, 0, 42, 0, 0, 0, 8] + [0, 2]
    block += [0x01, 0x0E, 0, 2] + TestImages.be32(UInt32(descriptionLength)) + TestImages.be32(38)
    block += [0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0]
    block += [0, 0, 0, 0]
    block += (0..<descriptionLength - 1).map { UInt8(ascii: "a") + UInt8($0 % 26) } + [0]
    precondition(block.count == size)
    return block
  }

  /// Metadata with every field a photo may carry, for round trips.
  static func fullMetadata(orientation: UInt8 = 1) -> ImageMetadata {
    var metadata = ImageMetadata()
    metadata.iccProfile = ImageMetadata.ICCProfile(name: "Wide RGB", data: iccProfile())
    metadata.exif = TestImages.exif(orientation: orientation)
    metadata.xmp = xmp()
    metadata.iptc = iptc()
    metadata.text = [
      ImageMetadata.TextEntry(keyword: "Title", text: "Harbour"),
      ImageMetadata.TextEntry(keyword: "Description", text: "Boats at dawn, long text", isCompressed: true),
      ImageMetadata.TextEntry(
        keyword: "Copyright", text: "© 2026 Ä. Photographer", isInternational: true, language: "en",
        translatedKeyword: "Copyright"),
    ]
    metadata.gamma = 45455
    metadata.chromaticities = [31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000]
    metadata.density = ImageMetadata.PixelDensity(x: 11811, y: 11811, unit: .perMetre)
    return metadata
  }

  /// The markers (code, payload) of a JPEG file, in order, up to the start of scan.
  static func jpegMarkers(_ bytes: [UInt8]) -> [(code: UInt8, payload: [UInt8])] {
    var markers: [(code: UInt8, payload: [UInt8])] = []
    var at = 2
    while at + 4 <= bytes.count, bytes[at] == 0xFF, bytes[at + 1] != 0xDA {
      let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
      markers.append((bytes[at + 1], Array(bytes[at + 4..<min(bytes.count, at + 2 + length)])))
      at += 2 + length
    }
    return markers
  }

  /// The chunk types of a PNG file, in order.
  static func pngChunkTypes(_ bytes: [UInt8]) -> [String] {
    var types: [String] = []
    var at = 8
    while at + 8 <= bytes.count {
      let length = Int(TiltShift.ImageMetadata.bigEndian32(bytes[at..<at + 4]))
      types.append(String(decoding: bytes[at + 4..<at + 8], as: UTF8.self))
      at += 12 + length
    }
    return types
  }

  /// An image whose every pixel differs from its mirror images, so any wrong turn or flip shows.
  static func asymmetric(width: Int, height: Int, layout: Image.Layout = .rgb) -> Image {
    var pixels: [UInt8] = []
    for y in 0..<height {
      for x in 0..<width {
        for channel in 0..<layout.channels {
          pixels.append(
            UInt8(
              truncatingIfNeeded: channel == 0
                ? x * 255 / max(1, width - 1) : channel == 1 ? y * 255 / max(1, height - 1) : (x * 7 + y * 3) % 256))
        }
      }
    }
    return Image(width: width, height: height, layout: layout, pixels: pixels)
  }
}
