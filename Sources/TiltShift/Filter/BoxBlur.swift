/// A box average of odd width with edge extension, in exact integer arithmetic.
///
/// Every pass rounds to 8 bits: `average(sum) = (sum + radius) / width` (round half up), computed with
/// a 32 × 32 → 64-bit multiply and a shift (`multiplier = ⌈2³² / width⌉`), which is exact for every
/// sum of `width` bytes when `width < 4096` (the error term stays below 2³² while sum < 256 · width).
/// Running sums make each pass O(1) per sample whatever the width.
struct BoxKernel {
  /// The largest supported box width (a radius of about 2170 pixels).
  static let maximumWidth = 4095

  /// The odd box width.
  let width: Int
  /// `width / 2`: samples on each side of the centre.
  let radius: Int
  private let multiplier: UInt64
  private let rounding: UInt32
  /// For narrow boxes, a 16-bit reciprocal (`(sum + radius) · multiplier >> 16 >> shift`), checked exact
  /// for every possible sum when the kernel is made; nil when no 16-bit reciprocal is exact.
  private let narrow: (multiplier: UInt32, shift: UInt16)?

  init(width: Int) {
    precondition(width >= 1 && width % 2 == 1 && width <= Self.maximumWidth, "box width must be odd in 1...4095")
    self.width = width
    self.radius = width / 2
    self.multiplier = ((1 << 32) + UInt64(width) - 1) / UInt64(width)
    self.rounding = UInt32(width / 2)
    self.narrow = Self.narrowReciprocal(width)
  }

  /// A 16-bit multiplier and shift that divide every `sum + radius` (sum ≤ 255 · width) by `width` exactly.
  static func narrowReciprocal(_ width: Int) -> (multiplier: UInt32, shift: UInt16)? {
    let radius = width / 2
    let largest = 255 * width + radius
    guard largest <= Int(UInt16.max) else { return nil }
    for shift in 0..<16 {
      let multiplier = ((1 << (16 + shift)) + width - 1) / width
      guard multiplier <= Int(UInt16.max) else { return nil }
      var exact = true
      for value in 0...largest where (value * multiplier) >> (16 + shift) != value / width {
        exact = false
        break
      }
      if exact { return (UInt32(multiplier), UInt16(shift)) }
    }
    return nil
  }

  /// The rounded mean of a window whose samples sum to `sum`.
  @inline(__always)
  func average(_ sum: UInt32) -> UInt8 {
    UInt8(truncatingIfNeeded: (UInt64(sum &+ rounding) &* multiplier) &>> 32)
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
    // A channel count known at compile time (generic specialisation) gives one running sum per channel
    // in registers: independent dependency chains, no stride multiplications.
    switch channels {
    case 1:
      blurLine(source, first, count: width, One.self)
      blurLine(first, second, count: width, One.self)
      blurLine(second, destination, count: width, One.self)
    case 2:
      blurLine(source, first, count: width, Two.self)
      blurLine(first, second, count: width, Two.self)
      blurLine(second, destination, count: width, Two.self)
    case 3:
      blurLine(source, first, count: width, Three.self)
      blurLine(first, second, count: width, Three.self)
      blurLine(second, destination, count: width, Three.self)
    default:
      blurLine(source, first, count: width, Four.self)
      blurLine(first, second, count: width, Four.self)
      blurLine(second, destination, count: width, Four.self)
    }
  }

