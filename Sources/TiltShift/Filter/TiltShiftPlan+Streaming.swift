/// The filter's in-place form without an image-sized buffer: the horizontal passes fill a ring of rows a little
/// ahead of the vertical passes, which blend each finished row into the original at once.
///
/// The whole-image form (``TiltShiftPlan/run(inPlace:bands:scratch:)``) writes the horizontal result for every
/// row to a second image-sized buffer, and the vertical passes read it back from memory: for a 12 MP photo, 36 MB
/// written, read and written again, and 36 MB more that a fresh buffer's pages have to be cleared for. Here the
/// image is taken `chunkRows` output rows at a time. The horizontal passes first produce every row that those
/// output rows need that is not produced yet (up to `3·radius + 3` rows further down), into the ring; then each
/// column strip's ``VerticalCascade`` walk goes on through those output rows, where it stopped the step before.
/// The ring (`chunkRows + 6·radius + 8` rows) and the walks' own rings stay in the caches.
///
/// Same passes, same sums, same rounding, same order of writes to each original row (blended only after every
/// horizontal row that reads it is done): the output is byte for byte the whole-image form's.
extension TiltShiftPlan {
  /// Output rows finished in each step.
  static let streamChunkRows = 64

  /// Whether ``runStreaming(inPlace:bands:chunkRows:)`` can filter this image: the horizontal passes run on
  /// transposed slabs (all but very wide boxes).
  var canStream: Bool { Self.canStream(channels: channels, kernel: kernel) }

  /// ``canStream`` for an image of `channels` channels and a box `kernel`.
  static func canStream(channels: Int, kernel: BoxKernel) -> Bool {
    VerticalCascade.stripBytes(for: kernel) >= channels * slabRows(channels: channels, kernel: kernel)
  }

  /// Whether the in-place filter streams an image of `width` × `height` pixels with `bands` bands: it can, and
  /// the ring and cascades (``streamingBytes(width:height:channels:kernel:bands:)``) take less memory than the
  /// second image-sized buffer of the whole-image form. (With boxes of several hundred pixels the rings of the
  /// cascades alone are hundreds of rows tall, more than a small image.)
  static func streams(width: Int, height: Int, channels: Int, kernel: BoxKernel, bands: Int) -> Bool {
    canStream(channels: channels, kernel: kernel)
      && streamingBytes(width: width, height: height, channels: channels, kernel: kernel, bands: bands)
        < width * height * channels
  }

  /// ``streams(width:height:channels:kernel:bands:)`` for this image.
  func streams(bands: Int) -> Bool {
    Self.streams(width: width, height: height, channels: channels, kernel: kernel, bands: bands)
  }

  /// The ring's rows for a box `kernel`: at the first step of a walk, the rows from `3·radius` above its first
  /// output row to `3·radius + 3` below the step's last are live; later, from the previous step's last output
  /// row on. (At most the image's height.)
  static func ringRows(kernel: BoxKernel, chunkRows: Int = streamChunkRows) -> Int {
    chunkRows + 6 * kernel.radius + 8
  }

  /// An upper bound of the memory ``runStreaming(inPlace:bands:chunkRows:)`` allocates for an image of
  /// `width` × `height` pixels with `bands` bands at the default step: the ring, an output row, the strips'
  /// cascades and each band's transposed slab.
  static func streamingBytes(width: Int, height: Int, channels: Int, kernel: BoxKernel, bands: Int) -> Int {
    let rowBytes = width * channels
    let stripBytes = VerticalCascade.stripBytes(for: kernel)
    let strips = (rowBytes + stripBytes - 1) / stripBytes
    let slots = VerticalCascade.slots(for: kernel)
    let cascade = { (strip: Int) in 2 * slots * strip + 3 * strip * MemoryLayout<UInt32>.stride }
    let slabBytes = channels * slabRows(channels: channels, kernel: kernel)
    let slabber = width * slabBytes + 16 * slabBytes + cascade(slabBytes)
    // Each strip's cascade is as wide as the strip, rounded up to 64 bytes.
    let ring = (min(height, ringRows(kernel: kernel)) + 1) * rowBytes
    return ring + cascade(rowBytes + 64 * strips) + max(1, bands) * slabber
  }

