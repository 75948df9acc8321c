extension Image {
  /// The EXIF orientation tag (1...8) from ``exif``, or nil when there is none or it is unreadable.
  ///
  /// 1 is upright; 3 is upside down; 6 and 8 are quarter turns (portrait phone photos); 2, 4, 5 and 7
  /// are mirrored variants. The pixels are stored as shot; viewers apply the rotation.
  public var exifOrientation: Int? {
    guard let exif else { return nil }
    return EXIFReader(exif).orientation
  }
}

/// A bounds-checked reader of the TIFF structure inside an EXIF APP1 payload.
struct EXIFReader {
  private let bytes: [UInt8]

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  /// Tag 0x0112 of IFD0, when present and in 1...8.
  var orientation: Int? {
    let tiff = 6  // after "Exif\0\0"
    guard bytes.count >= tiff + 8, bytes[0..<6].elementsEqual(Array("Exif".utf8) + [0, 0]) else { return nil }
    let little: Bool
    switch (bytes[tiff], bytes[tiff + 1]) {
    case (0x49, 0x49): little = true
    case (0x4D, 0x4D): little = false
    default: return nil
    }
    func u16(_ at: Int) -> Int? {
      guard at >= 0, at + 2 <= bytes.count else { return nil }
      let a = Int(bytes[at])
      let b = Int(bytes[at + 1])
      return little ? a | b << 8 : a << 8 | b
    }
    func u32(_ at: Int) -> Int? {
      guard let low = u16(little ? at : at + 2), let high = u16(little ? at + 2 : at) else { return nil }
      return low | high << 16
    }
    guard u16(tiff + 2) == 42, let ifd = u32(tiff + 4), let entries = u16(tiff + ifd) else { return nil }
    for index in 0..<entries {
      let entry = tiff + ifd + 2 + index * 12
      guard let tag = u16(entry) else { return nil }
      if tag == 0x0112 {
        guard u16(entry + 2) == 3, let value = u16(entry + 8), (1...8).contains(value) else { return nil }
        return value
      }
    }
    return nil
  }
}

/// Builds the smallest EXIF block that says only an orientation.
enum EXIFWriter {
  /// `Exif\0\0`, a big-endian TIFF header and IFD0 with one Orientation entry.
  static func orientationBlock(_ orientation: Int) -> [UInt8] {
    Array("Exif".utf8) + [0, 0] + [0x4D, 0x4D, 0, 42, 0, 0, 0, 8] + [0, 1]
      + [0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, UInt8(clamping: orientation), 0, 0] + [0, 0, 0, 0]
  }
}

extension EXIFWriter {
  /// `exif` (with its `Exif\0\0` prefix) saying `orientation` in IFD0, or nil when it is not a readable TIFF
  /// structure.
  ///
  /// An Orientation entry already there gets the new value in place. Otherwise IFD0 is written again, one entry
  /// longer, after the end of the block, and the header points to it: nothing else moves, so every offset in the
  /// block stays right (the old IFD0 is left behind, unreferenced).
  static func setting(orientation: Int, in exif: [UInt8]) -> [UInt8]? {
    let tiff = 6
    guard (1...8).contains(orientation), exif.count >= tiff + 8, exif.starts(with: Array("Exif".utf8) + [0, 0])
    else { return nil }
    let little: Bool
    switch (exif[tiff], exif[tiff + 1]) {
    case (0x49, 0x49): little = true
    case (0x4D, 0x4D): little = false
    default: return nil
    }
    func u16(_ at: Int) -> Int {
      little ? Int(exif[at]) | Int(exif[at + 1]) << 8 : Int(exif[at]) << 8 | Int(exif[at + 1])
    }
    func bytes16(_ value: Int) -> [UInt8] {
      little ? [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] : [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
    func bytes32(_ value: Int) -> [UInt8] {
      little
        ? bytes16(value & 0xFFFF) + bytes16(value >> 16 & 0xFFFF)
        : bytes16(value >> 16 & 0xFFFF) + bytes16(value & 0xFFFF)
    }
    guard u16(tiff + 2) == 42 else { return nil }
    let ifd = little ? u16(tiff + 4) | u16(tiff + 6) << 16 : u16(tiff + 4) << 16 | u16(tiff + 6)
    guard ifd >= 8, tiff + ifd + 2 <= exif.count else { return nil }
    let count = u16(tiff + ifd)
    let entries = tiff + ifd + 2
    guard entries + count * 12 + 4 <= exif.count else { return nil }
    // Tag 0x0112, type SHORT, one value, which sits in the first two bytes of the value field.
    let orientationEntry = bytes16(0x0112) + bytes16(3) + bytes32(1) + bytes16(orientation) + [0, 0]
    var block = exif
    var list: [ArraySlice<UInt8>] = []
    for index in 0..<count {
      let start = entries + index * 12
      if u16(start) == 0x0112 {
        block.replaceSubrange(start..<start + 12, with: orientationEntry)
        return block
      }
      list.append(exif[start..<start + 12])
    }
    let position = list.firstIndex { u16($0.startIndex) > 0x0112 } ?? list.count
    list.insert(orientationEntry[...], at: position)
    if (block.count - tiff) % 2 == 1 { block.append(0) }  // an IFD starts on a word boundary
    let newIFD = block.count - tiff
    guard newIFD + 2 + list.count * 12 + 4 <= Int(UInt32.max), list.count <= 0xFFFF else { return nil }
    block += bytes16(list.count) + list.flatMap { $0 } + exif[entries + count * 12..<entries + count * 12 + 4]
    block.replaceSubrange(tiff + 4..<tiff + 8, with: bytes32(newIFD))
    return block
  }
}
