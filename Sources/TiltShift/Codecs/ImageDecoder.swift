import CJPEG
import CPNG

/// Decodes JPEG and PNG bytes into ``Image`` values with their metadata, refusing images above a pixel limit.
///
/// The format comes from the magic bytes, never from a file name. JPEG: baseline, progressive,
/// grayscale (→ ``Image/Layout/gray``), YCbCr/RGB (→ ``Image/Layout/rgb``), CMYK and YCCK (converted
/// to RGB, Adobe-inverted or not; their CMYK profile no longer applies and is dropped). PNG: every colour
/// type and bit depth; palette expands to RGB (RGBA with tRNS), gray with tRNS gains alpha, Adam7 interlacing
/// is undone, 16-bit samples are kept with ``keeps16Bits`` or scaled to 8 bits. The file's metadata is read
/// into ``Image/metadata`` (see ``ImageMetadata``). Codec warnings are never printed.
///
/// Data that ends early, or whose compressed pixels are damaged, is an error that says which rows are
/// missing or damaged — never a silently gray-padded image. With ``isLenient`` it becomes a warning instead (the
/// missing rows are gray for JPEG, black for PNG), reported through ``decode(_:warnings:)``. A JPEG that lacks only
/// its end marker, every row decoded from its own data, decodes with a warning; so does a PNG whose text chunk or
/// ICC profile libpng had to leave out.
///
/// The limit is checked against the header's dimensions before any pixel buffer is allocated, so a
/// tiny "decompression bomb" costs nothing. Every call is independent: one decoder value can be used
/// from many threads at once.
///
/// ```swift
/// let decoder = ImageDecoder(maxPixels: 50_000_000, keeps16Bits: true)
/// var warnings: [String] = []
/// let image = try decoder.decode(ImageFile.read("scan.png"), warnings: &warnings)
/// ```
public struct ImageDecoder: Sendable {
  /// The default pixel limit: 268 megapixels (16384 × 16384).
  public static let defaultMaxPixels = 16384 * 16384

  /// Images with more than this many pixels (width × height) are refused with ``ImageError/Kind/tooManyPixels(width:height:limit:)``.
  public var maxPixels: Int
  /// Whether 16-bit PNG samples stay 16-bit (``Image/bitDepth`` 16) instead of being scaled to 8 bits.
  public var keeps16Bits: Bool
  /// Whether data that ends early or is damaged decodes anyway, with a warning naming the missing rows.
  public var isLenient: Bool

  /// Creates a decoder with a pixel limit.
  public init(maxPixels: Int = ImageDecoder.defaultMaxPixels, keeps16Bits: Bool = false, isLenient: Bool = false) {
    self.maxPixels = max(0, maxPixels)
    self.keeps16Bits = keeps16Bits
    self.isLenient = isLenient
  }

  /// Reads and decodes the file at `path`; errors name the file.
  public func decode(contentsOf path: String) throws(ImageError) -> Image {
    let bytes = try ImageFile.read(path)
    do {
      return try decode(bytes)
    } catch {
      throw error.naming(path)
    }
  }

  /// Decodes in-memory file bytes.
  public func decode(_ bytes: [UInt8]) throws(ImageError) -> Image {
    var warnings: [String] = []
    return try decode(bytes, warnings: &warnings)
  }

  /// Decodes in-memory file bytes; what a lenient decode let through is appended to `warnings`, one line each.
  public func decode(_ bytes: [UInt8], warnings: inout [String]) throws(ImageError) -> Image {
    try decode(bytes, warnings: &warnings, reusing: nil)
  }

  /// Decodes in-memory file bytes into a buffer from `pool` when it holds one of the right size (see
  /// ``PixelBufferPool``), else into a fresh one; the pixels are the same either way. 16-bit images always get a
  /// fresh buffer (a batch pools 8-bit pixels only).
  package func decode(
    _ bytes: [UInt8], warnings: inout [String], reusing pool: PixelBufferPool?
  ) throws(ImageError) -> Image {
    guard !bytes.isEmpty else { throw ImageError(.emptyFile) }
    guard let format = ImageFormat(detecting: bytes) else { throw ImageError(.notAnImage) }
    var found: [String] = []
    let result: Result<Image, ImageError> = bytes.withUnsafeBufferPointer { buffer in
      switch format {
      case .jpeg: decodeJPEG(buffer, warnings: &found, pool: pool)
      case .png: decodePNG(buffer, warnings: &found, pool: pool)
      }
    }
    warnings += found
    return try result.get()
  }

