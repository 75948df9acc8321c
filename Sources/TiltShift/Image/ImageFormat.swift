/// A file format the codecs read and write.
public enum ImageFormat: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
  /// JPEG (JFIF/EXIF), read and written through libjpeg-turbo.
  case jpeg
  /// PNG, read and written through libpng.
  case png

  /// Detects the format from the first bytes (the magic number), never from a file name.
  ///
  /// Returns nil for anything that is neither a JPEG (`FF D8 FF`) nor a PNG signature.
  public init?(detecting bytes: some Collection<UInt8>) {
    let head = Array(bytes.prefix(8))
    if head.count >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF {
      self = .jpeg
    } else if head == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] {
      self = .png
    } else {
      return nil
    }
  }

  /// The format a file name's extension asks for (`.jpg`, `.jpeg`, `.png`, any case), for choosing an output format.
  public init?(pathExtensionOf path: String) {
    guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return nil }
    switch path[path.index(after: dot)...].lowercased() {
    case "jpg", "jpeg", "jpe": self = .jpeg
    case "png": self = .png
    default: return nil
    }
  }

  /// The largest width or height that can be written in the format: for JPEG 65,500, libjpeg's limit (a little
  /// under the 65,535 its header's 16-bit sizes hold); nil for PNG, which has no such limit.
  ///
  /// ```swift
  /// ImageFormat.jpeg.maxDimension  // 65_500
  /// ImageFormat.png.maxDimension   // nil
  /// ```
  public var maxDimension: Int? {
    switch self {
    case .jpeg: 65_500
    case .png: nil
    }
  }

  /// Throws ``ImageError/Kind/tooLargeForFormat(width:height:limit:format:)`` when a `width` × `height` image is
  /// wider or taller than the format stores (``maxDimension``), so that a batch can refuse it before decoding.
  ///
  /// ```swift
  /// try ImageFormat.jpeg.checkFits(width: 70_000, height: 8)  // throws: too large for JPEG, write PNG
  /// try ImageFormat.png.checkFits(width: 70_000, height: 8)   // returns
  /// ```
  public func checkFits(width: Int, height: Int) throws(ImageError) {
    guard let limit = maxDimension, width > limit || height > limit else { return }
    throw ImageError(.tooLargeForFormat(width: width, height: height, limit: limit, format: self))
  }

  /// The usual file extension, without the dot.
  public var fileExtension: String {
    switch self {
    case .jpeg: "jpg"
    case .png: "png"
    }
  }

  /// The library that reads and writes the format, named in error messages after the plain words.
  public var codecName: String {
    switch self {
    case .jpeg: "libjpeg"
    case .png: "libpng"
    }
  }

  /// The format's usual name: "JPEG" or "PNG".
  public var description: String {
    switch self {
    case .jpeg: "JPEG"
    case .png: "PNG"
    }
  }
}
