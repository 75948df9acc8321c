#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// MD5 (RFC 1321), for the GUID that ties a JPEG's extended XMP to its main packet (the XMP specification's choice).
///
/// Not for security: only to name a block of bytes the way every XMP reader expects.
enum MD5 {
  private static let shifts: [UInt32] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15,
    21,
  ]
  private static let constants: [UInt32] = (0..<64).map { index in
    UInt32(truncatingIfNeeded: Int64((abs(sin(Double(index + 1))) * 4_294_967_296).rounded(.down)))
  }

  /// The 16-byte digest of `bytes`.
  static func digest(_ bytes: [UInt8]) -> [UInt8] {
    var message = bytes
    let bitLength = UInt64(bytes.count) &* 8
    message.append(0x80)
    while message.count % 64 != 56 { message.append(0) }
    for shift in stride(from: 0, to: 64, by: 8) { message.append(UInt8(truncatingIfNeeded: bitLength >> shift)) }
    var a0: UInt32 = 0x6745_2301
    var b0: UInt32 = 0xEFCD_AB89
    var c0: UInt32 = 0x98BA_DCFE
    var d0: UInt32 = 0x1032_5476
    var words = [UInt32](repeating: 0, count: 16)
    for block in stride(from: 0, to: message.count, by: 64) {
      for index in 0..<16 {
        let at = block + index * 4
        words[index] =
          UInt32(message[at]) | UInt32(message[at + 1]) << 8 | UInt32(message[at + 2]) << 16
          | UInt32(message[at + 3]) << 24
      }
      var a = a0
      var b = b0
      var c = c0
      var d = d0
      for index in 0..<64 {
        var f: UInt32
        let g: Int
        switch index {
        case 0..<16:
          f = (b & c) | (~b & d)
          g = index
        case 16..<32:
          f = (d & b) | (~d & c)
          g = (5 * index + 1) % 16
        case 32..<48:
          f = b ^ c ^ d
          g = (3 * index + 5) % 16
        default:
          f = c ^ (b | ~d)
          g = (7 * index) % 16
        }
        f = f &+ a &+ constants[index] &+ words[g]
        a = d
        d = c
        c = b
        b = b &+ (f << shifts[index] | f >> (32 - shifts[index]))
      }
      a0 = a0 &+ a
      b0 = b0 &+ b
      c0 = c0 &+ c
      d0 = d0 &+ d
    }
    return [a0, b0, c0, d0].flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * $0)) } }
  }

  /// The digest as 32 upper-case hex digits.
  static func hex(of bytes: [UInt8]) -> String {
    let digits = Array("0123456789ABCDEF")
    return String(digest(bytes).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
  }
}
