import Foundation
import Spindle
import SpindleTestSupport
import Synchronization
import Testing

@testable import TiltShift

/// Adversarial checks of the pooled, in-place batch pipeline: a batch's outputs against decode → `apply(to:)` →
/// encode done by hand on a mix of layouts, depths, orientations and damaged files, and the pool's bytes against
/// the memory budget the documentation says they fit in.
@Suite(.offThePool) struct PixelBufferPoolReviewTests {
  /// What the batch must write for `item`: the same steps, with fresh buffers and the out-of-place filter.
  static func byHand(_ item: BatchItem, _ configuration: BatchConfiguration) throws -> [UInt8] {
    let bytes = try ImageFile.read(item.input)
    let inputFormat = try #require(ImageFormat(detecting: bytes))
    let format = item.format ?? configuration.outputFormat ?? inputFormat
    var decoder = configuration.decoder
    decoder.keeps16Bits = format == .png
    var warnings: [String] = []
    var image = configuration.filter.apply(to: try decoder.decode(bytes, warnings: &warnings))
    if configuration.stripsMetadata {
      image = image.orientedUpright()
      image.metadata.strip()
    }
    let encoder = ImageEncoder(
      format: format, jpegQuality: configuration.jpegQuality, background: configuration.background)
    return try encoder.encode(image)
  }

  /// Files of every layout, 8 and 16 bits, several sizes (so pooled buffers are cut and extended), EXIF
  /// orientations that turn the mask, tiny images, and a JPEG and a PNG cut short (decoded leniently).
  static func mixedInputs(in folder: String) throws -> [BatchItem] {
    var items: [BatchItem] = []
    func add(_ bytes: [UInt8], _ name: String, format: ImageFormat? = nil) throws {
      let input = folder + "/in-\(items.count)-\(name)"
      try ImageFile.writeAtomically(bytes, to: input)
      let suffix = (format ?? (name.hasSuffix("png") ? .png : .jpeg)) == .png ? "png" : "jpg"
      items.append(BatchItem(input: input, output: folder + "/out-\(items.count).\(suffix)", format: format))
    }
    let jpeg = ImageEncoder(format: .jpeg)
    let png = ImageEncoder(format: .png)
    for (index, layout) in Image.Layout.allCases.enumerated() {
      let size = [(70, 50), (64, 48), (90, 40), (50, 70)][index % 4]
      var image = TestImages.picture(width: size.0, height: size.1, layout: layout, seed: UInt32(index + 1))
      image.exif = TestImages.exif(orientation: UInt8([1, 6, 3, 8][index % 4]))
      try add(try png.encode(image), "\(layout).png")
      if !layout.hasAlpha { try add(try jpeg.encode(image), "\(layout).jpg") }
    }
    for orientation: UInt8 in 1...8 {
      var photo = SamplePhoto(seed: UInt64(orientation)).render(width: 64 + Int(orientation), height: 48)
      photo.exif = TestImages.exif(orientation: orientation)
      try add(try jpeg.encode(photo), "orientation-\(orientation).jpg")
    }
    let picture = TestImages.picture(width: 48, height: 40, layout: .rgb, seed: 9)
    let deep = Image(width: 48, height: 40, layout: .rgb, samples16: picture.pixels.map { UInt16($0) &* 257 &+ 3 })
    try add(try png.encode(deep), "deep.png")
    // The same 16-bit file into a JPEG: decoded to 8 bits, so it goes through the pool and the in-place filter.
    try add(try png.encode(deep), "deep-to-jpeg.png", format: .jpeg)
    for (width, height) in [(1, 1), (3, 2), (2, 9)] {
      try add(try jpeg.encode(TestImages.noise(width: width, height: height, layout: .rgb)), "tiny-\(width).jpg")
    }
    let whole = try jpeg.encode(SamplePhoto(seed: 77).render(width: 72, height: 56))
    try add(Array(whole.prefix(whole.count * 6 / 10)), "cut.jpg")
    let wholePNG = try png.encode(TestImages.noise(width: 60, height: 44, layout: .rgba, seed: 4))
    try add(Array(wholePNG.prefix(wholePNG.count * 6 / 10)), "cut.png")
    return items
  }

