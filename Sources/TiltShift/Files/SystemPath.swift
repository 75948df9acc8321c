/// A lossless mapping between the bytes of a file system path and a `String`, for names that are not valid UTF-8.
///
/// Linux file names are bytes: `\xFF.jpg` is a legal name, but a Swift `String` holds only Unicode scalars, so
/// decoding it as UTF-8 (`String(decoding:as:)`) turns the byte into U+FFFD and the path no longer names the file.
/// Here each byte that is not part of a valid UTF-8 sequence becomes one private-use scalar, U+10FF80…U+10FFFF for
/// the bytes 0x80…0xFF, and ``bytes(of:)`` turns it back into that byte, so every path round-trips exactly. A name
/// that really contains one of those scalars has its four bytes escaped one by one, so the mapping is one-to-one.
///
/// Every path ``ImageFile`` hands to the system goes through ``withCString(_:_:)``; a path of valid UTF-8 without
/// such scalars is passed as its UTF-8 bytes, as before. ``displayed(_:)`` shows an escaped byte as `\xFF` in
/// messages.
///
/// ```swift
/// let name = SystemPath.string(decoding: [0xFF, 0x2E, 0x6A, 0x70, 0x67])  // the file "\xFF.jpg"
/// SystemPath.bytes(of: name)  // [0xFF, 0x2E, 0x6A, 0x70, 0x67]
/// SystemPath.displayed(name)  // "\\xFF.jpg"
/// ```
public enum SystemPath {
  /// The scalar that stands for byte 0x80; byte `b` is `escapeBase + b - 0x80`.
  static let escapeBase: UInt32 = 0x10_FF80

  /// The path that the bytes `bytes` name: their UTF-8, with each byte of an invalid sequence escaped.
  public static func string<Bytes: Collection<UInt8>>(decoding bytes: Bytes) -> String {
    let bytes = Array(bytes)
    var scalars = String.UnicodeScalarView()
    func escape(_ byte: UInt8) { scalars.append(Unicode.Scalar(escapeBase + UInt32(byte) - 0x80)!) }
    var index = 0
    while index < bytes.count {
      let lead = bytes[index]
      if lead < 0x80 {
        scalars.append(Unicode.Scalar(lead))
        index += 1
        continue
      }
      let (length, leadBits, lowest): (Int, UInt8, UInt32) =
        switch lead {
        case 0xC2...0xDF: (2, 0x1F, 0x80)
        case 0xE0...0xEF: (3, 0x0F, 0x800)
        case 0xF0...0xF4: (4, 0x07, 0x1_0000)
        default: (0, 0, 0)
        }
      var value = UInt32(lead & leadBits)
      var valid = length > 0 && index + length <= bytes.count
      if valid {
        for offset in 1..<length {
          let byte = bytes[index + offset]
          guard byte & 0xC0 == 0x80 else {
            valid = false
            break
          }
          value = value << 6 | UInt32(byte & 0x3F)
        }
      }
      if valid, value >= lowest, value < escapeBase, let scalar = Unicode.Scalar(value) {
        scalars.append(scalar)
        index += length
      } else {
        escape(lead)
        index += 1
      }
    }
    return String(scalars)
  }

  /// The bytes `path` stands for: its UTF-8, with each escape scalar back as the byte it stands for.
  public static func bytes(of path: String) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(path.utf8.count)
    for scalar in path.unicodeScalars {
      if scalar.value >= escapeBase {
        bytes.append(UInt8(scalar.value - escapeBase + 0x80))
      } else {
        bytes.append(contentsOf: UTF8.encode(scalar)!)
      }
    }
    return bytes
  }

  /// Whether `path` holds a byte that is not valid UTF-8 (an escape scalar).
  public static func hasEscapedBytes(_ path: String) -> Bool {
    path.unicodeScalars.contains { $0.value >= escapeBase }
  }

  /// Calls `body` with `path`'s bytes as a NUL-terminated C string, for a system call.
  public static func withCString<Result>(
    _ path: String, _ body: (UnsafePointer<CChar>) throws -> Result
  ) rethrows -> Result {
    guard hasEscapedBytes(path) else { return try path.withCString(body) }
    let bytes = bytes(of: path) + [0]
    return try bytes.withUnsafeBufferPointer { buffer in
      try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
    }
  }

  /// `path` for a message: each escaped byte shown as `\xFF` (two upper-case hex digits), the rest as it is.
  public static func displayed(_ path: String) -> String {
    guard hasEscapedBytes(path) else { return path }
    var shown = ""
    for scalar in path.unicodeScalars {
      if scalar.value >= escapeBase {
        let byte = String(scalar.value - escapeBase + 0x80, radix: 16, uppercase: true)
        shown += "\\x" + byte
      } else {
        shown.unicodeScalars.append(scalar)
      }
    }
    return shown
  }

  /// The number of bytes `path` has on disk (its UTF-8 count when it holds no escaped byte).
  public static func byteCount(of path: String) -> Int {
    hasEscapedBytes(path) ? bytes(of: path).count : path.utf8.count
  }
}
