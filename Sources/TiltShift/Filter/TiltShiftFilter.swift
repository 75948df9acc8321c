import CFilterKernels
import Spindle

/// The playground's tilt-shift effect, made fast: a Gaussian-like blur blended in through a gradient mask.
///
/// Output = the original where the mask is clear (weight 0), the blurred image where it is opaque
/// (weight 255), linearly blended in between; alpha is copied from the original untouched. The blur
/// is three horizontal then three vertical box blurs of ``TiltShiftParameters/boxWidth`` with edge
/// extension, each pass rounded to 8 bits — the playground's three `vImageBoxConvolve` calls, split
/// into separable passes.
///
/// Each pass costs O(1) per sample whatever the radius (running sums). The three vertical passes run
/// fused, one walk down each column strip through rings of rows; the horizontal
/// passes run through the same vectorised cascade on transposed slabs of rows. In place, the horizontal passes
/// run only a few slabs ahead of the vertical walks, into a ring of rows that stays in the cache. Rows whose mask weight is 0
/// (the middle of the clear band) are never blurred. The running sums' inner loop and the blend use AVX2 where the
/// processor has it (the same bytes as the baseline loops). The bands run concurrently; `bands: 1` runs on the
/// calling thread only. The call blocks until done.
///
/// ```swift
/// let image = try ImageDecoder().decode(contentsOf: "IMG_0001.jpg")
/// let output = TiltShiftFilter().apply(to: image)
/// try ImageFile.writeAtomically(ImageEncoder(format: .jpeg).encode(output), to: "out/IMG_0001.jpg")
/// ```
public struct TiltShiftFilter: Sendable {
  /// The filter's settings.
  public var parameters: TiltShiftParameters

  /// Creates a filter; the default is the playground's look (``TiltShiftParameters/standard``).
  public init(parameters: TiltShiftParameters = .standard) {
    self.parameters = parameters
  }

  /// The number of processors this process may use (see `WorkQueue.activeProcessorCount`), the default number of
  /// bands.
  public static var defaultBandCount: Int {
    Platform.availableProcessorCount
  }

  /// Returns the filtered image; `image` is unchanged. Same size, layout, bit depth and metadata as the input.
  ///
  /// The mask follows the image's orientation (EXIF, else XMP), so the clear band is horizontal as displayed.
  /// 16-bit images are filtered in 16 bits.
  ///
  /// - Parameters:
  ///   - image: The picture to filter.
  ///   - bands: How many pieces each phase is split into to run concurrently (1 = serial, on the
  ///     calling thread). The output is the same for every band count.
  public func apply(to image: Image, bands: Int = TiltShiftFilter.defaultBandCount) -> Image {
    let box = parameters.boxWidth
    guard box > 1 else { return image }
    if image.bitDepth == 16 { return apply16(to: image, bands: max(1, bands)) }
    let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: box))
    let pixels = plan.run(image.pixels, bands: max(1, bands))
    return image.replacingPixels(pixels)
  }

  /// Filters `image` in place: the same output as ``apply(to:bands:)``, written over the image's own pixels.
  ///
  /// Nothing is copied when nobody else holds the pixels (a value shared with another variable is copied first,
  /// as any change to a value is), and the filter needs no other image-sized buffer: the horizontal passes run a
  /// little ahead of the vertical ones through a ring of rows (about 2 MB for a 12 MP photo at the standard
  /// radius), and each finished row is blended straight into the image. Where the ring and its cascades would
  /// take more memory than a second image (boxes over about 1,000 pixels, small images under wide boxes), the
  /// filter takes one image-sized buffer instead. A 16-bit image is filtered as ``apply(to:bands:)`` filters it
  /// and the result stored back.
  ///
  /// ```swift
  /// var photo = try ImageDecoder().decode(contentsOf: "IMG_0001.jpg")
  /// TiltShiftFilter().applyInPlace(to: &photo)  // photo now holds the miniature
  /// try ImageFile.writeAtomically(ImageEncoder(format: .jpeg).encode(photo), to: "out/IMG_0001.jpg")
  /// ```
  public func applyInPlace(to image: inout Image, bands: Int = TiltShiftFilter.defaultBandCount) {
    image = apply(consuming: consume image, bands: bands, scratchFrom: nil)
  }

  /// ``apply(to:bands:)`` on an image the caller gives up: the 8-bit output is written over its own pixels (in
  /// place when nobody else holds them), streaming through a ring of rows
  /// (``TiltShiftPlan/runStreaming(inPlace:bands:chunkRows:)``); only when streaming would not save memory (see
  /// ``TiltShiftPlan/streams(bands:)``) is an image-sized buffer needed besides, which comes from `pool` and goes
  /// back to it after the call. The output is the same as ``apply(to:bands:)``'s.
  package func apply(consuming given: consuming Image, bands: Int, scratchFrom pool: PixelBufferPool?) -> Image {
    var image = consume given
    let box = parameters.boxWidth
    guard box > 1, image.bitDepth == 8 else { return apply(to: image, bands: bands) }
    let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: box))
    let bands = max(1, bands)
    if plan.streams(bands: bands) {
      image.withUnsafeMutablePixels { pixels in plan.runStreaming(inPlace: pixels.baseAddress!, bands: bands) }
      return image
    }
    // A `var` moved into the call with `take`: a constant captured by the closure would stay a second reference
    // to the buffer, and writing it would copy all of it.
    var scratch = pool?.take(count: image.pixels.count)
    let work = image.withUnsafeMutablePixels { pixels in
      plan.run(inPlace: pixels, bands: bands, scratch: scratch.take())
    }
    if let pool { pool.giveBack(consume work) }
    return image
  }
}