  @Test(
    "a batch of mixed layouts, depths, orientations, sizes and cut files writes what decode, filter, encode by hand do",
    arguments: [false, true])
  func mixedBatchMatchesByHand(_ strips: Bool) async throws {
    let folder = try makeTemporaryFolder("spindle-pool-review").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.mixedInputs(in: folder)
    for (jobs, radius) in [(1, 3.0), (2, 40.0)] {
      for item in items { try? FileManager.default.removeItem(atPath: item.output) }
      var decoder = ImageDecoder()
      decoder.isLenient = true
      let filter = TiltShiftFilter(
        parameters: try TiltShiftParameters(radius: radius, clearBand: 0.3...0.55, innerIntensity: 0))
      let configuration = BatchConfiguration(
        filter: filter, decoder: decoder, jobs: jobs, bandsPerImage: 2, stripsMetadata: strips)
      let batch = TiltShiftBatch(items: items, configuration: configuration)
      let summary = await batch.run()
      #expect(summary.progress.succeeded == items.count, "jobs \(jobs), strip \(strips): \(summary)")
      #expect(batch.buffers.reuseCount > 0)
      #expect(batch.buffers.heldCount == 0 && batch.buffers.heldBytes == 0)
      for item in items {
        let expected = try Self.byHand(item, configuration)
        #expect(try ImageFile.read(item.output) == expected, "jobs \(jobs), strip \(strips): \(item.input)")
      }
    }
  }

