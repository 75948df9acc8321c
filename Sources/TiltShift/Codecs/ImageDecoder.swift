import CJPEG
import CPNG

/// Decodes JPEG and PNG bytes into ``Image`` values, refusing images above a pixel limit.
///
/// The format comes from the magic bytes, never from a file name. JPEG: baseline, progressive,
/// grayscale (→ ``Image/Layout/gray``), YCbCr/RGB (→ ``Image/Layout/rgb``), CMYK and YCCK (converted
/// to RGB, Adobe-inverted or not); the first EXIF APP1 segment is kept in ``Image/exif``. A truncated
/// JPEG is an error, not a gray-padded image. PNG: every colour type and bit depth becomes 8 bits per
/// sample — palette expands to RGB (RGBA with tRNS), gray with tRNS gains alpha, 16-bit samples are
/// scaled down, Adam7 interlacing is undone. Codec warnings are never printed.
///
/// The limit is checked against the header's dimensions before any pixel buffer is allocated, so a
/// tiny "decompression bomb" costs nothing. Every call is independent: one decoder value can be used
/// from many threads at once.
///
/// ```swift
/// let decoder = ImageDecoder(maxPixels: 50_000_000)
/// let image = try decoder.decode(contentsOf: "IMG_0001.jpg")
/// ```
public struct ImageDecoder: Sendable {
  /// The default pixel limit: 268 megapixels (16384 × 16384).
  public static let defaultMaxPixels = 16384 * 16384

  /// Images with more than this many pixels (width × height) are refused with ``ImageError/Kind/tooManyPixels(width:height:limit:)``.
  public var maxPixels: Int

  /// Creates a decoder with a pixel limit.
  public init(maxPixels: Int = ImageDecoder.defaultMaxPixels) {
    self.maxPixels = max(0, maxPixels)
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
    guard !bytes.isEmpty else { throw ImageError(.emptyFile) }
    guard let format = ImageFormat(detecting: bytes) else { throw ImageError(.notAnImage) }
    let result: Result<Image, ImageError> = bytes.withUnsafeBufferPointer { buffer in
      switch format {
      case .jpeg: decodeJPEG(buffer)
      case .png: decodePNG(buffer)
      }
    }
    return try result.get()
  }

