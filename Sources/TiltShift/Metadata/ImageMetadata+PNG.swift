/// Reading and writing the metadata chunks of a PNG file.
extension ImageMetadata {
  /// The `iTXt` keyword XMP lives under.
  static let pngXMPKeyword = "XML:com.adobe.xmp"
  /// ImageMagick's and ExifTool's name for Photoshop image resources (IPTC) in a PNG text chunk.
  static let pngIPTCKeyword = "Raw profile type 8bim"
  /// The name ImageMagick (bare IPTC-IIM records, beside an `8bim` profile) and ExifTool (one Photoshop IPTC
  /// resource, alone) give IPTC in a PNG text chunk.
  static let pngIIMKeyword = "Raw profile type iptc"

  /// The names ImageMagick and exiv2 give an EXIF block in a PNG text chunk (`APP1` may hold XMP instead).
  static let pngRawEXIFKeywords = ["Raw profile type exif", "Raw profile type APP1"]
  /// ImageMagick's and exiv2's name for an XMP packet in a PNG text chunk.
  static let pngRawXMPKeyword = "Raw profile type xmp"

  /// Sorts decoded text chunks: XMP, EXIF and IPTC go to their own fields, the rest stays text.
  ///
  /// A `Raw profile type 8bim` is preferred: it holds every Photoshop resource. Without one, the IPTC of a
  /// `Raw profile type iptc` is read (see ``iptcResources(fromIPTCProfile:)``) and its text kept to write back.
  ///
  /// A `Raw profile type exif` (or `APP1`) gives the EXIF block and a `Raw profile type xmp` the XMP packet, unless
  /// the file has the standard form too: an `eXIf` chunk (the PNG specification's; read before this) and an `iTXt`
  /// `XML:com.adobe.xmp` (the XMP specification's) win whatever the chunk order, and the raw profile then stays
  /// text (so PNG output still carries it). A raw profile that cannot be read — its length is not that of its hex, it holds
  /// something other than hex digits, or its bytes are not EXIF or UTF-8 XMP — is never made into metadata: it
  /// stays text, written back to a PNG as it came, and a line in `problems` says what was wrong and where.
  mutating func absorbPNGText(_ entries: [TextEntry], problems: inout [String]) {
    let resources = entries.firstIndex { $0.keyword == Self.pngIPTCKeyword && Self.rawProfileBytes($0.text) != nil }
    let iim = resources == nil ? entries.firstIndex { Self.iptcResources(fromIIMText: $0) != nil } : nil
    let hasStandardXMP = entries.contains { $0.keyword == Self.pngXMPKeyword }
    for (index, entry) in entries.enumerated() {
      if entry.keyword == Self.pngXMPKeyword, xmp == nil {
        xmp = Array(entry.text.utf8)
      } else if index == resources, let bytes = Self.rawProfileBytes(entry.text) {
        iptc = bytes
      } else if index == iim, let bytes = Self.iptcResources(fromIIMText: entry) {
        iptc = bytes
        pngIPTCText = entry
      } else if Self.pngRawEXIFKeywords.contains(entry.keyword) || entry.keyword == Self.pngRawXMPKeyword {
        if !absorbRawProfile(entry, hasStandardXMP: hasStandardXMP, problems: &problems) { text.append(entry) }
      } else {
        text.append(entry)
      }
    }
  }

  /// What becomes of a raw profile that cannot be read, for the end of its warning.
  static let keptAsText =
    "; not read as metadata, kept as text (PNG output writes it back, JPEG output has no place for it)"

