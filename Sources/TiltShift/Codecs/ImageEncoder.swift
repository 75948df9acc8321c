import CJPEG
import CPNG

/// Encodes an ``Image`` and its metadata as JPEG or PNG bytes.
///
/// JPEG has no alpha: transparent pixels are composited on ``background`` (white unless told otherwise),
/// never turned black by accident; 16-bit images are scaled to 8 bits. JPEG keeps the ICC profile (APP2, in
/// as many segments as it takes), EXIF (APP1, at most 65,533 bytes, else an error), XMP (APP1, split into
/// extended XMP when over one marker), IPTC (APP13), comments (COM) and the density (JFIF). PNG keeps
/// every layout as is, alpha and 16 bits included, and writes the profile (`iCCP`), EXIF (`eXIf`), XMP and
/// text (`iTXt`/`tEXt`/`zTXt`), IPTC (a `Raw profile type 8bim` text), `gAMA`, `sRGB`, `cHRM` and `pHYs`.
/// What a format cannot carry is left out: see ``ImageMetadata``. Strip ``Image/metadata`` to write none.
/// An ICC profile that cannot be written correctly (an RGB profile on a gray PNG, which libpng refuses) is left
/// out, never silently: ``encode(_:warnings:)`` says so.
/// Every call is independent: one encoder value can be used from many threads at once.
///
/// ```swift
/// let bytes = try ImageEncoder(format: .jpeg, jpegQuality: 88, background: .black).encode(image)
/// try ImageFile.writeAtomically(bytes, to: "out/IMG_0001.jpg")
/// ```
public struct ImageEncoder: Sendable {
  /// The output format.
  public var format: ImageFormat
  /// JPEG quality, 1 (smallest) to 100 (best); libjpeg's scale. Default 90.
  public var jpegQuality: Int
  /// Whether JPEG output is progressive. Default false (baseline).
  public var jpegProgressive: Bool
  /// zlib compression level for PNG, 0 (fastest) to 9 (smallest). Default 6, libpng's own default.
  public var pngCompressionLevel: Int
  /// Whether PNG output is Adam7-interlaced. Default false.
  public var pngInterlaced: Bool
  /// What transparent pixels are composited on for JPEG output. Default white.
  public var background: BackgroundColour

  /// Creates an encoder for `format`.
  public init(
    format: ImageFormat,
    jpegQuality: Int = 90,
    jpegProgressive: Bool = false,
    pngCompressionLevel: Int = 6,
    pngInterlaced: Bool = false,
    background: BackgroundColour = .white
  ) {
    self.format = format
    self.jpegQuality = min(100, max(1, jpegQuality))
    self.jpegProgressive = jpegProgressive
    self.pngCompressionLevel = min(9, max(0, pngCompressionLevel))
    self.pngInterlaced = pngInterlaced
    self.background = background
  }

  /// Encodes `image`; throws ``ImageError/Kind/encodingFailed(format:message:)`` with the codec's message, or
  /// ``ImageError/Kind/metadataTooLarge(what:bytes:limit:format:)`` when JPEG cannot hold the EXIF block.
  public func encode(_ image: Image) throws(ImageError) -> [UInt8] {
    var warnings: [String] = []
    return try encode(image, warnings: &warnings)
  }