  /// Filters `pixels` in place, `chunkRows` output rows per step, with `bands` threads per step. Needs
  /// ``canStream``.
  func runStreaming(inPlace pixels: UnsafeMutablePointer<UInt8>, bands: Int, chunkRows: Int = streamChunkRows) {
    precondition(canStream && chunkRows >= 1)
    let bands = max(1, bands)
    let runs = verticalRuns
    guard !runs.isEmpty else { return }
    let radius = kernel.radius
    let lanes = Self.slabRows(channels: channels, kernel: kernel)
    let ringRows = min(height, Self.ringRows(kernel: kernel, chunkRows: chunkRows))
    let ring = UnsafeMutablePointer<UInt8>.allocate(capacity: ringRows * rowBytes)
    // One output row: each strip writes its own columns (64-byte multiples: no shared cache lines) and blends them.
    let outputRow = UnsafeMutableRawPointer.allocate(byteCount: rowBytes, alignment: 64)
      .bindMemory(to: UInt8.self, capacity: rowBytes)
    let stripBytes = VerticalCascade.stripBytes(for: kernel)
    let strips = stride(from: 0, to: rowBytes, by: stripBytes).map { $0..<min($0 + stripBytes, rowBytes) }
    let verticalPieces = min(bands, strips.count)
    // A step never has more slabs than the ring has slabs (plus one cut at its end): more bands would only
    // allocate slab buffers that no slab uses.
    let horizontalPieces = min(bands, ringRows / lanes + 2)
    let cascades = UnsafeMutablePointer<VerticalCascade>.allocate(capacity: strips.count)
    let walks = UnsafeMutablePointer<VerticalCascade.Walk>.allocate(capacity: strips.count)
    let slabbers = UnsafeMutablePointer<HorizontalSlabs>.allocate(capacity: horizontalPieces)
    for (index, strip) in strips.enumerated() {
      // Rings as wide as the strip (a narrow image's one strip needs no full-width rings).
      let width = (strip.count + 63) / 64 * 64
      (cascades + index).initialize(
        to: VerticalCascade(kernel: kernel, rowBytes: rowBytes, height: height, stripBytes: width))
    }
    for piece in 0..<horizontalPieces { (slabbers + piece).initialize(to: HorizontalSlabs(self)) }
    defer {
      for index in strips.indices { cascades[index].deallocate() }
      for piece in 0..<horizontalPieces { slabbers[piece].deallocate() }
      cascades.deinitialize(count: strips.count).deallocate()
      walks.deallocate()
      slabbers.deinitialize(count: horizontalPieces).deallocate()
      outputRow.deallocate()
      ring.deallocate()
    }
    // Each band touches only its own strips' cascades and walks, its own slabber, its own ring rows (horizontal
    // step) or its own columns (vertical step), and every step joins its bands before the next one starts.
    let shared = (
      pixels: SharedPointer(pixels), ring: SharedPointer(ring), outputRow: SharedPointer(outputRow),
      cascades: SharedPointer(cascades), walks: SharedPointer(walks), slabbers: SharedPointer(slabbers)
    )
    for run in runs {
      for (index, strip) in strips.enumerated() {
        (walks + index).initialize(to: .init(columns: strip, rows: run, radius: radius, last: height - 1))
      }
      let horizontalEnd = min(run.upperBound + 3 * radius, height)
      var produced = max(run.lowerBound - 3 * radius, 0)
      var done = run.lowerBound
      while done < run.upperBound {
        let through = min(done + chunkRows, run.upperBound) - 1
        // The horizontal rows that output rows up to `through` read, in slabs that do not wrap around the ring.
        let needed = min(through + 3 * radius + 4, horizontalEnd)
        let slabs = Self.slabs(produced..<needed, lanes: lanes, ringRows: ringRows)
        produced = needed
        let slabPieces = min(horizontalPieces, slabs.count)
        parallelBands(count: slabPieces) { piece in
          let pixels = shared.pixels.pointer
          let slabber = shared.slabbers.pointer[piece]
          for slab in slabs[(slabs.count * piece / slabPieces)..<(slabs.count * (piece + 1) / slabPieces)] {
            let target = shared.ring.pointer + (slab.lowerBound % ringRows) * rowBytes
            slabber.blur(pixels + slab.lowerBound * rowBytes, rows: slab.count, into: target)
          }
        }
        parallelBands(count: verticalPieces) { piece in
          let (pixels, outputRow) = (shared.pixels.pointer, shared.outputRow.pointer)
          for index in (strips.count * piece / verticalPieces)..<(strips.count * (piece + 1) / verticalPieces) {
            let strip = strips[index]
            shared.cascades.pointer[index].advance(
              &shared.walks.pointer[index], through: through,
              sourceRow: { UnsafePointer(shared.ring.pointer + ($0 % ringRows) * rowBytes + strip.lowerBound) },
              outputRow: { _ in outputRow + strip.lowerBound }
            ) { y in
              blend(blurredRow: outputRow, into: pixels + y * rowBytes, row: y, columns: strip)
            }
          }
        }
        done = through + 1
      }
      walks.deinitialize(count: strips.count)
    }
  }

