/// Reading and writing the metadata markers of a JPEG file.
extension ImageMetadata {
  static let jpegEXIFHeader: [UInt8] = Array("Exif".utf8) + [0, 0]
  static let jpegXMPHeader: [UInt8] = Array("http://ns.adobe.com/xap/1.0/".utf8) + [0]
  static let jpegExtendedXMPHeader: [UInt8] = Array("http://ns.adobe.com/xmp/extension/".utf8) + [0]
  static let jpegICCHeader: [UInt8] = Array("ICC_PROFILE".utf8) + [0]
  static let jpegIPTCHeader: [UInt8] = Array("Photoshop 3.0".utf8) + [0]
  /// One marker's payload: 65,535 minus the two length bytes.
  static let jpegMarkerPayload = 65533
  static let app1 = 0xE1
  static let app2 = 0xE2
  static let app13 = 0xED
  static let com = 0xFE

  /// The metadata held by a JPEG's saved markers (`code`, payload) in file order, and its JFIF density.
  ///
  /// ICC segments are put back in sequence order; extended XMP chunks by their offsets (chunks of another
  /// GUID than the main packet names are ignored); a full COM segment (65,533 bytes) and the COM segments after
  /// it are one comment (see ``jpegMarkers()``). Malformed segments are skipped, never fatal.
  init(jpegMarkers markers: [(code: Int, bytes: [UInt8])], density: PixelDensity?) {
    self.init()
    self.density = density
    var iccChunks: [(sequence: Int, bytes: ArraySlice<UInt8>)] = []
    var iccCount = 0
    var extended: [UInt8]?
    var extendedGUID: String?
    var iptcParts: [UInt8] = []
    // An extension can be no bigger than the chunks present: a declared size beyond them allocates nothing.
    let extendedBytesPresent = markers.reduce(0) { sum, marker in
      marker.code == Self.app1 && marker.bytes.starts(with: Self.jpegExtendedXMPHeader)
        ? sum + max(0, marker.bytes.count - Self.jpegExtendedXMPHeader.count - 40) : sum
    }
    // Whether the last marker was a full COM, which the next COM continues (see jpegMarkers()).
    var commentGoesOn = false
    for (code, bytes) in markers {
      let continuesComment = commentGoesOn && code == Self.com
      commentGoesOn = false
      switch code {
      case Self.app1 where bytes.starts(with: Self.jpegEXIFHeader):
        if exif == nil { exif = bytes }
      case Self.app1 where bytes.starts(with: Self.jpegXMPHeader):
        if xmp == nil { xmp = Array(bytes.dropFirst(Self.jpegXMPHeader.count)) }
      case Self.app1 where bytes.starts(with: Self.jpegExtendedXMPHeader):
        let body = bytes.dropFirst(Self.jpegExtendedXMPHeader.count)
        guard body.count >= 40 else { continue }
        let guid = String(decoding: body.prefix(32), as: UTF8.self)
        let total = Self.bigEndian32(body.dropFirst(32))
        let offset = Self.bigEndian32(body.dropFirst(36))
        let chunk = body.dropFirst(40)
        guard total <= extendedBytesPresent, offset + chunk.count <= total else { continue }
        if extendedGUID == nil {
          extendedGUID = guid
          extended = [UInt8](repeating: 0, count: total)
        }
        guard guid == extendedGUID, extended?.count == total else { continue }
        extended?.replaceSubrange(offset..<offset + chunk.count, with: chunk)
      case Self.app2 where bytes.starts(with: Self.jpegICCHeader) && bytes.count > 14:
        iccChunks.append((Int(bytes[12]), bytes.dropFirst(14)))
        iccCount = max(iccCount, Int(bytes[13]))
      case Self.app13 where bytes.starts(with: Self.jpegIPTCHeader):
        iptcParts += bytes.dropFirst(Self.jpegIPTCHeader.count)
      case Self.com:
        if continuesComment {
          commentBytes[commentBytes.count - 1] += bytes
        } else {
          commentBytes.append(bytes)
        }
        commentGoesOn = bytes.count == Self.jpegMarkerPayload
      default:
        continue
      }
    }
    if !iccChunks.isEmpty {
      iccChunks.sort { $0.sequence < $1.sequence }
      iccProfile = ICCProfile(data: iccChunks.flatMap { $0.bytes })
    }
    if let extended, let extendedGUID, let xmp, XMPPacket.extendedGUID(in: xmp) == extendedGUID {
      extendedXMP = extended
    }
    if !iptcParts.isEmpty { iptc = iptcParts }
  }