  /// Encodes `image` as ``encode(_:)`` does; metadata the output could not keep (an ICC profile libpng refuses, a
  /// gray profile on pixels that became RGB) is appended to `warnings`, one line each.
  ///
  /// ```swift
  /// var warnings: [String] = []
  /// let png = try ImageEncoder(format: .png).encode(photo, warnings: &warnings)
  /// for warning in warnings { print("warning: \(warning)") }  // e.g. the ICC profile was left out: …
  /// ```
  public func encode(_ image: Image, warnings: inout [String]) throws(ImageError) -> [UInt8] {
    try format.checkFits(width: image.width, height: image.height)
    var output: UnsafeMutablePointer<UInt8>?
    var length = 0
    var message = [CChar](repeating: 0, count: 256)
    var notes = [CChar](repeating: 0, count: 1024)
    let status: Int32
    switch format {
    case .jpeg:
      let opaque = image.compositedOn(background)
      var metadata = image.metadata
      if image.orientation != 1, image.exifOrientation == nil {
        // Orientation known only from XMP: the pixels stay as stored and the tag is carried (as an EXIF one
        // is), but most JPEG viewers read EXIF alone, so it is said there too: in a new EXIF block, or added to
        // the one there is. An EXIF block that cannot be read as TIFF, or that the entry would take over one
        // marker, is left as it was.
        if let exif = metadata.exif {
          if let updated = EXIFWriter.setting(orientation: image.orientation, in: exif),
            updated.count <= ImageMetadata.jpegMarkerPayload
          {
            metadata.exif = updated
          }
        } else {
          metadata.exif = EXIFWriter.orientationBlock(image.orientation)
        }
      }
      if opaque.layout == .rgb, metadata.iccProfile?.colourSpace == "GRAY" {
        // Gray+alpha composited on a coloured background is RGB now: a gray profile no longer describes it.
        metadata.iccProfile = nil
        warnings.append(
          "the gray ICC profile was left out: composited on a coloured background, the pixels are RGB in the JPEG")
      }
      let markers = try metadata.jpegMarkers()
      let density = metadata.jfifDensity
      status = opaque.pixels.withUnsafeBufferPointer { pixels in
        message.withUnsafeMutableBufferPointer { text in
          withMarkerList(markers) { list in
            spindle_jpeg_encode(
              pixels.baseAddress, Int32(opaque.width), Int32(opaque.height), Int32(opaque.layout.channels),
              Int32(jpegQuality), jpegProgressive ? 1 : 0, list.baseAddress, list.count, Int32(density?.unit ?? -1),
              Int32(density?.x ?? 0), Int32(density?.y ?? 0), &output, &length, text.baseAddress, text.count)
          }
        }
      }
    case .png:
      status = image.pixels.withUnsafeBufferPointer { pixels in
        message.withUnsafeMutableBufferPointer { text in
          notes.withUnsafeMutableBufferPointer { notes in
            withPNGMetadata(image.metadata) { metadata in
              spindle_png_encode(
                pixels.baseAddress, Int32(image.width), Int32(image.height), Int32(image.layout.channels),
                Int32(image.bitDepth), Int32(pngCompressionLevel), pngInterlaced ? 1 : 0, metadata, &output, &length,
                text.baseAddress, text.count, notes.baseAddress, notes.count)
            }
          }
        }
      }
    }
    guard status == 0, let output else {
      let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      throw ImageError(.encodingFailed(format: format, message: text))
    }
    let noted = notes.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    warnings += noted.split(separator: "\n").map(String.init)
    defer {
      switch format {
      case .jpeg: spindle_jpeg_free(output)
      case .png: spindle_png_free(output)
      }
    }
    return Array(UnsafeBufferPointer(start: output, count: length))
  }

  /// Calls `body` with the C view of `markers` (pointers valid only inside).
  private func withMarkerList<R>(
    _ markers: [(code: Int, bytes: [UInt8])], _ body: (UnsafeBufferPointer<spindle_jpeg_marker>) -> R
  ) -> R {
    // One contiguous buffer holds every payload, so one pointer stays valid for all of them.
    let joined = markers.flatMap(\.bytes)
    return joined.withUnsafeBufferPointer { all in
      var offset = 0
      var list: [spindle_jpeg_marker] = []
      for marker in markers {
        list.append(
          spindle_jpeg_marker(
            code: Int32(marker.code), data: all.baseAddress.map { $0 + offset }, length: marker.bytes.count))
        offset += marker.bytes.count
      }
      return list.withUnsafeBufferPointer { body($0) }
    }
  }