  /// Reads only the header: format, dimensions and the layout a decode would produce.
  ///
  /// Cheap (no pixel is decoded), and subject to the same pixel limit, so a pipeline can budget memory
  /// (``ImageInfo/decodedByteCount``) before decoding anything.
  public func info(_ bytes: [UInt8]) throws(ImageError) -> ImageInfo {
    guard !bytes.isEmpty else { throw ImageError(.emptyFile) }
    guard let format = ImageFormat(detecting: bytes) else { throw ImageError(.notAnImage) }
    let result: Result<ImageInfo, ImageError> = bytes.withUnsafeBufferPointer { data in
      var width: Int32 = 0
      var height: Int32 = 0
      var channels: Int32 = 0
      var depth: Int32 = 8
      let status: Int32
      let message: String
      switch format {
      case .jpeg:
        guard let decoder = spindle_jpeg_decoder_create(data.baseAddress, data.count) else {
          return .failure(ImageError(.corruptData(format: .jpeg, message: "cannot create a decoder (out of memory)")))
        }
        defer { spindle_jpeg_decoder_destroy(decoder) }
        status = spindle_jpeg_decoder_read_header(decoder, UInt64(maxPixels), &width, &height, &channels)
        message = String(cString: spindle_jpeg_decoder_message(decoder))
        if status != Int32(SPINDLE_JPEG_OK) && status != Int32(SPINDLE_JPEG_TOO_MANY_PIXELS) {
          return .failure(jpegError(status, message, header: true))
        }
      case .png:
        guard let decoder = spindle_png_decoder_create(data.baseAddress, data.count) else {
          return .failure(ImageError(.corruptData(format: .png, message: "cannot create a decoder (out of memory)")))
        }
        defer { spindle_png_decoder_destroy(decoder) }
        status = spindle_png_decoder_read_header(
          decoder, UInt64(maxPixels), keeps16Bits ? 1 : 0, &width, &height, &channels, &depth)
        message = String(cString: spindle_png_decoder_message(decoder))
        if status != Int32(SPINDLE_PNG_OK) && status != Int32(SPINDLE_PNG_TOO_MANY_PIXELS) {
          return .failure(pngError(status, message, header: true, height: Int(height)))
        }
      }
      if status != 0 {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0 else {
        return .failure(ImageError(.invalidFile(format: format, message: "invalid image dimensions")))
      }
      return .success(
        ImageInfo(format: format, width: Int(width), height: Int(height), layout: layout, bitDepth: Int(depth)))
    }
    return try result.get()
  }

  /// `count` bytes, every one written by `fill`: a buffer from `pool` when it has one, else a fresh one.
  private static func pixels(
    count: Int, from pool: PixelBufferPool?, _ fill: (UnsafeMutablePointer<UInt8>) -> Void
  ) -> [UInt8] {
    if var reused = pool?.take(count: count) {
      reused.withUnsafeMutableBufferPointer { fill($0.baseAddress!) }
      return reused
    }
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
      fill(buffer.baseAddress!)
      // On failure the contents are discarded; claiming them initialized keeps the array valid (UInt8 is trivial).
      initialized = count
    }
  }