  /// Reads a `Raw profile type exif`, `APP1` or `xmp` entry into ``exif`` or ``xmp``; false when it stays text.
  private mutating func absorbRawProfile(_ entry: TextEntry, hasStandardXMP: Bool, problems: inout [String]) -> Bool {
    let bytes: [UInt8]
    switch Self.decodeRawProfile(entry.text) {
    case .failure(let problem):
      problems.append(
        "PNG text chunk \"\(entry.keyword)\" is not a readable raw profile (\(problem))\(Self.keptAsText)")
      return false
    case .success(let decoded): bytes = decoded
    }
    let tiff = bytes.starts(with: [0x4D, 0x4D, 0, 42]) || bytes.starts(with: [0x49, 0x49, 42, 0])
    if entry.keyword != Self.pngRawXMPKeyword, bytes.starts(with: Self.jpegEXIFHeader) || tiff {
      // ImageMagick's EXIF starts with `Exif\0\0`, as in APP1; a bare TIFF structure gets the prefix.
      guard exif == nil else { return false }
      exif = tiff ? Self.jpegEXIFHeader + bytes : bytes
      return true
    }
    // An `APP1` profile may hold XMP instead, with its APP1 namespace header; an `xmp` one is the bare packet.
    let isAPP1XMP = entry.keyword == "Raw profile type APP1" && bytes.starts(with: Self.jpegXMPHeader)
    if entry.keyword == Self.pngRawXMPKeyword || isAPP1XMP {
      let packet = isAPP1XMP ? Array(bytes.dropFirst(Self.jpegXMPHeader.count)) : bytes
      guard String(validating: packet, as: UTF8.self) != nil, !packet.isEmpty else {
        problems.append("PNG text chunk \"\(entry.keyword)\" does not hold a UTF-8 XMP packet\(Self.keptAsText)")
        return false
      }
      guard xmp == nil, !hasStandardXMP else { return false }
      xmp = packet
      return true
    }
    problems.append(
      "PNG text chunk \"\(entry.keyword)\" does not hold an EXIF block (no TIFF header)\(Self.keptAsText)")
    return false
  }

  /// The Photoshop image resources a `Raw profile type iptc` text entry holds, or nil when it is not one.
  static func iptcResources(fromIIMText entry: TextEntry) -> [UInt8]? {
    guard entry.keyword == pngIIMKeyword, let bytes = rawProfileBytes(entry.text) else { return nil }
    return iptcResources(fromIPTCProfile: bytes)
  }

  /// The Photoshop image resources for the data of a `Raw profile type iptc`, or nil when it is neither form.
  ///
  /// ImageMagick writes bare IPTC-IIM records there (each starts with the tag marker 0x1C): they become one IPTC
  /// resource (`8BIM`, 0x0404, no name), as JPEG's APP13 carries them. ExifTool writes the resource itself (it
  /// starts with `8BIM`), kept as it is; a leading `Photoshop 3.0\0`, as in APP13, is dropped.
  static func iptcResources(fromIPTCProfile bytes: [UInt8]) -> [UInt8]? {
    let data = bytes.starts(with: jpegIPTCHeader) ? Array(bytes.dropFirst(jpegIPTCHeader.count)) : bytes
    if data.starts(with: Array("8BIM".utf8)) { return data }
    guard data.first == 0x1C, data.count <= Int(UInt32.max) else { return nil }
    // Resource: signature, ID 0x0404, an empty Pascal name padded to even length, size, data padded to even length.
    return Array("8BIM".utf8) + [0x04, 0x04, 0, 0] + bigEndian(data.count) + data + (data.count % 2 == 1 ? [0] : [])
  }

