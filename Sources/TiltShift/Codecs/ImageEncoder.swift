import CJPEG
import CPNG

/// Encodes an ``Image`` as JPEG or PNG bytes.
///
/// JPEG has no alpha: gray+alpha is written as gray and RGBA as RGB (alpha dropped, not composited).
/// The image's ``Image/exif`` segment is written back right after the start-of-image marker, so the
/// camera's orientation and metadata survive. PNG keeps every layout as is, alpha included, and ignores EXIF.
/// Every call is independent: one encoder value can be used from many threads at once.
///
/// ```swift
/// let bytes = try ImageEncoder(format: .jpeg, jpegQuality: 88).encode(image)
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

  /// Creates an encoder for `format`.
  public init(
    format: ImageFormat,
    jpegQuality: Int = 90,
    jpegProgressive: Bool = false,
    pngCompressionLevel: Int = 6,
    pngInterlaced: Bool = false
  ) {
    self.format = format
    self.jpegQuality = min(100, max(1, jpegQuality))
    self.jpegProgressive = jpegProgressive
    self.pngCompressionLevel = min(9, max(0, pngCompressionLevel))
    self.pngInterlaced = pngInterlaced
  }

  /// Encodes `image`; throws ``ImageError/Kind/encodingFailed(format:message:)`` with the codec's message.
  public func encode(_ image: Image) throws(ImageError) -> [UInt8] {
    var output: UnsafeMutablePointer<UInt8>?
    var length = 0
    var message = [CChar](repeating: 0, count: 256)
    let status: Int32 = image.pixels.withUnsafeBufferPointer { pixels in
      message.withUnsafeMutableBufferPointer { text in
        switch format {
        case .jpeg:
          let exif = image.exif ?? []
          return exif.withUnsafeBufferPointer { exifBytes in
            spindle_jpeg_encode(
              pixels.baseAddress, Int32(image.width), Int32(image.height), Int32(image.layout.channels),
              Int32(jpegQuality), jpegProgressive ? 1 : 0, exifBytes.count > 0 ? exifBytes.baseAddress : nil,
              exifBytes.count, &output, &length, text.baseAddress, text.count)
          }
        case .png:
          return spindle_png_encode(
            pixels.baseAddress, Int32(image.width), Int32(image.height), Int32(image.layout.channels),
            Int32(pngCompressionLevel), pngInterlaced ? 1 : 0, &output, &length, text.baseAddress, text.count)
        }
      }
    }
    guard status == 0, let output else {
      let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      throw ImageError(.encodingFailed(format: format, message: text))
    }
    defer {
      switch format {
      case .jpeg: spindle_jpeg_free(output)
      case .png: spindle_png_free(output)
      }
    }
    return Array(UnsafeBufferPointer(start: output, count: length))
  }
}
