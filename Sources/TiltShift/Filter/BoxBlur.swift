import CFilterKernels

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
  let narrow: (multiplier: UInt32, shift: UInt16)?

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
      spindle_slide_row_u16(
        sums, destination + y * rowBytes, source + min(y + radius + 1, last) * rowBytes,
        source + max(y - radius, 0) * rowBytes, count, rounding, UInt16(truncatingIfNeeded: multiplier), shift)
    }
  }
}

/// Three vertical box passes fused into one walk down a strip of byte columns.
///
/// Produces exactly what three separate ``BoxKernel/blurColumns(_:_:rowBytes:height:columns:rows:sums:)``
/// passes produce (the same running sums, the same rounding, the same edge extension), but the two
/// intermediate results live in rings of at least `2 · radius + 2` rows of the strip, not whole images: each
/// stage computes a row just before the next stage needs it, so the strip's working set stays in the L2
/// cache and the image is read once and written once instead of three times each.
struct VerticalCascade {
  let kernel: BoxKernel
  let rowBytes: Int
  let height: Int
  /// Rows per ring: a consumer at row y needs its producer's rows y − radius … y + radius + 1 (2r + 2 rows),
  /// rounded up to a power of two so that a row's slot is a mask, not a division.
  let slots: Int
  /// The widest strip, in bytes.
  let stripBytes: Int
  private let rings: UnsafeMutablePointer<UInt8>
  private let sums: UnsafeMutableRawPointer

  /// The ring length for a kernel: the power of two at or above `2 · radius + 2`.
  static func slots(for kernel: BoxKernel) -> Int {
    var slots = 1
    while slots < 2 * kernel.radius + 2 { slots <<= 1 }
    return slots
  }

  /// The strip width for a kernel: both rings within about 256 KB, a multiple of 64 bytes, 64...2048.
  static func stripBytes(for kernel: BoxKernel) -> Int {
    min(2048, max(64, 256 * 1024 / (2 * slots(for: kernel)) / 64 * 64))
  }

  /// A cascade over an image of `height` rows of `rowBytes`, in strips of at most `stripBytes` (by default
  /// ``stripBytes(for:)``).
  init(kernel: BoxKernel, rowBytes: Int, height: Int, stripBytes: Int? = nil) {
    self.kernel = kernel
    self.rowBytes = rowBytes
    self.height = height
    slots = Self.slots(for: kernel)
    self.stripBytes = stripBytes ?? Self.stripBytes(for: kernel)
    rings = .allocate(capacity: 2 * slots * self.stripBytes)
    sums = .allocate(byteCount: 3 * self.stripBytes * MemoryLayout<UInt32>.stride, alignment: 64)
  }

  /// Frees the rings and sums.
  func deallocate() {
    rings.deallocate()
    sums.deallocate()
  }

  /// Blurs `columns` (at most ``stripBytes`` wide) of the output rows `rows` from `source` (the horizontal
  /// result, valid on `rows` grown by three radii) into `destination`, calling `finished(y)` after each row.
  func run(
    _ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, columns: Range<Int>, rows: Range<Int>,
    finished: (Int) -> Void
  ) {
    run(source, columns: columns, rows: rows, outputRow: { destination + $0 &* rowBytes }, finished: finished)
  }

  /// ``run(_:_:columns:rows:finished:)`` writing row `y` at `outputRow(y)` (plus the strip's first column).
  @inline(__always)
  func run(
    _ source: UnsafePointer<UInt8>, columns: Range<Int>, rows: Range<Int>,
    outputRow: (Int) -> UnsafeMutablePointer<UInt8>, finished: (Int) -> Void
  ) {
    guard !rows.isEmpty else { return }
    var walk = Walk(columns: columns, rows: rows, radius: kernel.radius, last: height - 1)
    let input = source + columns.lowerBound
    let first = columns.lowerBound
    advance(
      &walk, through: rows.upperBound - 1, sourceRow: { input + $0 &* rowBytes },
      outputRow: { outputRow($0) + first }, finished: finished)
  }

  /// Where one walk of the cascade down a strip has got to: a walk can stop after any output row and go on
  /// later (``advance(_:through:sourceRow:outputRow:finished:)``), as long as nothing else used this cascade's
  /// rings in between.
  struct Walk {
    /// The strip's byte columns and the output rows of the walk.
    let columns: Range<Int>
    let rows: Range<Int>
    /// The next row each stage produces, and where stages 1 and 2 stop.
    var next1: Int
    let end1: Int
    var next2: Int
    let end2: Int
    var next3: Int
    var started2 = false
    var started3 = false

    init(columns: Range<Int>, rows: Range<Int>, radius: Int, last: Int) {
      self.columns = columns
      self.rows = rows
      next1 = max(rows.lowerBound - 2 * radius, 0)
      end1 = min(rows.upperBound - 1 + 2 * radius, last) + 1
      next2 = max(rows.lowerBound - radius, 0)
      end2 = min(rows.upperBound - 1 + radius, last) + 1
      next3 = rows.lowerBound
    }