  /// `rows` cut into slabs of at most `lanes` rows, none of which wraps around the end of a ring of `ringRows`.
  static func slabs(_ rows: Range<Int>, lanes: Int, ringRows: Int) -> [Range<Int>] {
    var slabs: [Range<Int>] = []
    var start = rows.lowerBound
    while start < rows.upperBound {
      let end = min(start + lanes, rows.upperBound, start + ringRows - start % ringRows)
      slabs.append(start..<end)
      start = end
    }
    return slabs
  }
}

/// What one band of the horizontal phase works with: a slab's transposed rows and a ``VerticalCascade`` that runs
/// the three horizontal passes along them.
struct HorizontalSlabs {
  let cascade: VerticalCascade
  let transposed: UnsafeMutablePointer<UInt8>
  let finished: UnsafeMutablePointer<UInt8>
  let slabTranspose: SlabTranspose
  let width: Int
  let slabBytes: Int

  init(_ plan: TiltShiftPlan) {
    let lanes = TiltShiftPlan.slabRows(channels: plan.channels, kernel: plan.kernel)
    width = plan.width
    slabBytes = plan.channels * lanes
    cascade = VerticalCascade(kernel: plan.kernel, rowBytes: slabBytes, height: plan.width, stripBytes: slabBytes)
    // Zeroed once: lanes past a short slab's rows hold old bytes, blurred and never scattered back.
    transposed = .allocate(capacity: plan.width * slabBytes)
    transposed.initialize(repeating: 0, count: plan.width * slabBytes)
    // The last 16 finished transposed rows (pixels), scattered back 16 pixels at a time.
    finished = .allocate(capacity: 16 * slabBytes)
    slabTranspose = SlabTranspose(
      width: plan.width, channels: plan.channels, lanes: lanes, rowBytes: plan.rowBytes, transposed: transposed,
      finished: finished)
  }

  func deallocate() {
    cascade.deallocate()
    transposed.deallocate()
    finished.deallocate()
  }

  /// Three horizontal passes over the `rows` rows (at most a slab) from `source` into the rows from `destination`.
  func blur(_ source: UnsafePointer<UInt8>, rows: Int, into destination: UnsafeMutablePointer<UInt8>) {
    slabTranspose.gather(source, rows: rows)
    let (finished, slabBytes, slabTranspose) = (finished, slabBytes, slabTranspose)
    cascade.run(
      UnsafePointer(transposed), columns: 0..<slabBytes, rows: 0..<width,
      outputRow: { finished + ($0 & 15) &* slabBytes },
      finished: { x in slabTranspose.scatter(x, into: destination, rows: rows) })
  }
}