/// Everything one filter run needs, worked out before touching pixels.
struct TiltShiftPlan {
  let width: Int
  let height: Int
  let channels: Int
  let hasAlpha: Bool
  let rowBytes: Int
  let kernel: BoxKernel
  /// Weight per row (`rowWeights`) or per byte column (`columnWeights`), by the mask's axis.
  let rowWeights: [UInt8]?
  let columnWeights: [UInt8]?
  /// Output rows that need the blur (`finalRows`), and the rows each earlier pass must produce.
  let finalRows: [Range<Int>]
  let secondRows: [Range<Int>]
  let firstRows: [Range<Int>]
  let horizontalRows: [Range<Int>]

  init(image: Image, parameters: TiltShiftParameters, kernel: BoxKernel) {
    width = image.width
    height = image.height
    channels = image.layout.channels
    hasAlpha = image.layout.hasAlpha
    rowBytes = image.bytesPerRow
    self.kernel = kernel
    let orientation = image.orientation
    if orientation >= 5 {
      // Rotated a quarter turn for display: "top to bottom" runs along the stored columns.
      let mask = GradientMask(count: width, parameters: parameters, reversed: orientation >= 7)
      var perByte = [UInt8](repeating: 0, count: rowBytes)
      for x in 0..<width {
        for channel in 0..<channels { perByte[x * channels + channel] = mask.weights[x] }
      }
      rowWeights = nil
      columnWeights = perByte
      finalRows = [0..<height]
    } else {
      let mask = GradientMask(count: height, parameters: parameters, reversed: orientation == 3 || orientation == 4)
      rowWeights = mask.weights
      columnWeights = nil
      finalRows = mask.blurredRanges
    }
    secondRows = expand(finalRows, by: kernel.radius, limit: height)
    firstRows = expand(secondRows, by: kernel.radius, limit: height)
    horizontalRows = expand(firstRows, by: kernel.radius, limit: height)
  }

  /// Filters `original` and returns the output pixels.
  ///
  /// One buffer beside the original: the horizontal passes fill it, and the vertical passes overwrite it in
  /// place with the output (see ``verticalRuns``), so a 12 MP image costs one fresh 36 MB buffer, not two.
  func run(_ original: [UInt8], bands: Int) -> [UInt8] {
    var output = Self.buffer(count: original.count, reusing: nil)
    original.withUnsafeBufferPointer { original in
      output.withUnsafeMutableBufferPointer { output in
        let source = UnsafeMutablePointer(mutating: original.baseAddress!)
        let work = output.baseAddress!
        horizontalPhase(source, into: work, bands: bands)
        verticalPhase(original: source, work: work, bands: bands, writingOriginal: false)
      }
    }
    return output
  }