  private func decodeJPEG(
    _ data: UnsafeBufferPointer<UInt8>, warnings: inout [String], pool: PixelBufferPool?
  ) -> Result<Image, ImageError> {
    guard let decoder = spindle_jpeg_decoder_create(data.baseAddress, data.count) else {
      return .failure(ImageError(.corruptData(format: .jpeg, message: "cannot create a decoder (out of memory)")))
    }
    defer { spindle_jpeg_decoder_destroy(decoder) }
    var width: Int32 = 0
    var height: Int32 = 0
    var channels: Int32 = 0
    let status = spindle_jpeg_decoder_read_header(decoder, UInt64(maxPixels), &width, &height, &channels)
    guard status == Int32(SPINDLE_JPEG_OK) else {
      if status == Int32(SPINDLE_JPEG_TOO_MANY_PIXELS) {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      return .failure(jpegError(status, String(cString: spindle_jpeg_decoder_message(decoder)), header: true))
    }
    guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0 else {
      return .failure(ImageError(.invalidFile(format: .jpeg, message: "invalid image dimensions")))
    }
    let count = Int(width) * Int(height) * Int(channels)
    var readStatus = Int32(SPINDLE_JPEG_OK)
    let pixels = Self.pixels(count: count, from: pool) { buffer in
      readStatus = spindle_jpeg_decoder_read_pixels(decoder, buffer, count, isLenient ? 1 : 0)
    }
    var firstRow: Int32 = -1
    let damage = spindle_jpeg_decoder_damage(decoder, &firstRow)
    let message = String(cString: spindle_jpeg_decoder_message(decoder))
    let damageError =
      damage == Int32(SPINDLE_JPEG_TRUNCATED)
      ? ImageError(
        .truncated(
          format: .jpeg, firstMissingRow: firstRow < 0 ? nil : Int(firstRow), height: Int(height), message: message))
      : ImageError(
        .damagedData(
          format: .jpeg, firstDamagedRow: firstRow < 0 ? nil : Int(firstRow), height: Int(height), message: message))
    guard readStatus == Int32(SPINDLE_JPEG_OK) else {
      let damaged = readStatus == Int32(SPINDLE_JPEG_TRUNCATED) || readStatus == Int32(SPINDLE_JPEG_DAMAGED)
      return .failure(damaged ? damageError : jpegError(readStatus, message, header: false))
    }
    if damage != 0 { warnings.append(Self.leniencyWarning(damageError, filler: "gray")) }
    if spindle_jpeg_decoder_end_missing(decoder) != 0 {
      // Every pixel came from the file's own data; only the two bytes that close it are missing.
      warnings.append(
        "the JPEG file's end marker (EOI) is missing, but every row was decoded: the image is whole "
          + "(libjpeg: \(message))")
    }
    var markers: [(code: Int, bytes: [UInt8])] = []
    for index in 0..<spindle_jpeg_decoder_marker_count(decoder) {
      var code: Int32 = 0
      var length = 0
      guard let bytes = spindle_jpeg_decoder_marker(decoder, index, &code, &length) else { continue }
      markers.append((Int(code), Array(UnsafeBufferPointer(start: bytes, count: length))))
    }
    var unit: Int32 = 0
    var x: Int32 = 0
    var y: Int32 = 0
    var density: ImageMetadata.PixelDensity?
    if spindle_jpeg_decoder_density(decoder, &unit, &x, &y) != 0, x > 0, y > 0, (0...2).contains(unit) {
      // 1:1 with no unit is JFIF's "nothing said"; keep only real information.
      if unit != 0 || x != y {
        density = ImageMetadata.PixelDensity(
          x: Int(x), y: Int(y), unit: unit == 0 ? .aspectRatio : unit == 1 ? .perInch : .perCentimetre)
      }
    }
    var metadata = ImageMetadata(jpegMarkers: markers, density: density)
    if let profile = metadata.iccProfile, profile.colourSpace == "CMYK" {
      // The pixels are RGB now: a CMYK profile describes something they no longer are.
      metadata.iccProfile = nil
      warnings.append("the CMYK ICC profile was left out: the pixels were converted to RGB")
    }
    return .success(
      Image(width: Int(width), height: Int(height), layout: layout, bitDepth: 8, bytes: pixels, metadata: metadata))
  }

  static func leniencyWarning(_ error: ImageError, filler: String) -> String {
    switch error.kind {
    case .damagedData(_, nil, _, _):
      // A checksum over all the data failed: no pixel is missing, but any of them may be wrong.
      "\(error.description); decoded anyway (--lenient): any row may hold wrong pixels"
    case .truncated(_, let first?, let height, _) where first >= height:
      // Every row decoded; only what follows the pixels is cut.
      "\(error.description); decoded anyway (--lenient), every row from the file"
    default:
      "\(error.description); decoded anyway (--lenient), missing pixels are \(filler)"
    }
  }

  private func jpegError(_ status: Int32, _ message: String, header: Bool) -> ImageError {
    switch status {
    case Int32(SPINDLE_JPEG_UNSUPPORTED): ImageError(.unsupported(format: .jpeg, message: message))
    case _ where header: ImageError(.invalidFile(format: .jpeg, message: message))
    default: ImageError(.corruptData(format: .jpeg, message: message))
    }
  }

  private func pngError(_ status: Int32, _ message: String, header: Bool, height: Int) -> ImageError {
    if header {
      if message.contains("end of file") {
        // Cut before its size was read, the file has no row count to name: "row 0 of 1" would be made up.
        return ImageError(
          .truncated(format: .png, firstMissingRow: height > 0 ? 0 : nil, height: max(1, height), message: message))
      }
      return ImageError(.invalidFile(format: .png, message: message))
    }
    return ImageError(.corruptData(format: .png, message: message))
  }

  private func decodePNG(
    _ data: UnsafeBufferPointer<UInt8>, warnings: inout [String], pool: PixelBufferPool?
  ) -> Result<Image, ImageError> {
    guard let decoder = spindle_png_decoder_create(data.baseAddress, data.count) else {
      return .failure(ImageError(.corruptData(format: .png, message: "cannot create a decoder (out of memory)")))
    }
    defer { spindle_png_decoder_destroy(decoder) }
    var width: Int32 = 0
    var height: Int32 = 0
    var channels: Int32 = 0
    var depth: Int32 = 8
    let status = spindle_png_decoder_read_header(
      decoder, UInt64(maxPixels), keeps16Bits ? 1 : 0, &width, &height, &channels, &depth)
    guard status == Int32(SPINDLE_PNG_OK) else {
      if status == Int32(SPINDLE_PNG_TOO_MANY_PIXELS) {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      let message = String(cString: spindle_png_decoder_message(decoder))
      return .failure(pngError(status, message, header: true, height: Int(height)))
    }
    guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0, depth == 8 || depth == 16 else {
      return .failure(ImageError(.invalidFile(format: .png, message: "invalid image dimensions")))
    }
    let count = Int(width) * Int(height) * Int(channels) * Int(depth / 8)
    var readStatus = Int32(SPINDLE_PNG_OK)
    let pixels = Self.pixels(count: count, from: depth == 8 ? pool : nil) { buffer in
      readStatus = spindle_png_decoder_read_pixels(decoder, buffer, count, isLenient ? 1 : 0)
    }
    var firstRow: Int32 = -1
    let damage = spindle_png_decoder_damage(decoder, &firstRow)
    let message = String(cString: spindle_png_decoder_message(decoder))
    let damageError =
      damage == Int32(SPINDLE_PNG_TRUNCATED)
      ? ImageError(
        .truncated(
          format: .png, firstMissingRow: firstRow < 0 ? nil : Int(firstRow), height: Int(height), message: message))
      : ImageError(
        .damagedData(
          format: .png, firstDamagedRow: firstRow < 0 ? nil : Int(firstRow), height: Int(height), message: message))
    guard readStatus == Int32(SPINDLE_PNG_OK) else {
      return .failure(damage != 0 ? damageError : pngError(readStatus, message, header: false, height: Int(height)))
    }
    if damage != 0 { warnings.append(Self.leniencyWarning(damageError, filler: "black")) }
    warnings += Self.droppedChunks(decoder)
    let metadata = pngMetadata(decoder, warnings: &warnings)
    return .success(
      Image(
        width: Int(width), height: Int(height), layout: layout, bitDepth: Int(depth), bytes: pixels,
        metadata: metadata))
  }

  /// The metadata chunks libpng left out of a PNG it decoded, one line each: a chunk whose CRC does not match its
  /// data (libpng drops an ancillary one), a text chunk it refused, an ICC profile it refused. A chunk with a bad
  /// CRC stays out: its bytes are not what was written, and copied into the output with a fresh CRC they would
  /// pass for sound. Other libpng warnings (a profile it keeps but finds odd) are not reported.
  private static func droppedChunks(_ decoder: OpaquePointer) -> [String] {
    var lines: [String] = []
    for index in 0..<spindle_png_decoder_warning_count(decoder) {
      guard let text = spindle_png_decoder_warning(decoder, index) else { continue }
      let warning = String(cString: text)
      let chunk = warning.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
      if warning.hasSuffix(": CRC error") {
        lines.append(
          "the \(chunk) chunk was left out: its CRC does not match its data, so it is damaged (libpng: \(warning))")
      } else if ["tEXt", "zTXt", "iTXt"].contains(chunk) {
        lines.append("a \(chunk) text chunk was left out: libpng refused it (libpng: \(warning))")
      }
    }
    let unkept = Int(spindle_png_decoder_warning_total(decoder) - spindle_png_decoder_warning_count(decoder))
    if unkept > 0 {
      lines.append(
        "libpng gave \(unkept) more warning\(unkept == 1 ? "" : "s") than are kept here: more chunks may have been left out"
      )
    }
    if let text = spindle_png_decoder_dropped_icc(decoder) {
      let warning = String(cString: text)
      if !warning.hasSuffix(": CRC error") {
        lines.append("the ICC profile (iCCP chunk) was left out: libpng refused it (libpng: \(warning))")
      }
    }
    return lines
  }

  /// Latin-1 bytes as text: each byte is the code point of the same number.
  private static func latin1(_ bytes: UnsafeRawBufferPointer) -> String {
    String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
  }

  /// A NUL-terminated Latin-1 string as text.
  private static func latin1(cString: UnsafePointer<CChar>) -> String {
    var count = 0
    while cString[count] != 0 { count += 1 }
    return latin1(UnsafeRawBufferPointer(start: cString, count: count))
  }

  /// The PNG's metadata; a text chunk that cannot be read as its type or keyword says (an `iTXt` whose text is
  /// not UTF-8, a raw profile that is not one) adds a line to `warnings`.
  private func pngMetadata(_ decoder: OpaquePointer, warnings: inout [String]) -> ImageMetadata {
    var metadata = ImageMetadata()
    var length = 0
    var name: UnsafePointer<CChar>?
    if let profile = spindle_png_decoder_icc(decoder, &length, &name), length > 0 {
      metadata.iccProfile = ImageMetadata.ICCProfile(
        name: name.map { Self.latin1(cString: $0) } ?? "ICC profile",  // Latin-1, as a PNG keyword
        data: Array(UnsafeBufferPointer(start: profile, count: length)))
    }
    if let exif = spindle_png_decoder_exif(decoder, &length), length > 0 {
      metadata.exif = ImageMetadata.jpegEXIFHeader + Array(UnsafeBufferPointer(start: exif, count: length))
    }
    var entries: [ImageMetadata.TextEntry] = []
    for index in 0..<spindle_png_decoder_text_count(decoder) {
      var chunk = spindle_png_text()
      guard spindle_png_decoder_text(decoder, index, &chunk) != 0, let keyword = chunk.keyword else { continue }
      let bytes =
        chunk.text.map { UnsafeRawBufferPointer(start: $0, count: chunk.text_length) }
        ?? UnsafeRawBufferPointer(start: nil, count: 0)
      // The keyword is Latin-1 in all three chunk types; the text is UTF-8 in `iTXt`, Latin-1 in `tEXt`/`zTXt`.
      let international = chunk.compression > 0
      let name = Self.latin1(cString: keyword)
      var text = international ? String(validating: bytes, as: UTF8.self) : Self.latin1(bytes)
      if text == nil {
        // Not UTF-8, so not what `iTXt` must hold: the likeliest writer's mistake is Latin-1, which keeps every
        // byte as a character (U+FFFD in their place would lose them). PNG output writes it as UTF-8.
        warnings.append("PNG iTXt chunk \"\(name)\" holds text that is not UTF-8; read as Latin-1")
        text = Self.latin1(bytes)
      }
      entries.append(
        ImageMetadata.TextEntry(
          keyword: name, text: text ?? "", isInternational: international,
          isCompressed: chunk.compression == 0 || chunk.compression == 2,
          language: chunk.language.map { String(cString: $0) } ?? "",
          translatedKeyword: chunk.translated_keyword.map { String(cString: $0) } ?? ""))
    }
    metadata.absorbPNGText(entries, problems: &warnings)
    var colour = spindle_png_colour()
    spindle_png_decoder_colour(decoder, &colour)
    if colour.has_gamma != 0 { metadata.gamma = Int(colour.gamma) }
    if colour.has_srgb != 0 { metadata.sRGBIntent = Int(colour.srgb_intent) }
    if colour.has_chrm != 0 {
      metadata.chromaticities = withUnsafeBytes(of: colour.chrm) { Array($0.bindMemory(to: Int32.self)).map(Int.init) }
    }
    if colour.has_phys != 0, colour.phys_x > 0, colour.phys_y > 0 {
      metadata.density = ImageMetadata.PixelDensity(
        x: Int(colour.phys_x), y: Int(colour.phys_y), unit: colour.phys_unit == 1 ? .perMetre : .aspectRatio)
    }
    return metadata
  }
}

/// What a file's header says: its format, its size and the layout ``ImageDecoder`` would decode it to.
public struct ImageInfo: Sendable, Equatable {
  /// The file format, from the magic bytes.
  public var format: ImageFormat
  /// Width in pixels.
  public var width: Int
  /// Height in pixels.
  public var height: Int
  /// The layout a decode produces (CMYK JPEGs report ``Image/Layout/rgb``).
  public var layout: Image.Layout
  /// Bits per sample a decode produces: 16 for a 16-bit PNG read with ``ImageDecoder/keeps16Bits``, else 8.
  public var bitDepth: Int

  /// Creates header information.
  public init(format: ImageFormat, width: Int, height: Int, layout: Image.Layout, bitDepth: Int = 8) {
    self.format = format
    self.width = width
    self.height = height
    self.layout = layout
    self.bitDepth = bitDepth
  }

  /// The size in bytes of the decoded pixels: `width * height * layout.channels * bitDepth / 8`.
  public var decodedByteCount: Int { width * height * layout.channels * (bitDepth / 8) }
}
