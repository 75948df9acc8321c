/// A box average of odd width with edge extension, in exact integer arithmetic.
///
/// Every pass rounds to 8 bits: `average(sum) = (sum + radius) / width` (round half up), computed with
/// a multiply and a shift (`multiplier = ⌈2⁴⁰ / width⌉`), exact for every sum of `width` bytes when
/// `width ≤ 65535`. Running sums make each pass O(1) per sample whatever the width.
struct BoxKernel {
  /// The odd box width.
  let width: Int
  /// `width / 2`: samples on each side of the centre.
  let radius: Int
  private let multiplier: UInt64

  init(width: Int) {
    precondition(width >= 1 && width % 2 == 1 && width <= 65535, "box width must be odd in 1...65535")
    self.width = width
    self.radius = width / 2
    self.multiplier = ((1 << 40) + UInt64(width) - 1) / UInt64(width)
  }

  /// The rounded mean of a window whose samples sum to `sum`.
  @inline(__always)
  func average(_ sum: UInt32) -> UInt8 {
    UInt8(truncatingIfNeeded: ((UInt64(sum) &+ UInt64(radius)) &* multiplier) &>> 40)
  }

  /// One horizontal pass over `count` samples `stride` bytes apart (one channel of a row), edge extended.
  @inline(__always)
  func blurLine(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, count: Int, stride: Int
  ) {
    let last = count - 1
    var sum = UInt32(radius + 1) &* UInt32(source[0])
    var index = 1
    while index <= radius {
      sum &+= UInt32(source[min(index, last) &* stride])
      index &+= 1
    }
    var x = 0
    while x < count {
      destination[x &* stride] = average(sum)
      let entering = UInt32(source[min(x &+ radius &+ 1, last) &* stride])
      let leaving = UInt32(source[max(x &- radius, 0) &* stride])
      sum = sum &+ entering &- leaving
      x &+= 1
    }
  }

  /// Three horizontal passes over one row of interleaved pixels, `source` → `destination`.
  ///
  /// `scratch` holds two rows (`2 * width * channels` bytes); the row stays in the cache for all passes.
  func blurRow(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, width: Int, channels: Int,
    scratch: UnsafeMutablePointer<UInt8>
  ) {
    let first = scratch
    let second = scratch + width * channels
    for channel in 0..<channels {
      blurLine(source + channel, first + channel, count: width, stride: channels)
      blurLine(first + channel, second + channel, count: width, stride: channels)
      blurLine(second + channel, destination + channel, count: width, stride: channels)
    }
  }

  /// One vertical pass over the byte columns `columns` for output rows `rows`, edge extended.
  ///
  /// Walks down the image row by row, updating `columns.count` running sums at once (`sums`), so
  /// every memory access is a contiguous run of a row. Reads source rows `rows` ± `radius` (clamped).
  func blurColumns(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, rowBytes: Int, height: Int,
    columns: Range<Int>, rows: Range<Int>, sums: UnsafeMutablePointer<UInt32>
  ) {
    let count = columns.count
    let last = height - 1
    let source = source + columns.lowerBound
    let destination = destination + columns.lowerBound
    sums.update(repeating: 0, count: count)
    for offset in -radius...radius {
      let row = source + min(max(rows.lowerBound + offset, 0), last) * rowBytes
      for j in 0..<count { sums[j] &+= UInt32(row[j]) }
    }
    for y in rows {
      let output = destination + y * rowBytes
      let entering = source + min(y + radius + 1, last) * rowBytes
      let leaving = source + max(y - radius, 0) * rowBytes
      for j in 0..<count {
        let sum = sums[j]
        output[j] = average(sum)
        sums[j] = sum &+ UInt32(entering[j]) &- UInt32(leaving[j])
      }
    }
  }
}