  /// Calls `body` with the C view of the PNG chunks for `metadata` (pointers valid only inside).
  private func withPNGMetadata<R>(_ metadata: ImageMetadata, _ body: (UnsafePointer<spindle_png_metadata>) -> R) -> R {
    // Every string goes into one NUL-separated buffer; the C structs point into it.
    var strings: [UInt8] = []
    func add(_ bytes: [UInt8]) -> Int {
      defer { strings += bytes.filter { $0 != 0 } + [0] }
      return strings.count
    }
    func latin1(_ text: String, limit: Int = .max, keyword: Bool = false) -> [UInt8] {
      let allowed = keyword ? 32...0xFF : 1...0xFF
      return Array(text.unicodeScalars.filter { allowed.contains(Int($0.value)) }.prefix(limit).map { UInt8($0.value) })
    }
    var texts: [PendingText] = []
    for entry in metadata.pngTextEntries {
      let international = entry.isInternational || !ImageMetadata.isLatin1(entry.text)
      let keyword = latin1(entry.keyword, limit: 79, keyword: true)
      guard !keyword.isEmpty else { continue }
      let bytes: [UInt8] = international ? Array(entry.text.utf8) : latin1(entry.text)
      texts.append(
        PendingText(
          compression: international ? (entry.isCompressed ? 2 : 1) : (entry.isCompressed ? 0 : -1),
          keyword: add(keyword), language: international ? add(Array(entry.language.utf8)) : nil,
          translated: international ? add(Array(entry.translatedKeyword.utf8)) : nil,
          text: add(bytes), length: bytes.filter { $0 != 0 }.count))
    }
    let iccName = add(latin1(metadata.iccProfile?.name ?? "", limit: 79, keyword: true))
    let icc = metadata.iccProfile?.data ?? []
    let exif = metadata.pngEXIF ?? []
    let colour = pngColour(metadata)
    return strings.withUnsafeBufferPointer { pool in
      let base = UnsafeRawPointer(pool.baseAddress!).assumingMemoryBound(to: CChar.self)
      let list = texts.map { text in
        spindle_png_text(
          compression: text.compression, keyword: base + text.keyword, language: text.language.map { base + $0 },
          translated_keyword: text.translated.map { base + $0 }, text: base + text.text, text_length: text.length)
      }
      return icc.withUnsafeBufferPointer { iccBytes in
        exif.withUnsafeBufferPointer { exifBytes in
          list.withUnsafeBufferPointer { textList in
            var chunks = spindle_png_metadata(
              icc: iccBytes.count > 0 ? iccBytes.baseAddress : nil, icc_length: iccBytes.count,
              icc_name: base + iccName, exif: exifBytes.count > 0 ? exifBytes.baseAddress : nil,
              exif_length: exifBytes.count, texts: textList.baseAddress, text_count: Int32(textList.count),
              colour: colour)
            return body(&chunks)
          }
        }
      }
    }
  }

  /// gAMA, sRGB, cHRM and pHYs for `metadata`; densities per inch or centimetre become per metre.
  private func pngColour(_ metadata: ImageMetadata) -> spindle_png_colour {
    var colour = spindle_png_colour()
    if let gamma = metadata.gamma, gamma > 0, gamma <= Int(Int32.max) {
      colour.has_gamma = 1
      colour.gamma = Int32(gamma)
    }
    if let intent = metadata.sRGBIntent, (0...3).contains(intent) {
      colour.has_srgb = 1
      colour.srgb_intent = Int32(intent)
    }
    if let c = metadata.chromaticities, c.count == 8, c.allSatisfy({ (0...Int(Int32.max)).contains($0) }) {
      colour.has_chrm = 1
      colour.chrm = (
        Int32(c[0]), Int32(c[1]), Int32(c[2]), Int32(c[3]), Int32(c[4]), Int32(c[5]), Int32(c[6]), Int32(c[7])
      )
    }
    if let density = metadata.density, density.x > 0, density.y > 0 {
      let scale: Double =
        switch density.unit {
        case .aspectRatio, .perMetre: 1
        case .perInch: 1 / 0.0254
        case .perCentimetre: 100
        }
      let x = (Double(density.x) * scale).rounded()
      let y = (Double(density.y) * scale).rounded()
      if x <= Double(Int32.max), y <= Double(Int32.max) {
        colour.has_phys = 1
        colour.phys_x = UInt32(x)
        colour.phys_y = UInt32(y)
        colour.phys_unit = density.unit == .aspectRatio ? 0 : 1
      }
    }
    return colour
  }
}

/// A PNG text chunk whose strings are offsets into a pool, until the pool's address is known.
private struct PendingText {
  var compression: Int32
  var keyword: Int
  var language: Int?
  var translated: Int?
  var text: Int
  var length: Int
}
