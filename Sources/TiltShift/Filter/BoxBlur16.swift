/// The box average of ``BoxKernel`` for 16-bit samples, in exact integer arithmetic.
///
/// Every pass rounds to 16 bits: `average(sum) = (sum + radius) / width` (round half up), computed as the high
/// word of a 64 × 64-bit multiply by `⌈2⁶⁴ / width⌉`. That is exact for every sum of `width` 16-bit samples:
/// the error term `sum · (multiplier · width − 2⁶⁴)` stays below 2⁴⁰ (sum < 2²⁸, width < 2¹²), far under 2⁶⁴.
struct BoxKernel16 {
  /// The odd box width.
  let width: Int
  /// `width / 2`.
  let radius: Int
  private let multiplier: UInt64

  init(width: Int) {
    precondition(width >= 3 && width % 2 == 1 && width <= BoxKernel.maximumWidth, "box width must be odd in 3...4095")
    self.width = width
    self.radius = width / 2
    self.multiplier = UInt64.max / UInt64(width) + 1
  }

  /// The rounded mean of a window whose samples sum to `sum`.
  @inline(__always)
  func average(_ sum: UInt32) -> UInt16 {
    UInt16(truncatingIfNeeded: UInt64(sum &+ UInt32(radius)).multipliedFullWidth(by: multiplier).high)
  }

  /// One horizontal pass over a row of `count` pixels of `channels` interleaved samples, edge extended.
  func blurRow(
    _ source: UnsafePointer<UInt16>, _ destination: UnsafeMutablePointer<UInt16>, count: Int, channels: Int
  ) {
    let last = count - 1
    for channel in 0..<channels {
      var sum: UInt32 = 0
      for offset in -radius...radius { sum &+= UInt32(source[min(max(offset, 0), last) * channels + channel]) }
      for x in 0..<count {
        destination[x * channels + channel] = average(sum)
        let entering = source[min(x + radius + 1, last) * channels + channel]
        let leaving = source[max(x - radius, 0) * channels + channel]
        sum = sum &+ UInt32(entering) &- UInt32(leaving)
      }
    }
  }

  /// One vertical pass over the sample columns `columns` of every row, edge extended; `sums` holds
  /// `columns.count` running sums.
  func blurColumns(
    _ source: UnsafePointer<UInt16>, _ destination: UnsafeMutablePointer<UInt16>, rowSamples: Int, height: Int,
    columns: Range<Int>, sums: UnsafeMutablePointer<UInt32>
  ) {
    let last = height - 1
    let count = columns.count
    let source = source + columns.lowerBound
    let destination = destination + columns.lowerBound
    sums.update(repeating: 0, count: count)
    for offset in -radius...radius {
      let row = source + min(max(offset, 0), last) * rowSamples
      for j in 0..<count { sums[j] &+= UInt32(row[j]) }
    }
    for y in 0..<height {
      let output = destination + y * rowSamples
      let entering = source + min(y + radius + 1, last) * rowSamples
      let leaving = source + max(y - radius, 0) * rowSamples
      for j in 0..<count {
        let sum = sums[j]
        output[j] = average(sum)
        sums[j] = sum &+ UInt32(entering[j]) &- UInt32(leaving[j])
      }
    }
  }
}
