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