    /// Whether every output row of the walk is done.
    var isFinished: Bool { next3 >= rows.upperBound }
  }

  /// Goes on with `walk` through output row `lastRow` (at most the walk's last row), calling `finished(y)` after
  /// each row.
  ///
  /// `sourceRow(y)` is the strip's first byte of horizontal row `y`, `outputRow(y)` where output row `y`'s strip
  /// goes. Output row `y` reads horizontal rows up to `y + 3·radius + 3` (clamped), and after it the walk never
  /// again reads a horizontal row before `y + radius + 1`.
  @inline(__always)
  func advance(
    _ walk: inout Walk, through lastRow: Int, sourceRow: (Int) -> UnsafePointer<UInt8>,
    outputRow: (Int) -> UnsafeMutablePointer<UInt8>, finished: (Int) -> Void
  ) {
    let rows = walk.rows
    let lastRow = min(lastRow, rows.upperBound - 1)
    guard walk.next3 <= lastRow else { return }
    let count = walk.columns.count
    let radius = kernel.radius
    let last = height - 1
    let mask = slots - 1
    let ring1 = rings
    let ring2 = rings + slots * stripBytes
    let stride = stripBytes
    let sums1 = sums
    let sums2 = sums + stripBytes * MemoryLayout<UInt32>.stride
    let sums3 = sums + 2 * stripBytes * MemoryLayout<UInt32>.stride
    @inline(__always) func ring1Row(_ y: Int) -> UnsafeMutablePointer<UInt8> { ring1 + (y & mask) &* stride }
    @inline(__always) func ring2Row(_ y: Int) -> UnsafeMutablePointer<UInt8> { ring2 + (y & mask) &* stride }

    // Stage 1 (source → ring 1) and stage 2 (ring 1 → ring 2) produce their rows on demand, in order.
    var next1 = walk.next1
    let end1 = walk.end1
    var next2 = walk.next2
    let end2 = walk.end2
    var started2 = walk.started2
    if !walk.started3 && !started2 {
      kernel.startSums(sums1, count: count, at: next1, last: last, row: sourceRow)
    }

    func produce1(through row: Int) {
      while next1 <= row {
        let y = next1
        if y + 1 < end1 {
          kernel.slideRow(
            sums1, into: ring1Row(y), entering: sourceRow(min(y + radius + 1, last)),
            leaving: sourceRow(max(y - radius, 0)), count: count)
        } else {
          kernel.averageRow(sums1, into: ring1Row(y), count: count)
        }
        next1 = y + 1
      }
    }
    func produce2(through row: Int) {
      if !started2 {
        produce1(through: min(next2 + radius, last))
        kernel.startSums(sums2, count: count, at: next2, last: last) { UnsafePointer(ring1Row($0)) }
        started2 = true
      }
      while next2 <= row {
        let y = next2
        if y + 1 < end2 {
          let entering = min(y + radius + 1, last)
          produce1(through: entering)
          kernel.slideRow(
            sums2, into: ring2Row(y), entering: ring1Row(entering), leaving: ring1Row(max(y - radius, 0)), count: count)
        } else {
          kernel.averageRow(sums2, into: ring2Row(y), count: count)
        }
        next2 = y + 1
      }
    }
    // Stage 3: ring 2 → output, one finished row at a time.
    if !walk.started3 {
      produce2(through: min(rows.lowerBound + radius, last))
      kernel.startSums(sums3, count: count, at: rows.lowerBound, last: last) { UnsafePointer(ring2Row($0)) }
      walk.started3 = true
    }
    var y = walk.next3
    let narrow = kernel.narrow
    while y <= lastRow {
      let target = outputRow(y)
      // The steady state: stage 2 is to produce the row stage 3 enters now, stage 1 the row stage 2 enters, and all
      // three slide (none clamped at the image's end, none at its run's last row). One kernel call does the three
      // steps the general path below would, in the same order, with the same rows.
      let row2 = y + radius + 1
      let row1 = row2 + radius + 1
      if let narrow,
        started2 && next2 == row2 && next1 == row1 && y + 1 < rows.upperBound && row2 + 1 < end2
          && row1 + 1 < end1
      {
        kernel.slideCascadeRow(
          narrow, sums1, sums2, sums3, into: ring1Row(row1), ring2Row(row2), target,
          entering: sourceRow(min(row1 + radius + 1, last)), leaving: sourceRow(max(row1 - radius, 0)),
          ring1Row(max(row2 - radius, 0)), ring2Row(max(y - radius, 0)), count: count)
        next1 = row1 + 1
        next2 = row2 + 1
        finished(y)
        y += 1
        continue
      }
      if y + 1 < rows.upperBound {
        let entering = min(y + radius + 1, last)
        produce2(through: entering)
        kernel.slideRow(
          sums3, into: target, entering: ring2Row(entering), leaving: ring2Row(max(y - radius, 0)), count: count)
      } else {
        kernel.averageRow(sums3, into: target, count: count)
      }
      finished(y)
      y += 1
    }
    walk.next1 = next1
    walk.next2 = next2
    walk.next3 = y
    walk.started2 = started2
  }
}