  /// `BatchConfiguration.memoryBudget` says the pool's third of the budget "is what the estimate of the files in
  /// flight leaves (it counts three decoded sizes a file; a file holds two)". A 16-bit file holds three (its
  /// buffers are never pooled), so the buffers the pool keeps from earlier 8-bit files are over the budget while
  /// it runs: here the pool holds an 8-bit file's two buffers for the whole of a 16-bit file whose estimate is
  /// the whole budget.
  @Test("pooled buffers and the estimate of the file in flight fit in the memory budget together")
  func pooledBuffersFitBesideA16BitFile() async throws {
    let folder = try makeTemporaryFolder("spindle-pool-budget").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let first = folder + "/small.jpg"
    try ImageFile.writeAtomically(
      try ImageEncoder(format: .jpeg).encode(SamplePhoto(seed: 1).render(width: 120, height: 100)), to: first)
    let second = folder + "/deep.png"
    let picture = TestImages.noise(width: 100, height: 100, layout: .rgb)
    try ImageFile.writeAtomically(
      try ImageEncoder(format: .png).encode(
        Image(width: 100, height: 100, layout: .rgb, samples16: picture.pixels.map { UInt16($0) &* 257 })),
      to: second)
    let items = [
      BatchItem(input: first, output: folder + "/small-out.png"),
      BatchItem(input: second, output: folder + "/deep-out.png"),
    ]
    var configuration = BatchConfiguration(
      outputFormat: .png, jobs: 1, bandsPerImage: 1, maxImagesInMemory: 1, memoryBudget: nil)
    let estimate = MemoryEstimate(item: items[1], configuration: configuration).bytes
    #expect(MemoryEstimate(item: items[0], configuration: configuration).bytes < estimate)
    configuration.memoryBudget = estimate
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    let heldWhenTheDeepFileEnded = Locked(-1)
    let summary = await batch.run { report, _ in
      if report.item.input == second { heldWhenTheDeepFileEnded.withLock { $0 = batch.buffers.heldBytes } }
    }
    #expect(summary.progress.succeeded == 2)
    let held = heldWhenTheDeepFileEnded.withLock { $0 }
    #expect(held >= 0)
    #expect(
      held + estimate <= estimate,
      "the pool held \(held) bytes beside a file estimated at the whole budget (\(estimate) bytes)")
  }
  @Test("a batch cancelled mid-way, then run again, ends with an empty pool and every written file right")
  func cancelledBatchHoldsNothing() async throws {
    let folder = try makeTemporaryFolder("spindle-pool-cancel").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try (0..<12).map { index in
      let input = folder + "/in-\(index).jpg"
      let photo = SamplePhoto(seed: UInt64(index)).render(width: 96 + 8 * (index % 3), height: 64)
      try ImageFile.writeAtomically(ImageEncoder(format: .jpeg).encode(photo), to: input)
      return BatchItem(input: input, output: folder + "/out-\(index).jpg")
    }
    // A corrupt file among them: its decode fails after the pool may have handed it a buffer.
    try ImageFile.writeAtomically(
      [0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + [UInt8](repeating: 7, count: 300), to: items[2].input)
    let configuration = BatchConfiguration(jobs: 2, bandsPerImage: 2)
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    let summary = await batch.run { _, progress in
      if progress.completed == 4 { batch.cancel() }
    }
    #expect(summary.progress.failed >= 1 && summary.progress.cancelled > 0, "\(summary.progress)")
    #expect(summary.progress.completed == items.count)
    #expect(batch.buffers.heldCount == 0 && batch.buffers.heldBytes == 0)
    let again = await batch.run()
    #expect(again.progress.completed == items.count, "a second run starts nothing and does not trap")
    #expect(batch.buffers.heldCount == 0)
    for (index, item) in items.enumerated() where index != 2 && FileManager.default.fileExists(atPath: item.output) {
      #expect(try ImageFile.read(item.output) == (try Self.byHand(item, configuration)), "\(item.output)")
    }
  }
  @Test("in place (scratch from a pool) and out of place agree on random images, orientations, bands and radii")
  func inPlaceFuzz() throws {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    func random(_ range: ClosedRange<Int>) -> Int {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return range.lowerBound + Int((state >> 33) % UInt64(range.count))
    }
    for trial in 0..<40 {
      let layout = Image.Layout.allCases[random(0...3)]
      let (width, height) = (random(1...90), random(1...90))
      let radius = [0.0, 0.6, 1, 2, 5, 13, 40, 700][random(0...7)]
      let low = Double(random(0...10)) / 10
      let high = min(1, low + Double(random(0...6)) / 10)
      let inner = [0.0, 1.0, 0.5][random(0...2)]
      let parameters = try TiltShiftParameters(radius: radius, clearBand: low...high, innerIntensity: inner)
      let filter = TiltShiftFilter(parameters: parameters)
      var image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(trial + 1))
      image.exif = TestImages.exif(orientation: UInt8(random(1...8)))
      let bands = random(1...5)
      let expected = filter.apply(to: image, bands: 1)
      let label = "\(width)x\(height) \(layout) o\(image.orientation), \(parameters), \(bands) bands"
      // The pool holds the image's own storage (as if it had escaped): neither path may write it.
      let pool = PixelBufferPool(maxBuffers: 2, maxBytes: .max)
      let kept = image.pixels
      pool.giveBack(image.pixels)
      let inPlace = filter.apply(consuming: image, bands: bands, scratchFrom: pool)
      #expect(inPlace == expected, "in place: \(label)")
      #expect(image.pixels == kept, "the input is untouched: \(label)")
    }
  }
  @Test("threads taking, writing, boxing and giving back buffers never see another thread's writes")
  func poolStress() {
    let pool = PixelBufferPool(maxBuffers: 6, maxBytes: 6 * 4096)
    let clashes = Atomic<Int>(0)
    DispatchQueue.concurrentPerform(iterations: 8) { worker in
      for round in 0..<300 {
        let count = [1000, 2000, 4000][(worker + round) % 3]
        var pixels = pool.take(count: count) ?? [UInt8](repeating: 0, count: count)
        let mark = UInt8(truncatingIfNeeded: worker &* 31 &+ round)
        pixels.withUnsafeMutableBufferPointer { $0.update(repeating: mark) }
        let image = Image(width: count / 4, height: 1, layout: .rgba, pixels: pixels)
        let box = PooledImage(image, returningTo: pool)
        if round % 3 == 0, var taken = box.take() {
          taken.withUnsafeMutablePixels { $0[0] = mark }
          if taken.pixels.contains(where: { $0 != mark }) { clashes.add(1, ordering: .relaxed) }
          pool.giveBack(taken.pixels)
        }
        if pixels.contains(where: { $0 != mark }) || image.pixels.contains(where: { $0 != mark }) {
          clashes.add(1, ordering: .relaxed)
        }
      }
    }
    #expect(clashes.load(ordering: .relaxed) == 0)
    #expect(pool.reuseCount > 0)
    #expect(pool.heldCount <= 6 && pool.heldBytes <= 6 * 4096)
  }
}
