/// Byte transposes of 16 × 16 blocks with SSE2-style unpacks: the horizontal passes' slabs moved this way before the
/// C transposes; ``SlabTranspose/referenceGather(_:rows:)`` still does.
///
/// Swift's `SIMD16<UInt8>` built element by element from two vectors' lanes lowers to one `punpck*` per
/// step (LLVM turns the inserts into a shuffle), so a 16 × 16 transpose is 64 unpacks on registers instead of
/// 256 byte loads and stores with a row stride between them.
enum ByteTranspose {
  typealias Vector = SIMD16<UInt8>

  /// Transposes the 16 × 16 block whose row `k` is `load(k)`: calls `store(j, column j)` for `j` in `0..<16`,
  /// where byte `k` of column `j` is byte `j` of row `k`.
  @inline(__always)
  static func block(_ load: (Int) -> Vector, _ store: (Int, Vector) -> Void) {
    let r0 = load(0)
    let r1 = load(1)
    let r2 = load(2)
    let r3 = load(3)
    let r4 = load(4)
    let r5 = load(5)
    let r6 = load(6)
    let r7 = load(7)
    let r8 = load(8)
    let r9 = load(9)
    let r10 = load(10)
    let r11 = load(11)
    let r12 = load(12)
    let r13 = load(13)
    let r14 = load(14)
    let r15 = load(15)
    // Bytes of row pairs interleaved: b(m) = rows 2m, 2m+1 of columns 0...7, b(m + 8) of columns 8...15.
    let b0 = lo8(r0, r1)
    let b8 = hi8(r0, r1)
    let b1 = lo8(r2, r3)
    let b9 = hi8(r2, r3)
    let b2 = lo8(r4, r5)
    let b10 = hi8(r4, r5)
    let b3 = lo8(r6, r7)
    let b11 = hi8(r6, r7)
    let b4 = lo8(r8, r9)
    let b12 = hi8(r8, r9)
    let b5 = lo8(r10, r11)
    let b13 = hi8(r10, r11)
    let b6 = lo8(r12, r13)
    let b14 = hi8(r12, r13)
    let b7 = lo8(r14, r15)
    let b15 = hi8(r14, r15)
    // c: 4 rows × 4 columns each; d: 8 rows × 2 columns; the last unpack joins rows 0...7 with 8...15.
    let c0 = lo16(b0, b1)
    let c4 = hi16(b0, b1)
    let c1 = lo16(b2, b3)
    let c5 = hi16(b2, b3)
    let c2 = lo16(b4, b5)
    let c6 = hi16(b4, b5)
    let c3 = lo16(b6, b7)
    let c7 = hi16(b6, b7)
    let c8 = lo16(b8, b9)
    let c12 = hi16(b8, b9)
    let c9 = lo16(b10, b11)
    let c13 = hi16(b10, b11)
    let c10 = lo16(b12, b13)
    let c14 = hi16(b12, b13)
    let c11 = lo16(b14, b15)
    let c15 = hi16(b14, b15)
    let d0 = lo32(c0, c1)
    let d2 = hi32(c0, c1)
    let d1 = lo32(c2, c3)
    let d3 = hi32(c2, c3)
    let d4 = lo32(c4, c5)
    let d6 = hi32(c4, c5)
    let d5 = lo32(c6, c7)
    let d7 = hi32(c6, c7)
    let d8 = lo32(c8, c9)
    let d10 = hi32(c8, c9)
    let d9 = lo32(c10, c11)
    let d11 = hi32(c10, c11)
    let d12 = lo32(c12, c13)
    let d14 = hi32(c12, c13)
    let d13 = lo32(c14, c15)
    let d15 = hi32(c14, c15)
    store(0, lo64(d0, d1))
    store(1, hi64(d0, d1))
    store(2, lo64(d2, d3))
    store(3, hi64(d2, d3))
    store(4, lo64(d4, d5))
    store(5, hi64(d4, d5))
    store(6, lo64(d6, d7))
    store(7, hi64(d6, d7))
    store(8, lo64(d8, d9))
    store(9, hi64(d8, d9))
    store(10, lo64(d10, d11))
    store(11, hi64(d10, d11))
    store(12, lo64(d12, d13))
    store(13, hi64(d12, d13))
    store(14, lo64(d14, d15))
    store(15, hi64(d14, d15))
  }

  @inline(__always)
  private static func lo8(_ a: Vector, _ b: Vector) -> Vector {
    Vector(a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3], a[4], b[4], a[5], b[5], a[6], b[6], a[7], b[7])
  }

  @inline(__always)
  private static func hi8(_ a: Vector, _ b: Vector) -> Vector {
    Vector(a[8], b[8], a[9], b[9], a[10], b[10], a[11], b[11], a[12], b[12], a[13], b[13], a[14], b[14], a[15], b[15])
  }

  @inline(__always)
  private static func lo16(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD8<UInt16>.self), unsafeBitCast(b, to: SIMD8<UInt16>.self))
    return unsafeBitCast(SIMD8(a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]), to: Vector.self)
  }

  @inline(__always)
  private static func hi16(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD8<UInt16>.self), unsafeBitCast(b, to: SIMD8<UInt16>.self))
    return unsafeBitCast(SIMD8(a[4], b[4], a[5], b[5], a[6], b[6], a[7], b[7]), to: Vector.self)
  }

  @inline(__always)
  private static func lo32(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD4<UInt32>.self), unsafeBitCast(b, to: SIMD4<UInt32>.self))
    return unsafeBitCast(SIMD4(a[0], b[0], a[1], b[1]), to: Vector.self)
  }

  @inline(__always)
  private static func hi32(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD4<UInt32>.self), unsafeBitCast(b, to: SIMD4<UInt32>.self))
    return unsafeBitCast(SIMD4(a[2], b[2], a[3], b[3]), to: Vector.self)
  }

  @inline(__always)
  private static func lo64(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD2<UInt64>.self), unsafeBitCast(b, to: SIMD2<UInt64>.self))
    return unsafeBitCast(SIMD2(a[0], b[0]), to: Vector.self)
  }

  @inline(__always)
  private static func hi64(_ a: Vector, _ b: Vector) -> Vector {
    let (a, b) = (unsafeBitCast(a, to: SIMD2<UInt64>.self), unsafeBitCast(b, to: SIMD2<UInt64>.self))
    return unsafeBitCast(SIMD2(a[1], b[1]), to: Vector.self)
  }
}
