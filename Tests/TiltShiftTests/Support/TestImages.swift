@testable import TiltShift

/// Deterministic test pictures and hand-built PNG files.
enum TestImages {
  /// A smooth-plus-texture picture (not noise alone), so JPEG round trips stay close.
  static func picture(width: Int, height: Int, layout: Image.Layout, seed: UInt32 = 1) -> Image {
    var state = seed
    var pixels = [UInt8](repeating: 0, count: width * height * layout.channels)
    for y in 0..<height {
      for x in 0..<width {
        for c in 0..<layout.channels {
          state = state &* 1_664_525 &+ 1_013_904_223
          let smooth = (x * 255 / max(1, width - 1) + y * 128 / max(1, height - 1) + c * 60) % 256
          let noise = Int(state >> 29)  // 0...7
          pixels[(y * width + x) * layout.channels + c] = UInt8(clamping: smooth / 2 + noise * 2)
        }
      }
    }
    return Image(width: width, height: height, layout: layout, pixels: pixels)
  }

  /// Random samples, for exact filter comparisons.
  static func noise(width: Int, height: Int, layout: Image.Layout, seed: UInt32 = 7) -> Image {
    var state = seed
    let pixels = (0..<width * height * layout.channels).map { _ in
      state = state &* 1_664_525 &+ 1_013_904_223
      return UInt8(truncatingIfNeeded: state >> 24)
    }
    return Image(width: width, height: height, layout: layout, pixels: pixels)
  }

  /// An EXIF APP1 payload (big-endian TIFF) holding only an orientation tag.
  static func exif(orientation: UInt8) -> [UInt8] {
    Array("Exif".utf8) + [0, 0] + [0x4D, 0x4D, 0, 42, 0, 0, 0, 8]  // TIFF header, IFD0 at 8
      + [0, 1]  // one entry
      + [0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0]  // Orientation SHORT
      + [0, 0, 0, 0]  // no next IFD
  }

  // MARK: - A minimal PNG writer (stored deflate blocks), for colour types our encoder never writes

  /// A PNG file from raw scanlines (filter byte 0 is added here), with optional extra chunks before IDAT.
  static func png(
    width: Int, height: Int, bitDepth: UInt8, colorType: UInt8, rows: [[UInt8]], before: [(String, [UInt8])] = []
  ) -> [UInt8] {
    var raw: [UInt8] = []
    for row in rows { raw += [0] + row }
    var header: [UInt8] = []
    header += be32(UInt32(width)) + be32(UInt32(height)) + [bitDepth, colorType, 0, 0, 0]
    var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    file += chunk("IHDR", header)
    for (type, data) in before { file += chunk(type, data) }
    file += chunk("IDAT", zlibStored(raw))
    file += chunk("IEND", [])
    return file
  }

  static func be32(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
  }

  static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    return be32(UInt32(data.count)) + body + be32(crc32(body))
  }

  static func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
      crc ^= UInt32(byte)
      for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
  }

  static func zlibStored(_ data: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x78, 0x01]
    var offset = 0
    repeat {
      let length = min(65535, data.count - offset)
      let final: UInt8 = offset + length == data.count ? 1 : 0
      out += [final, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
      out += data[offset..<offset + length]
      offset += length
    } while offset < data.count
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in data {
      a = (a + UInt32(byte)) % 65521
      b = (b + a) % 65521
    }
    return out + be32(b << 16 | a)
  }
}