  /// Filters `pixels` in place; returns the buffer the horizontal passes used (`scratch` when it is given and
  /// has the right size), for the caller to reuse. The whole-image form, for images the filter does not stream (see
  /// ``runStreaming(inPlace:bands:chunkRows:)``, which needs no such buffer).
  ///
  /// The horizontal passes read the original and fill the scratch buffer; the vertical passes turn it into
  /// the blurred image row by row, and each finished row is blended into the original at once. Rows whose
  /// weight is 0 are left as they are: nothing is copied.
  func run(inPlace pixels: UnsafeMutableBufferPointer<UInt8>, bands: Int, scratch: consuming [UInt8]?) -> [UInt8] {
    var work = Self.buffer(count: pixels.count, reusing: scratch)
    work.withUnsafeMutableBufferPointer { work in
      horizontalPhase(pixels.baseAddress!, into: work.baseAddress!, bands: bands)
      verticalPhase(original: pixels.baseAddress!, work: work.baseAddress!, bands: bands, writingOriginal: true)
    }
    return work
  }

  /// `reused` if it holds `count` bytes, else a fresh buffer of `count` bytes (contents undefined) on 2 MB pages.
  static func buffer(count: Int, reusing reused: consuming [UInt8]?) -> [UInt8] {
    if let reused = reused.take(), reused.count == count { return reused }
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
      adviseHugePages(buffer)
      initialized = count
    }
  }

  /// The output rows the vertical passes walk: ``finalRows``, with two ranges joined (and the clear rows
  /// between them blurred too, then blended with weight 0, which gives the original) wherever the later one
  /// would read horizontal results that the earlier one has already overwritten with output.
  ///
  /// A walk producing output row `y` reads horizontal rows up to `y + 3·radius + 3` ahead and never again a
  /// row at or above `y`, so writing in place is safe inside a walk; a walk starting at `s` first reads rows
  /// from `s − 3·radius` on, so it must start more than `3·radius + 1` rows after the previous walk ends.
  var verticalRuns: [Range<Int>] {
    var runs: [Range<Int>] = []
    for range in finalRows {
      if let last = runs.last, range.lowerBound - last.upperBound <= 3 * kernel.radius + 1 {
        runs[runs.count - 1] = last.lowerBound..<range.upperBound
      } else {
        runs.append(range)
      }
    }
    return runs
  }

  /// Rows blurred together by the transposed horizontal passes: the lanes of the vertical kernel.
  ///
  /// 64, so that each step of the cascade slides 64 to 256 bytes per call: colour images took 32 rows until the
  /// slide became AVX2, and at 96 bytes a call the calls' own cost showed (64 rows: about 7 % less filter time,
  /// four interleaved runs of 15 rounds). 32 for colour images under boxes so wide that a cascade strip is
  /// narrower than 64 rows of pixels (the narrowest slab the horizontal passes could always use).
  static func slabRows(channels: Int, kernel: BoxKernel) -> Int {
    channels <= 2 || VerticalCascade.stripBytes(for: kernel) >= 64 * channels ? 64 : 32
  }

  /// Three horizontal passes over every row in `horizontalRows`, on slabs of ``slabRows(channels:kernel:)`` rows.
  ///
  /// A slab is transposed so that pixel `x` of its rows becomes one short row (channel by channel, one byte
  /// per image row), which turns the horizontal passes into vertical ones: a ``VerticalCascade`` runs the
  /// three of them with one running sum per lane, vectorised, instead of one serial sum per channel. Each
  /// finished transposed row is scattered straight back into `destination`. Same sums, same rounding.
  private func horizontalPhase(
    _ source: UnsafeMutablePointer<UInt8>, into destination: UnsafeMutablePointer<UInt8>, bands: Int
  ) {
    let lanes = Self.slabRows(channels: channels, kernel: kernel)
    let slabBytes = channels * lanes
    // Very wide boxes make rings so long that strips get narrower than a slab: those go row by row.
    guard VerticalCascade.stripBytes(for: kernel) >= slabBytes else {
      return horizontalPhaseByRow(UnsafePointer(source), into: destination, bands: bands)
    }
    let slabs = horizontalRows.flatMap { range in
      stride(from: range.lowerBound, to: range.upperBound, by: lanes).map { $0..<min($0 + lanes, range.upperBound) }
    }
    let pieces = min(bands, max(1, slabs.count))
    let shared = (SharedPointer(source), SharedPointer(destination))
    parallelBands(count: pieces) { piece in
      let (source, destination) = (UnsafePointer(shared.0.pointer), shared.1.pointer)
      let horizontal = HorizontalSlabs(self)
      defer { horizontal.deallocate() }
      for slab in slabs[(slabs.count * piece / pieces)..<(slabs.count * (piece + 1) / pieces)] {
        horizontal.blur(
          source + slab.lowerBound * rowBytes, rows: slab.count, into: destination + slab.lowerBound * rowBytes)
      }
    }
  }

  /// Three horizontal passes over every row in `horizontalRows`, row by row, split into row bands.
  private func horizontalPhaseByRow(
    _ source: UnsafePointer<UInt8>, into destination: UnsafeMutablePointer<UInt8>, bands: Int
  ) {
    let shared = (SharedPointer(UnsafeMutablePointer(mutating: source)), SharedPointer(destination))
    let rows = horizontalRows.flatMap { $0 }
    let pieces = min(bands, max(1, rows.count))
    parallelBands(count: pieces) { piece in
      let (source, destination) = (UnsafePointer(shared.0.pointer), shared.1.pointer)
      let scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: 2 * rowBytes)
      defer { scratch.deallocate() }
      let start = rows.count * piece / pieces
      let end = rows.count * (piece + 1) / pieces
      for index in start..<end {
        let y = rows[index]
        kernel.blurRow(
          source + y * rowBytes, destination + y * rowBytes, width: width, channels: channels, scratch: scratch)
      }
    }
  }

  /// Three vertical passes and the blend, on column strips; every strip is independent.
  ///
  /// `work` holds the horizontal result; a ``VerticalCascade`` per band walks each strip down once,
  /// running the three passes through small rings and writing each finished row back into `work` (rows it
  /// no longer reads), where it is blended with the original at once. The output is `work`, whose rows outside
  /// every walk are copied from the original last; or, `writingOriginal`, the original itself, into which each
  /// blurred row is blended (the rows outside every walk are already the output there).
  private func verticalPhase(
    original: UnsafeMutablePointer<UInt8>, work: UnsafeMutablePointer<UInt8>, bands: Int, writingOriginal: Bool
  ) {
    let pieces = min(bands, max(1, rowBytes / 64))
    let runs = verticalRuns
    let clearRows = writingOriginal ? [] : complement(runs, limit: height)
    let shared = (SharedPointer(original), SharedPointer(work))
    parallelBands(count: pieces) { piece in
      let (original, work) = (shared.0.pointer, shared.1.pointer)
      let output = work
      // Strip boundaries on 64-byte multiples, so no two strips share a cache line.
      let lines = (rowBytes + 63) / 64
      let start = min(rowBytes, lines * piece / pieces * 64)
      let end = piece == pieces - 1 ? rowBytes : min(rowBytes, lines * (piece + 1) / pieces * 64)
      guard start < end else { return }
      let cascade = VerticalCascade(kernel: kernel, rowBytes: rowBytes, height: height)
      defer { cascade.deallocate() }
      var runStart = start
      while runStart < end {
        let columns = runStart..<min(end, runStart + cascade.stripBytes)
        for rows in runs {
          cascade.run(UnsafePointer(work), output, columns: columns, rows: rows) { y in
            if writingOriginal {
              blend(UnsafePointer(output), into: original, row: y, columns: columns)
            } else {
              blend(original: original, output: output, row: y, columns: columns)
            }
          }
        }
        for rows in clearRows {
          for y in rows {
            (output + y * rowBytes + columns.lowerBound).update(
              from: original + y * rowBytes + columns.lowerBound, count: columns.count)
          }
        }
        runStart = columns.upperBound
      }
    }
  }

  /// Mixes the original into the blurred samples of one row's `columns`, in place; restores alpha.
  private func blend(
    original: UnsafePointer<UInt8>, output: UnsafeMutablePointer<UInt8>, row y: Int, columns: Range<Int>
  ) {
    let source = original + y * rowBytes
    let target = output + y * rowBytes
    if let rowWeights {
      let weight = UInt16(rowWeights[y])
      if weight != 255 {
        // `mix` is symmetric in its two weighted samples, so the blurred row in `target` blended with the original
        // at weight `255 - weight` is this very mix: the same kernel as the in-place blend (CFilterKernels).
        spindle_blend_row(target + columns.lowerBound, source + columns.lowerBound, columns.count, 255 - weight)
      }
    } else if let columnWeights {
      columnWeights.withUnsafeBufferPointer { weights in
        for x in columns {
          let weight = UInt16(weights[x])
          target[x] = Self.mix(UInt16(source[x]), 255 - weight, UInt16(target[x]), weight)
        }
      }
    }
    if hasAlpha {
      var x = columns.lowerBound + (channels - 1 - columns.lowerBound % channels)
      while x < columns.upperBound {
        target[x] = source[x]
        x += channels
      }
    }
  }

  /// Mixes the blurred samples of one row's `columns` into the original, in place; alpha stays as it is.
  ///
  /// The same sums as ``blend(original:output:row:columns:)``: a weight of 0 leaves the original (`mix` of the
  /// original alone is exact), a weight of 255 gives the blurred samples.
  private func blend(
    _ blurred: UnsafePointer<UInt8>, into original: UnsafeMutablePointer<UInt8>, row y: Int, columns: Range<Int>
  ) {
    blend(blurredRow: blurred + y * rowBytes, into: original + y * rowBytes, row: y, columns: columns)
  }

  /// ``blend(_:into:row:columns:)`` given the rows themselves: `source` holds row `y`'s blurred samples (at least
  /// its `columns`), `target` is the original's row `y`.
  func blend(
    blurredRow source: UnsafePointer<UInt8>, into target: UnsafeMutablePointer<UInt8>, row y: Int, columns: Range<Int>
  ) {
    if let rowWeights {
      let weight = UInt16(rowWeights[y])
      guard weight != 0 else { return }
      if !hasAlpha && weight == 255 {
        (target + columns.lowerBound).update(from: source + columns.lowerBound, count: columns.count)
        return
      }
      let keep = 255 - weight
      if hasAlpha {
        forEachColour(in: columns) { x in target[x] = Self.mix(UInt16(target[x]), keep, UInt16(source[x]), weight) }
      } else {
        // `mix` on every byte, 16 or 32 at a time (CFilterKernels).
        spindle_blend_row(target + columns.lowerBound, source + columns.lowerBound, columns.count, weight)
      }
    } else if let columnWeights {
      columnWeights.withUnsafeBufferPointer { weights in
        @inline(__always) func mix(_ x: Int) {
          let weight = UInt16(weights[x])
          target[x] = Self.mix(UInt16(target[x]), 255 - weight, UInt16(source[x]), weight)
        }
        if hasAlpha {
          forEachColour(in: columns, mix)
        } else {
          spindle_blend_weighted(
            target + columns.lowerBound, source + columns.lowerBound, weights.baseAddress! + columns.lowerBound,
            columns.count)
        }
      }
    }
  }

  /// Calls `body` with every byte column in `columns` that is not an alpha sample.
  @inline(__always)
  private func forEachColour(in columns: Range<Int>, _ body: (Int) -> Void) {
    var channel = columns.lowerBound % channels
    for x in columns {
      if channel != channels - 1 || !hasAlpha { body(x) }
      channel = channel == channels - 1 ? 0 : channel + 1
    }
  }

  /// `(a·wa + b·wb) / 255` rounded, for `wa + wb == 255`: exact division by 255 without a divide.
  @inline(__always)
  static func mix(_ a: UInt16, _ wa: UInt16, _ b: UInt16, _ wb: UInt16) -> UInt8 {
    let x = a &* wa &+ b &* wb &+ 127
    return UInt8(truncatingIfNeeded: (x &+ 1 &+ (x &>> 8)) &>> 8)
  }
}

/// Asks Linux to back a large, not yet touched buffer with 2 MB pages (transparent huge pages in `madvise`
/// mode, the usual default): filling a 36 MB image then takes about 18 page faults instead of 9,000, each of
/// which costs a kernel entry and a page clear. Only advice: nothing changes if the kernel declines.
func adviseHugePages(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
  #if os(Linux)
    let huge = 2 << 20
    guard let base = buffer.baseAddress, buffer.count >= 2 * huge else { return }
    let start = (Int(bitPattern: base) + huge - 1) & ~(huge - 1)
    let end = (Int(bitPattern: base) + buffer.count) & ~(huge - 1)
    if end > start, let pointer = UnsafeMutableRawPointer(bitPattern: start) {
      Platform.adviseHugePages(pointer, length: end - start)
    }
  #endif
}

/// The parts of `0..<limit` not covered by the sorted, disjoint `ranges`.
func complement(_ ranges: [Range<Int>], limit: Int) -> [Range<Int>] {
  var result: [Range<Int>] = []
  var next = 0
  for range in ranges {
    if range.lowerBound > next { result.append(next..<range.lowerBound) }
    next = max(next, range.upperBound)
  }
  if next < limit { result.append(next..<limit) }
  return result
}