extension BoxKernel {
  /// Sets `sums` to the window sums of output row `y`: rows `y − radius … y + radius`, clamped to `0...last`.
  @inline(__always)
  func startSums(
    _ sums: UnsafeMutableRawPointer, count: Int, at y: Int, last: Int, row: (Int) -> UnsafePointer<UInt8>
  ) {
    if narrow != nil {
      let sums = sums.assumingMemoryBound(to: UInt16.self)
      sums.update(repeating: 0, count: count)
      for offset in -radius...radius {
        let source = row(min(max(y + offset, 0), last))
        for j in 0..<count { sums[j] &+= UInt16(source[j]) }
      }
    } else {
      let sums = sums.assumingMemoryBound(to: UInt32.self)
      sums.update(repeating: 0, count: count)
      for offset in -radius...radius {
        let source = row(min(max(y + offset, 0), last))
        for j in 0..<count { sums[j] &+= UInt32(source[j]) }
      }
    }
  }

  /// Writes the rounded window means of `sums` to `output`, then slides the windows down one row.
  @inline(__always)
  func slideRow(
    _ sums: UnsafeMutableRawPointer, into output: UnsafeMutablePointer<UInt8>, entering: UnsafePointer<UInt8>,
    leaving: UnsafePointer<UInt8>, count: Int
  ) {
    if let narrow {
      // 16 × 16 → high 16 bits: one `pmulhuw` per 8 lanes, or `vpmulhuw` per 16 where the processor has AVX2 (a
      // 32-bit multiplier costs six instructions). In C, compiled for both (see CFilterKernels).
      spindle_slide_row_u16(
        sums.assumingMemoryBound(to: UInt16.self), output, entering, leaving, count, UInt16(radius),
        UInt16(truncatingIfNeeded: narrow.multiplier), narrow.shift)
    } else {
      let sums = sums.assumingMemoryBound(to: UInt32.self)
      for j in 0..<count {
        let sum = sums[j]
        output[j] = average(sum)
        sums[j] = sum &+ UInt32(entering[j]) &- UInt32(leaving[j])
      }
    }
  }

  /// ``slideRow(_:into:entering:leaving:count:)`` on `sums1` (into `output1`), then on `sums2` entering `output1`
  /// (into `output2`), then on `sums3` entering `output2` (into `output3`): one step of each stage of a cascade, in
  /// one pass over the columns, with 16-bit sums (`narrow` is this kernel's ``narrow``).
  @inline(__always)
  func slideCascadeRow(
    _ narrow: (multiplier: UInt32, shift: UInt16), _ sums1: UnsafeMutableRawPointer, _ sums2: UnsafeMutableRawPointer,
    _ sums3: UnsafeMutableRawPointer,
    into output1: UnsafeMutablePointer<UInt8>, _ output2: UnsafeMutablePointer<UInt8>,
    _ output3: UnsafeMutablePointer<UInt8>, entering: UnsafePointer<UInt8>, leaving leaving1: UnsafePointer<UInt8>,
    _ leaving2: UnsafePointer<UInt8>, _ leaving3: UnsafePointer<UInt8>, count: Int
  ) {
    spindle_slide3_row_u16(
      sums1.assumingMemoryBound(to: UInt16.self), sums2.assumingMemoryBound(to: UInt16.self),
      sums3.assumingMemoryBound(to: UInt16.self), output1, output2, output3, entering, leaving1, leaving2, leaving3,
      count, UInt16(radius), UInt16(truncatingIfNeeded: narrow.multiplier), narrow.shift)
  }

  /// Writes the rounded window means of `sums` to `output` (the last row of a run: no slide).
  @inline(__always)
  func averageRow(_ sums: UnsafeMutableRawPointer, into output: UnsafeMutablePointer<UInt8>, count: Int) {
    if let narrow {
      spindle_average_row_u16(
        sums.assumingMemoryBound(to: UInt16.self), output, count, UInt16(radius),
        UInt16(truncatingIfNeeded: narrow.multiplier), narrow.shift)
    } else {
      let sums = sums.assumingMemoryBound(to: UInt32.self)
      for j in 0..<count { output[j] = average(sums[j]) }
    }
  }
}

/// A channel count as a type, so generic specialisation turns it into a constant.
protocol ChannelCount {
  static var value: Int { get }
}

enum One: ChannelCount { static var value: Int { 1 } }
enum Two: ChannelCount { static var value: Int { 2 } }
enum Three: ChannelCount { static var value: Int { 3 } }
enum Four: ChannelCount { static var value: Int { 4 } }