  /// The markers a JPEG carries this metadata in, in the order they are written after SOI.
  ///
  /// Throws when the EXIF block is over one marker (65,533 bytes); an XMP packet over one marker is split
  /// into a main packet and extended XMP; an ICC profile takes as many APP2 segments as it needs, and so does a
  /// comment (COM).
  func jpegMarkers() throws(ImageError) -> [(code: Int, bytes: [UInt8])] {
    var markers: [(code: Int, bytes: [UInt8])] = []
    if let exif, !exif.isEmpty {
      guard exif.count <= Self.jpegMarkerPayload else {
        throw ImageError(
          .metadataTooLarge(
            what: "EXIF", bytes: exif.count, limit: Self.jpegMarkerPayload, format: .jpeg))
      }
      markers.append((Self.app1, exif))
    }
    if let xmp, !xmp.isEmpty {
      var main = xmp
      var extensionPacket = extendedXMP
      if Self.jpegXMPHeader.count + main.count > Self.jpegMarkerPayload {
        // Too big for one marker: the whole packet becomes the extension, the main packet points to it.
        let whole = extendedXMP.map { XMPPacket.merging(main: main, extended: $0) } ?? main
        extensionPacket = whole
        main = XMPPacket.stub(pointingTo: MD5.hex(of: whole))
      }
      markers.append((Self.app1, Self.jpegXMPHeader + main))
      if let extensionPacket {
        let guid = XMPPacket.extendedGUID(in: main) ?? MD5.hex(of: extensionPacket)
        let room = Self.jpegMarkerPayload - Self.jpegExtendedXMPHeader.count - 40
        var offset = 0
        while offset < extensionPacket.count {
          let end = min(extensionPacket.count, offset + room)
          markers.append(
            (
              Self.app1,
              Self.jpegExtendedXMPHeader + Array(guid.utf8.prefix(32)) + Self.bigEndian(extensionPacket.count)
                + Self.bigEndian(offset) + extensionPacket[offset..<end]
            ))
          offset = end
        }
      }
    }
    if let iccProfile, !iccProfile.data.isEmpty {
      let room = Self.jpegMarkerPayload - Self.jpegICCHeader.count - 2
      let count = (iccProfile.data.count + room - 1) / room
      guard count <= 255 else {
        throw ImageError(
          .metadataTooLarge(what: "ICC profile", bytes: iccProfile.data.count, limit: 255 * room, format: .jpeg))
      }
      for index in 0..<count {
        let start = index * room
        let chunk = iccProfile.data[start..<min(iccProfile.data.count, start + room)]
        markers.append((Self.app2, Self.jpegICCHeader + [UInt8(index + 1), UInt8(count)] + chunk))
      }
    }
    if let iptc, !iptc.isEmpty {
      let room = Self.jpegMarkerPayload - Self.jpegIPTCHeader.count
      var offset = 0
      while offset < iptc.count {
        let end = min(iptc.count, offset + room)
        markers.append((Self.app13, Self.jpegIPTCHeader + iptc[offset..<end]))
        offset = end
      }
    }
    // COM comments go back as the bytes they were read as (Latin-1 stays Latin-1). PNG comment text (keyword
    // `Comment` in any case: `comment`, `COMMENT`) goes as UTF-8, whatever chunk it came from: COM names no
    // encoding, UTF-8 holds every character, and a reader takes valid UTF-8 as UTF-8 (as this one does).
    let pngComments = text.filter { Self.isPNGCommentKeyword($0.keyword) }.map { Array($0.text.utf8) }
    for comment in commentBytes + pngComments {
      // One COM holds 65,533 bytes: a longer comment goes on in the next ones, all full but the last, and a
      // full COM is read as continued by the COM after it. So a comment that fills its last COM exactly is
      // ended by an empty one, lest a following comment be joined to it.
      var offset = 0
      repeat {
        let end = min(comment.count, offset + Self.jpegMarkerPayload)
        markers.append((Self.com, Array(comment[offset..<end])))
        offset = end
      } while offset < comment.count
      if !comment.isEmpty, comment.count % Self.jpegMarkerPayload == 0 { markers.append((Self.com, [])) }
    }
    return markers
  }

  /// The JFIF density for this metadata's `pHYs`-style density: per metre becomes per centimetre when exact,
  /// else per inch. Nil when there is none or it does not fit JFIF's 16-bit fields.
  var jfifDensity: (unit: Int, x: Int, y: Int)? {
    guard let density else { return nil }
    var result: (unit: Int, x: Int, y: Int)
    switch density.unit {
    case .aspectRatio: result = (0, density.x, density.y)
    case .perInch: result = (1, density.x, density.y)
    case .perCentimetre: result = (2, density.x, density.y)
    case .perMetre:
      if density.x % 100 == 0 && density.y % 100 == 0 {
        result = (2, density.x / 100, density.y / 100)
      } else {
        result = (1, Int((Double(density.x) * 0.0254).rounded()), Int((Double(density.y) * 0.0254).rounded()))
      }
    }
    guard (1...65535).contains(result.x), (1...65535).contains(result.y) else { return nil }
    return result
  }

  static func bigEndian32(_ bytes: ArraySlice<UInt8>) -> Int {
    bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
  }

  static func bigEndian(_ value: Int) -> [UInt8] {
    [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
  }

  /// Whether a PNG text keyword names a comment: `Comment` in any case (PNG keywords are case-sensitive, but
  /// writers spell this one `comment` too, and it means the same).
  static func isPNGCommentKeyword(_ keyword: String) -> Bool { keyword.lowercased() == "comment" }

  /// UTF-8 when the bytes are valid UTF-8, else Latin-1 (JPEG comments name no encoding).
  static func string(fromUnknownEncoding bytes: [UInt8]) -> String {
    var bytes = bytes
    while bytes.last == 0 { bytes.removeLast() }
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
  }
}
