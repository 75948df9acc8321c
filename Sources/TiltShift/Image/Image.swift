/// A decoded raster image: 8- or 16-bit samples, interleaved channels, rows top to bottom without padding.
///
/// `Image` is a value type (copy-on-write through its pixel array) and `Sendable`, so a decoded image
/// can move between the queues of a pipeline. The byte count always equals
/// `width * height * layout.channels * bitDepth / 8`; 16-bit samples are stored in the host's byte order
/// (read them with ``samples16``). The file's metadata (profile, EXIF, XMP, IPTC, text) travels in ``metadata``.
///
/// ```swift
/// var image = Image(width: 2, height: 1, layout: .rgb, pixels: [255, 0, 0, 0, 0, 255])
/// image.exif = nil  // drop the camera metadata
/// let deep = Image(width: 1, height: 1, layout: .gray, samples16: [65535])
/// ```
public struct Image: Sendable, Equatable {
  /// How the samples of one pixel are laid out.
  public enum Layout: Int, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// One luminance sample per pixel.
    case gray = 1
    /// Luminance then alpha (not premultiplied).
    case grayAlpha = 2
    /// Red, green, blue.
    case rgb = 3
    /// Red, green, blue, alpha (not premultiplied).
    case rgba = 4

    /// Samples per pixel, 1 to 4.
    public var channels: Int { rawValue }

    /// Whether the last sample of each pixel is alpha.
    public var hasAlpha: Bool { self == .grayAlpha || self == .rgba }

    /// The layout with `channels` samples per pixel, or nil outside 1...4.
    public init?(channels: Int) { self.init(rawValue: channels) }

    /// A short name: "gray", "gray+alpha", "RGB" or "RGBA".
    public var description: String {
      switch self {
      case .gray: "gray"
      case .grayAlpha: "gray+alpha"
      case .rgb: "RGB"
      case .rgba: "RGBA"
      }
    }
  }

  /// Width in pixels (at least 1).
  public let width: Int
  /// Height in pixels (at least 1).
  public let height: Int
  /// The channel layout of every pixel.
  public let layout: Layout
  /// Bits per sample: 8, or 16 (a 16-bit PNG decoded with ``ImageDecoder/keeps16Bits``).
  public let bitDepth: Int
  /// The samples, `width * height * layout.channels * bitDepth / 8` bytes, row after row.
  ///
  /// For 16-bit images each sample is two bytes in the host's byte order.
  public private(set) var pixels: [UInt8]
  /// What the file said about the picture besides its pixels: colour profile, EXIF, XMP, IPTC, text, density.
  public var metadata: ImageMetadata

  /// The raw payload of the source's EXIF block (starting with `Exif\0\0`), if it had one.
  ///
  /// The same as `metadata.exif`. The encoders write it back unchanged (JPEG APP1, PNG `eXIf`), so the
  /// orientation a phone recorded survives a decode → filter → encode round trip.
  public var exif: [UInt8]? {
    get { metadata.exif }
    set { metadata.exif = newValue }
  }

  /// Creates an 8-bit image from existing samples.
  ///
  /// - Precondition: `width` and `height` are at least 1 and `pixels.count == width * height * layout.channels`.
  public init(width: Int, height: Int, layout: Layout, pixels: [UInt8], exif: [UInt8]? = nil) {
    self.init(width: width, height: height, layout: layout, bitDepth: 8, bytes: pixels, metadata: ImageMetadata())
    self.exif = exif
  }

  /// Creates an image from raw bytes of `bitDepth` (8 or 16, host byte order) samples, with its metadata.
  ///
  /// - Precondition: `bytes.count == width * height * layout.channels * bitDepth / 8`.
  public init(width: Int, height: Int, layout: Layout, bitDepth: Int, bytes: [UInt8], metadata: ImageMetadata) {
    precondition(width > 0 && height > 0, "an image needs at least one pixel, got \(width)x\(height)")
    precondition(bitDepth == 8 || bitDepth == 16, "bit depth must be 8 or 16, got \(bitDepth)")
    let count = width * height * layout.channels * (bitDepth / 8)
    precondition(bytes.count == count, "\(width)x\(height) \(layout) needs \(count) bytes, got \(bytes.count)")
    self.width = width
    self.height = height
    self.layout = layout
    self.bitDepth = bitDepth
    self.pixels = bytes
    self.metadata = metadata
  }

  /// Creates a 16-bit image from samples (`width * height * layout.channels` of them).
  public init(width: Int, height: Int, layout: Layout, samples16: [UInt16], metadata: ImageMetadata = ImageMetadata()) {
    precondition(
      samples16.count == width * height * layout.channels,
      "\(width)x\(height) \(layout) needs \(width * height * layout.channels) samples, got \(samples16.count)")
    let bytes = samples16.withUnsafeBytes { Array($0) }
    self.init(width: width, height: height, layout: layout, bitDepth: 16, bytes: bytes, metadata: metadata)
  }

  /// The samples of a 16-bit image, row after row (for an 8-bit image, each sample times 257).
  public var samples16: [UInt16] {
    if bitDepth == 16 {
      return pixels.withUnsafeBytes { Array($0.bindMemory(to: UInt16.self)) }
    }
    return pixels.map { UInt16($0) &* 257 }
  }

  /// This image with other pixels of the same size, layout and depth, keeping the metadata.
  public func replacingPixels(_ bytes: [UInt8]) -> Image {
    Image(width: width, height: height, layout: layout, bitDepth: bitDepth, bytes: bytes, metadata: metadata)
  }

  /// Creates an image whose every sample is `value`.
  public init(width: Int, height: Int, layout: Layout, filledWith value: UInt8 = 0) {
    self.init(
      width: width, height: height, layout: layout,
      pixels: [UInt8](repeating: value, count: width * height * layout.channels))
  }

  /// Bytes per row: `width * layout.channels * bitDepth / 8`.
  public var bytesPerRow: Int { width * layout.channels * (bitDepth / 8) }

  /// Number of pixels, `width * height`.
  public var pixelCount: Int { width * height }

  /// The bytes of the pixel at (`x`, `y`): `layout.channels` samples (twice as many bytes when 16-bit).
  public subscript(x: Int, y: Int) -> ArraySlice<UInt8> {
    let size = layout.channels * (bitDepth / 8)
    let start = (y * width + x) * size
    return pixels[start..<start + size]
  }

  /// The samples, moved out of an image that is not used again (no second reference to them is left behind).
  consuming func intoPixels() -> [UInt8] { pixels }

  /// Gives `body` mutable access to the samples without copying; the count cannot change.
  public mutating func withUnsafeMutablePixels<Result>(
    _ body: (UnsafeMutableBufferPointer<UInt8>) throws -> Result
  ) rethrows -> Result {
    try pixels.withUnsafeMutableBufferPointer { try body($0) }
  }
}