  /// The text chunks a PNG carries this metadata in: its text, comments as `Comment`, XMP (with any
  /// extended XMP merged in, since PNG has no size limit) in `iTXt`, IPTC as a raw profile in `zTXt`.
  var pngTextEntries: [TextEntry] {
    var entries = text
    // A COM comment keeps its bytes in PNG too: one read as UTF-8 (valid UTF-8 beyond ASCII) goes in `iTXt`, which
    // is UTF-8; one read as Latin-1 (or plain ASCII) in `tEXt`, which is Latin-1. Either way the text is the same
    // and so are the bytes. (A comment that holds a NUL, which `tEXt` cannot, goes in `iTXt` as UTF-8.)
    for bytes in commentBytes {
      let comment = Self.string(fromUnknownEncoding: bytes)
      let beyondASCII = comment.unicodeScalars.contains { $0.value > 0x7F }
      let isUTF8 = beyondASCII && String(validating: bytes, as: UTF8.self) != nil
      entries.append(TextEntry(keyword: "Comment", text: comment, isInternational: isUTF8 || !Self.isLatin1(comment)))
    }
    if let xmp, !xmp.isEmpty {
      let packet = extendedXMP.map { XMPPacket.merging(main: xmp, extended: $0) } ?? xmp
      entries.append(
        TextEntry(keyword: Self.pngXMPKeyword, text: String(decoding: packet, as: UTF8.self), isInternational: true))
    }
    if let pngIPTCText {
      // Read from a `Raw profile type iptc` and unchanged since: written back as it came.
      entries.append(pngIPTCText)
    } else if let iptc, !iptc.isEmpty {
      entries.append(
        TextEntry(keyword: Self.pngIPTCKeyword, text: Self.rawProfileText("8bim", iptc), isCompressed: true))
    }
    return entries
  }

  /// The EXIF block without its `Exif\0\0` prefix, as PNG's `eXIf` holds it.
  var pngEXIF: [UInt8]? {
    guard let exif, exif.count > Self.jpegEXIFHeader.count else { return nil }
    return exif.starts(with: Self.jpegEXIFHeader) ? Array(exif.dropFirst(Self.jpegEXIFHeader.count)) : exif
  }

  /// ImageMagick's raw profile text: `\n<name>\n<length, 8 wide>\n` then hex, 72 digits a line.
  static func rawProfileText(_ name: String, _ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    var text = "\n\(name)\n"
    let length = String(bytes.count)
    text += String(repeating: " ", count: max(0, 8 - length.count)) + length + "\n"
    for (index, byte) in bytes.enumerated() {
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 15)])
      if index % 36 == 35 { text.append("\n") }
    }
    return text + "\n"
  }

  /// The bytes of a raw profile text, or nil when it is not one.
  static func rawProfileBytes(_ text: String) -> [UInt8]? { try? decodeRawProfile(text).get() }

  /// What a raw profile's text is not, in words.
  struct RawProfileProblem: Error, CustomStringConvertible {
    let description: String
  }

  /// The bytes of a raw profile text (`\n<name>\n<length>\n<hex, in lines>`), or what is wrong with it.
  ///
  /// Only hex digits and white space may follow the length, in pairs, and there must be exactly as many pairs
  /// as the length says: anything else would make up bytes the writer never meant.
  static func decodeRawProfile(_ text: String) -> Result<[UInt8], RawProfileProblem> {
    let lines = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: true)
    guard lines.count == 3, let length = Int(lines[1].trimmingWhitespace()), length >= 0 else {
      return .failure(RawProfileProblem(description: "no name and length lines"))
    }
    // The declared length is checked against the hex that is there before anything is reserved.
    guard length <= lines[2].utf8.count / 2 else {
      return .failure(
        RawProfileProblem(description: "declares \(length) bytes, its \(lines[2].utf8.count) characters hold fewer"))
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(length)
    var high: UInt8?
    for scalar in lines[2].unicodeScalars {
      let character = scalar.isASCII ? UInt8(scalar.value) : 0
      let value: UInt8
      switch character {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): value = character - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): value = character - UInt8(ascii: "A") + 10
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"): continue
      default:
        let problem = "after \(bytes.count) of its \(length) bytes, '\(scalar)' is not a hex digit"
        return .failure(RawProfileProblem(description: problem))
      }
      if let first = high {
        bytes.append(first << 4 | value)
        high = nil
      } else {
        high = value
      }
    }
    guard high == nil, bytes.count == length else {
      let digits = bytes.count * 2 + (high == nil ? 0 : 1)
      return .failure(RawProfileProblem(description: "declares \(length) bytes, its hex holds \(digits) digits"))
    }
    return .success(bytes)
  }

  static func isLatin1(_ text: String) -> Bool { text.unicodeScalars.allSatisfy { $0.value <= 0xFF && $0.value != 0 } }
}