  /// Reads only the header: format, dimensions and the layout a decode would produce.
  ///
  /// Cheap (no pixel is decoded), and subject to the same pixel limit, so a pipeline can budget memory
  /// (`width * height * layout.channels` bytes per decoded image) before decoding anything.
  public func info(_ bytes: [UInt8]) throws(ImageError) -> ImageInfo {
    guard !bytes.isEmpty else { throw ImageError(.emptyFile) }
    guard let format = ImageFormat(detecting: bytes) else { throw ImageError(.notAnImage) }
    let result: Result<ImageInfo, ImageError> = bytes.withUnsafeBufferPointer { data in
      var width: Int32 = 0
      var height: Int32 = 0
      var channels: Int32 = 0
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
          return .failure(jpegError(status, message))
        }
      case .png:
        guard let decoder = spindle_png_decoder_create(data.baseAddress, data.count) else {
          return .failure(ImageError(.corruptData(format: .png, message: "cannot create a decoder (out of memory)")))
        }
        defer { spindle_png_decoder_destroy(decoder) }
        status = spindle_png_decoder_read_header(decoder, UInt64(maxPixels), &width, &height, &channels)
        message = String(cString: spindle_png_decoder_message(decoder))
        if status != Int32(SPINDLE_PNG_OK) && status != Int32(SPINDLE_PNG_TOO_MANY_PIXELS) {
          return .failure(ImageError(.corruptData(format: .png, message: message)))
        }
      }
      if status != 0 {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0 else {
        return .failure(ImageError(.corruptData(format: format, message: "invalid image dimensions")))
      }
      return .success(ImageInfo(format: format, width: Int(width), height: Int(height), layout: layout))
    }
    return try result.get()
  }

  private func decodeJPEG(_ data: UnsafeBufferPointer<UInt8>) -> Result<Image, ImageError> {
    guard let decoder = spindle_jpeg_decoder_create(data.baseAddress, data.count) else {
      return .failure(ImageError(.corruptData(format: .jpeg, message: "cannot create a decoder (out of memory)")))
    }
    defer { spindle_jpeg_decoder_destroy(decoder) }
    func failure(_ status: Int32) -> ImageError {
      let message = String(cString: spindle_jpeg_decoder_message(decoder))
      return jpegError(status, message)
    }
    var width: Int32 = 0
    var height: Int32 = 0
    var channels: Int32 = 0
    let status = spindle_jpeg_decoder_read_header(decoder, UInt64(maxPixels), &width, &height, &channels)
    guard status == Int32(SPINDLE_JPEG_OK) else {
      if status == Int32(SPINDLE_JPEG_TOO_MANY_PIXELS) {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      return .failure(failure(status))
    }
    guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0 else {
      return .failure(ImageError(.corruptData(format: .jpeg, message: "invalid image dimensions")))
    }
    let count = Int(width) * Int(height) * Int(channels)
    var readStatus = Int32(SPINDLE_JPEG_OK)
    let pixels = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
      readStatus = spindle_jpeg_decoder_read_pixels(decoder, buffer.baseAddress, count)
      // On failure the contents are discarded; claiming them initialized keeps the array valid (UInt8 is trivial).
      initialized = count
    }
    guard readStatus == Int32(SPINDLE_JPEG_OK) else { return .failure(failure(readStatus)) }
    var exifLength = 0
    var exif: [UInt8]?
    if let exifBytes = spindle_jpeg_decoder_exif(decoder, &exifLength), exifLength > 0 {
      exif = Array(UnsafeBufferPointer(start: exifBytes, count: exifLength))
    }
    return .success(Image(width: Int(width), height: Int(height), layout: layout, pixels: pixels, exif: exif))
  }

  private func jpegError(_ status: Int32, _ message: String) -> ImageError {
    switch status {
    case Int32(SPINDLE_JPEG_UNSUPPORTED): ImageError(.unsupported(format: .jpeg, message: message))
    default: ImageError(.corruptData(format: .jpeg, message: message))
    }
  }

  private func decodePNG(_ data: UnsafeBufferPointer<UInt8>) -> Result<Image, ImageError> {
    guard let decoder = spindle_png_decoder_create(data.baseAddress, data.count) else {
      return .failure(ImageError(.corruptData(format: .png, message: "cannot create a decoder (out of memory)")))
    }
    defer { spindle_png_decoder_destroy(decoder) }
    func failure() -> ImageError {
      ImageError(.corruptData(format: .png, message: String(cString: spindle_png_decoder_message(decoder))))
    }
    var width: Int32 = 0
    var height: Int32 = 0
    var channels: Int32 = 0
    let status = spindle_png_decoder_read_header(decoder, UInt64(maxPixels), &width, &height, &channels)
    guard status == Int32(SPINDLE_PNG_OK) else {
      if status == Int32(SPINDLE_PNG_TOO_MANY_PIXELS) {
        return .failure(ImageError(.tooManyPixels(width: Int(width), height: Int(height), limit: maxPixels)))
      }
      return .failure(failure())
    }
    guard let layout = Image.Layout(channels: Int(channels)), width > 0, height > 0 else {
      return .failure(ImageError(.corruptData(format: .png, message: "invalid image dimensions")))
    }
    let count = Int(width) * Int(height) * Int(channels)
    var readStatus = Int32(SPINDLE_PNG_OK)
    let pixels = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
      readStatus = spindle_png_decoder_read_pixels(decoder, buffer.baseAddress, count)
      initialized = count
    }
    guard readStatus == Int32(SPINDLE_PNG_OK) else { return .failure(failure()) }
    return .success(Image(width: Int(width), height: Int(height), layout: layout, pixels: pixels))
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

  /// The size in bytes of the decoded pixels: `width * height * layout.channels`.
  public var decodedByteCount: Int { width * height * layout.channels }
}
