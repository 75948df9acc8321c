/// A decoded raster image: 8-bit samples, interleaved channels, rows top to bottom without padding.
///
/// `Image` is a value type (copy-on-write through its pixel array) and `Sendable`, so a decoded image
/// can move between the queues of a pipeline. The pixel count always equals
/// `width * height * layout.channels`.
///
/// ```swift
/// var image = Image(width: 2, height: 1, layout: .rgb, pixels: [255, 0, 0, 0, 0, 255])
/// image.exif = nil  // drop the camera metadata
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
  /// The samples, `width * height * layout.channels` bytes, row after row.
  public private(set) var pixels: [UInt8]
  /// The raw payload of the source's EXIF APP1 segment (starting with `Exif\0\0`), if it had one.
  ///
  /// The JPEG encoder writes it back unchanged, so the orientation a phone recorded survives a
  /// decode → filter → encode round trip. PNG output ignores it.
  public var exif: [UInt8]?

  /// Creates an image from existing samples.
  ///
  /// - Precondition: `width` and `height` are at least 1 and `pixels.count == width * height * layout.channels`.
  public init(width: Int, height: Int, layout: Layout, pixels: [UInt8], exif: [UInt8]? = nil) {
    precondition(width > 0 && height > 0, "an image needs at least one pixel, got \(width)x\(height)")
    precondition(
      pixels.count == width * height * layout.channels,
      "\(width)x\(height) \(layout) needs \(width * height * layout.channels) bytes, got \(pixels.count)")
    self.width = width
    self.height = height
    self.layout = layout
    self.pixels = pixels
    self.exif = exif
  }

  /// Creates an image whose every sample is `value`.
  public init(width: Int, height: Int, layout: Layout, filledWith value: UInt8 = 0) {
    self.init(
      width: width, height: height, layout: layout,
      pixels: [UInt8](repeating: value, count: width * height * layout.channels))
  }

  /// Bytes per row: `width * layout.channels`.
  public var bytesPerRow: Int { width * layout.channels }

  /// Number of pixels, `width * height`.
  public var pixelCount: Int { width * height }

  /// The samples of the pixel at (`x`, `y`), `layout.channels` values.
  public subscript(x: Int, y: Int) -> ArraySlice<UInt8> {
    let start = (y * width + x) * layout.channels
    return pixels[start..<start + layout.channels]
  }

  /// Gives `body` mutable access to the samples without copying; the count cannot change.
  public mutating func withUnsafeMutablePixels<Result>(
    _ body: (UnsafeMutableBufferPointer<UInt8>) throws -> Result
  ) rethrows -> Result {
    try pixels.withUnsafeMutableBufferPointer { try body($0) }
  }
}