  /// One horizontal pass over `count` interleaved pixels of `channels` samples, edge extended.
  @inline(__always)
  private func blurLine<Channels: ChannelCount>(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, count: Int, _: Channels.Type
  ) {
    let channels = Channels.value
    let last = count - 1
    // One running sum per channel, in registers (the branches on the constant `channels` fold away).
    var sum0: UInt32 = 0
    var sum1: UInt32 = 0
    var sum2: UInt32 = 0
    var sum3: UInt32 = 0
    @inline(__always)
    func accumulate(_ pixel: UnsafePointer<UInt8>, _ times: UInt32) {
      sum0 &+= times &* UInt32(pixel[0])
      if channels > 1 { sum1 &+= times &* UInt32(pixel[1]) }
      if channels > 2 { sum2 &+= times &* UInt32(pixel[2]) }
      if channels > 3 { sum3 &+= times &* UInt32(pixel[3]) }
    }
    accumulate(source, UInt32(radius + 1))
    var index = 1
    while index <= radius {
      accumulate(source + min(index, last) &* channels, 1)
      index &+= 1
    }
    @inline(__always)
    func slide(
      _ sum: inout UInt32, _ channel: Int, _ output: UnsafeMutablePointer<UInt8>, _ enter: UnsafePointer<UInt8>,
      _ leave: UnsafePointer<UInt8>
    ) {
      output[channel] = average(sum)
      sum = sum &+ UInt32(enter[channel]) &- UInt32(leave[channel])
    }
    @inline(__always)
    func step(_ x: Int, entering: Int, leaving: Int) {
      let output = destination + x &* channels
      let enter = source + entering &* channels
      let leave = source + leaving &* channels
      slide(&sum0, 0, output, enter, leave)
      if channels > 1 { slide(&sum1, 1, output, enter, leave) }
      if channels > 2 { slide(&sum2, 2, output, enter, leave) }
      if channels > 3 { slide(&sum3, 3, output, enter, leave) }
    }
    // Clamped at the left edge, unclamped in the middle, clamped at the right edge.
    let middleStart = min(radius, count)
    let middleEnd = max(middleStart, last - radius)
    var x = 0
    while x < middleStart {
      step(x, entering: min(x &+ radius &+ 1, last), leaving: max(x &- radius, 0))
      x &+= 1
    }
    while x < middleEnd {
      step(x, entering: x &+ radius &+ 1, leaving: x &- radius)
      x &+= 1
    }
    while x < count {
      step(x, entering: min(x &+ radius &+ 1, last), leaving: max(x &- radius, 0))
      x &+= 1
    }
  }

  /// One vertical pass over the byte columns `columns` for output rows `rows`, edge extended.
  ///
  /// Walks down the image row by row, updating `columns.count` running sums at once (`sums`), so
  /// every memory access is a contiguous run of a row. Reads source rows `rows` ± `radius` (clamped).
  func blurColumns(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, rowBytes: Int, height: Int,
    columns: Range<Int>, rows: Range<Int>, sums: UnsafeMutableRawPointer
  ) {
    if let narrow {
      blurColumnsNarrow(
        source, destination, rowBytes: rowBytes, height: height, columns: columns, rows: rows,
        sums: sums.bindMemory(to: UInt16.self, capacity: columns.count), multiplier: narrow.multiplier,
        shift: narrow.shift)
      return
    }
    let sums = sums.bindMemory(to: UInt32.self, capacity: columns.count)
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

  /// ``blurColumns(_:_:rowBytes:height:columns:rows:sums:)`` with 16-bit sums (twice the SIMD lanes).
  private func blurColumnsNarrow(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, rowBytes: Int, height: Int,
    columns: Range<Int>, rows: Range<Int>, sums: UnsafeMutablePointer<UInt16>, multiplier: UInt32, shift: UInt16
  ) {
    let count = columns.count
    let last = height - 1
    let source = source + columns.lowerBound
    let destination = destination + columns.lowerBound
    let rounding = UInt16(radius)
    sums.update(repeating: 0, count: count)
    for offset in -radius...radius {
      let row = source + min(max(rows.lowerBound + offset, 0), last) * rowBytes
      for j in 0..<count { sums[j] &+= UInt16(row[j]) }
    }
    for y in rows {
      let output = destination + y * rowBytes
      let entering = source + min(y + radius + 1, last) * rowBytes
      let leaving = source + max(y - radius, 0) * rowBytes
      for j in 0..<count {
        let sum = sums[j]
        let high = UInt16(truncatingIfNeeded: (UInt32(sum &+ rounding) &* multiplier) &>> 16)
        output[j] = UInt8(truncatingIfNeeded: high &>> shift)
        sums[j] = sum &+ UInt16(entering[j]) &- UInt16(leaving[j])
      }
    }
  }
}

/// A channel count as a type, so generic specialisation turns it into a constant.
protocol ChannelCount {
  static var value: Int { get }
}

private enum One: ChannelCount { static var value: Int { 1 } }
private enum Two: ChannelCount { static var value: Int { 2 } }
private enum Three: ChannelCount { static var value: Int { 3 } }
private enum Four: ChannelCount { static var value: Int { 4 } }
