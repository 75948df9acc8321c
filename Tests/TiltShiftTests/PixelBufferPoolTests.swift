import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import TiltShift

/// The pool that hands pixel buffers from one image to the next, and the decoder, filter and batch that use it:
/// reuse must never change a pixel, never write into memory someone else still reads, and stay within its bounds.
@Suite(.offThePool) struct PixelBufferPoolTests {
  static func address(_ buffer: [UInt8]) -> UnsafeRawPointer? {
    buffer.withUnsafeBytes { $0.baseAddress }
  }

  /// A buffer of `count` bytes that no decoder or filter would write: reusing it must leave none of it behind.
  static func garbage(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) }
  }

  @Test("a buffer given back is the one taken next, same storage, by count or by capacity")
  func takeReusesTheStorage() {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    var small: [UInt8]? = Self.garbage(100)
    var large: [UInt8]? = Self.garbage(1000)
    let (smallAddress, largeAddress) = (Self.address(small!), Self.address(large!))
    let largeCapacity = large!.capacity
    pool.giveBack(small.take()!)
    pool.giveBack(large.take()!)
    #expect(pool.heldCount == 2)
    let exact = pool.take(count: 100)
    #expect(exact?.count == 100)
    #expect(exact.flatMap(Self.address) == smallAddress, "the buffer of that count, not a larger one")
    // A count a little under the capacity (within the eighth a buffer may waste): cut to it, same storage.
    let cutCount = largeCapacity * 9 / 10
    let cut = pool.take(count: cutCount)
    #expect(cut?.count == cutCount, "a larger buffer is cut to the count asked for")
    #expect(cut.flatMap(Self.address) == largeAddress, "within its capacity: no new allocation, no copy")
    #expect(pool.take(count: 10) == nil, "nothing left")
    #expect(pool.reuseCount == 2)
    #expect(pool.heldBytes == 0)
  }

  @Test("a buffer is taken only if its capacity holds the count and wastes at most an eighth of it")
  func takeNeedsTheRightCapacity() {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    // Moved into the pool (a reference kept here would make the cut below copy the buffer to a new capacity).
    var buffer: [UInt8]? = Self.garbage(800)
    let capacity = buffer!.capacity
    pool.giveBack(buffer.take()!)
    #expect(pool.take(count: capacity + 1) == nil, "too small")
    #expect(pool.take(count: capacity / 2) == nil, "twice the size asked for: a small image would hold a large buffer")
    #expect(pool.heldCount == 1, "a refused take keeps the buffer")
    pool.giveBack(Self.garbage(capacity * 2))
    let taken = pool.take(count: capacity - capacity / 16)
    #expect(taken.map { $0.capacity == capacity } == true, "the buffer within an eighth, not the one twice as large")
    let extended = pool.take(count: capacity * 2 - 8)
    #expect(extended?.count == capacity * 2 - 8, "a count a little over the buffer's count is extended within it")
    #expect(pool.heldCount == 0)
  }

  @Test("the pool frees its largest buffers first when it is trimmed to a number of bytes")
  func trimFreesTheLargestFirst() {
    let pool = PixelBufferPool(maxBuffers: 8, maxBytes: .max)
    for count in [100, 400, 200, 800] { pool.giveBack(Self.garbage(count)) }
    let small = pool.heldBytes
    pool.trim(toBytes: small - 1)
    #expect(pool.heldCount == 3 && pool.take(count: 800) == nil, "the 800-byte buffer went first")
    pool.trim(toBytes: 350)
    #expect(pool.heldBytes <= 350 && pool.heldCount == 2, "then the 400: what is left holds 100 and 200")
    pool.trim(toBytes: 0)
    #expect(pool.heldCount == 0 && pool.heldBytes == 0)
  }

  @Test("the pool keeps at most maxBuffers buffers and maxBytes bytes; a closed pool keeps nothing")
  func boundsAreKept() {
    let pool = PixelBufferPool(maxBuffers: 2, maxBytes: 10_000)
    for _ in 0..<3 { pool.giveBack(Self.garbage(1000)) }
    #expect(pool.heldCount == 2, "the third is freed")
    let big = PixelBufferPool(maxBuffers: 8, maxBytes: 10_000)
    big.giveBack(Self.garbage(6000))
    big.giveBack(Self.garbage(6000))
    #expect(big.heldCount == 1, "the second would take the pool over its bytes")
    #expect(big.heldBytes <= 10_000)
    big.close()
    #expect(big.heldCount == 0 && big.heldBytes == 0)
    big.giveBack(Self.garbage(100))
    #expect(big.heldCount == 0, "given back after close: freed")
    #expect(big.take(count: 100) == nil)
  }

  @Test("the same storage given back twice is held once")
  func sameStorageIsHeldOnce() {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    let buffer = Self.garbage(500)
    let alias = buffer
    pool.giveBack(buffer)
    pool.giveBack(alias)
    #expect(pool.heldCount == 1)
    #expect(pool.heldBytes == buffer.capacity)
  }

  @Test("a buffer still held elsewhere is copied when written, never changed under its holder")
  func aSharedBufferKeepsItsValue() throws {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    let image = TestImages.noise(width: 40, height: 30, layout: .rgb)
    let kept = image.pixels
    pool.giveBack(image.pixels)  // `image` and `kept` still hold it
    let jpeg = try ImageEncoder(format: .jpeg).encode(TestImages.noise(width: 40, height: 30, layout: .rgb, seed: 99))
    var warnings: [String] = []
    let decoded = try ImageDecoder().decode(jpeg, warnings: &warnings, reusing: pool)
    #expect(pool.reuseCount == 1, "the decode took the buffer")
    #expect(image.pixels == kept, "the image that still held it is unchanged")
    #expect(Self.address(decoded.pixels) != Self.address(kept), "the write went to a copy")
    #expect(decoded.pixels == (try ImageDecoder().decode(jpeg)).pixels)
  }

  @Test("a pooled image gives its pixels back when its last reference goes, not before")
  func pooledImageGivesBackOnRelease() {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    var first: PooledImage? = PooledImage(TestImages.noise(width: 20, height: 10, layout: .rgb), returningTo: pool)
    let address = first?.image.flatMap { Self.address($0.pixels) }
    var second = first
    first = nil
    #expect(pool.heldCount == 0, "still referenced")
    #expect(second?.image?.width == 20)
    second = nil
    #expect(pool.heldCount == 1)
    #expect(pool.take(count: 600).flatMap(Self.address) == address, "the same storage, back in the pool")
  }

  @Test("an image taken out of its box is the taker's: the box gives nothing back and has nothing left")
  func takenImageIsNotGivenBack() {
    let pool = PixelBufferPool(maxBuffers: 4, maxBytes: .max)
    var box: PooledImage? = PooledImage(TestImages.noise(width: 20, height: 10, layout: .rgb), returningTo: pool)
    var taken = box?.take()
    #expect(taken?.width == 20)
    #expect(box?.take() == nil && box?.image == nil, "taken once")
    box = nil
    #expect(pool.heldCount == 0, "the released box had nothing to give back")
    // The taker owns the pixels outright: writing them does not copy.
    let before = taken.map { Self.address($0.pixels) }
    taken?.withUnsafeMutablePixels { $0[0] = 1 }
    #expect(taken.map { Self.address($0.pixels) } == before)
  }

  @Test("the filter given an image of its own writes the output over its pixels, no copy")
  func filterInPlaceDoesNotCopy() throws {
    let filter = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 3))
    var image: Image? = TestImages.noise(width: 400, height: 300, layout: .rgb)
    let address = image.map { Self.address($0.pixels) }
    let output = filter.apply(consuming: image.take()!, bands: 2, scratchFrom: nil)
    #expect(Self.address(output.pixels) == address)
    // Streaming (the ring and cascades are smaller than this image): no image-sized buffer, the pool's is left alone.
    let streamed = TiltShiftPlan(
      image: output, parameters: filter.parameters, kernel: BoxKernel(width: filter.parameters.boxWidth))
    #expect(streamed.streams(bands: 2))
    let pool = PixelBufferPool(maxBuffers: 2, maxBytes: .max)
    pool.giveBack(Self.garbage(output.pixels.count))
    var again: Image? = TestImages.noise(width: 400, height: 300, layout: .rgb, seed: 3)
    let againAddress = again.map { Self.address($0.pixels) }
    let second = filter.apply(consuming: again.take()!, bands: 2, scratchFrom: pool)
    #expect(Self.address(second.pixels) == againAddress)
    #expect(pool.reuseCount == 0 && pool.heldCount == 1, "the streaming filter takes no scratch buffer")
    // A box too wide to stream: the whole-image form takes the pool's buffer, writes it in place and gives the same
    // storage back, not a copy of it.
    let wide = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 600))
    let scratchAddress = pool.take(count: output.pixels.count).map { buffer in
      defer { pool.giveBack(buffer) }
      return Self.address(buffer)
    }
    var third: Image? = TestImages.noise(width: 400, height: 300, layout: .rgb, seed: 4)
    let thirdAddress = third.map { Self.address($0.pixels) }
    let plan = TiltShiftPlan(
      image: third!, parameters: wide.parameters, kernel: BoxKernel(width: wide.parameters.boxWidth))
    #expect(!plan.canStream)
    let reuses = pool.reuseCount
    let wideOutput = wide.apply(consuming: third.take()!, bands: 2, scratchFrom: pool)
    #expect(Self.address(wideOutput.pixels) == thirdAddress)
    #expect(pool.reuseCount == reuses + 1 && pool.heldCount == 1)
    #expect(pool.take(count: output.pixels.count).map(Self.address) == scratchAddress, "written in place, given back")
  }

  @Test("applyInPlace(to:) filters in place: the output of apply(to:), in the image's own storage")
  func publicInPlaceFilter() throws {
    let filter = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 5))
    for layout in Image.Layout.allCases {
      let original = TestImages.noise(width: 70, height: 52, layout: layout)
      var image = original
      image.withUnsafeMutablePixels { _ in }  // storage of its own
      let address = Self.address(image.pixels)
      filter.applyInPlace(to: &image, bands: 2)
      #expect(image == filter.apply(to: original, bands: 2), "\(layout)")
      #expect(Self.address(image.pixels) == address, "\(layout): no copy")
      #expect(original == TestImages.noise(width: 70, height: 52, layout: layout), "a value it shared is untouched")
    }
    // A 16-bit image: filtered as apply(to:) does, stored back.
    let deep = Image(
      width: 20, height: 30, layout: .rgb, samples16: (0..<1800).map { UInt16(truncatingIfNeeded: $0 &* 37) })
    var filtered = deep
    filter.applyInPlace(to: &filtered, bands: 1)
    #expect(filtered == filter.apply(to: deep, bands: 1) && filtered != deep)
  }

  @Test(
    "decoding into a reused buffer full of other bytes gives the pixels of a fresh decode",
    arguments: ["jpeg", "png", "png16", "jpeg cut (lenient)", "png cut (lenient)"])
  func decodeIntoReusedBuffer(_ kind: String) throws {
    let picture = TestImages.picture(width: 48, height: 40, layout: .rgb)
    var bytes: [UInt8]
    var decoder = ImageDecoder()
    switch kind {
    case "jpeg", "jpeg cut (lenient)":
      bytes = try ImageEncoder(format: .jpeg).encode(picture)
    case "png16":
      let deep = Image(
        width: 48, height: 40, layout: .rgb, samples16: picture.pixels.map { UInt16($0) &* 251 })
      bytes = try ImageEncoder(format: .png).encode(deep)
      decoder.keeps16Bits = true
    default:
      bytes = try ImageEncoder(format: .png).encode(picture)
    }
    if kind.contains("cut") {
      bytes = Array(bytes.prefix(bytes.count * 6 / 10))
      decoder.isLenient = true
    }
    var warnings: [String] = []
    let fresh = try decoder.decode(bytes, warnings: &warnings)
    #expect(kind.contains("cut") == !warnings.isEmpty, "the cut files are damaged: \(warnings)")
    let pool = PixelBufferPool(maxBuffers: 2, maxBytes: .max)
    pool.giveBack(Self.garbage(fresh.pixels.count))
    let reused = try decoder.decode(bytes, warnings: &warnings, reusing: pool)
    // 16-bit pixels never come from the pool (a batch pools 8-bit ones only: see the memory budget).
    #expect(pool.reuseCount == (kind == "png16" ? 0 : 1), "the decode used the pool's buffer")
    #expect(reused == fresh, "no byte of the old buffer survives")
  }

  @Test("filtering in place with a reused scratch buffer gives the output of a fresh filter, clear rows included")
  func filterIntoReusedBuffer() throws {
    let image = TestImages.noise(width: 96, height: 80, layout: .rgb)
    let filter = TiltShiftFilter(
      parameters: try TiltShiftParameters(radius: 4, clearBand: 0.3...0.7, innerIntensity: 0))
    let fresh = filter.apply(to: image, bands: 2)
    // The whole-image form, over a scratch buffer full of other bytes.
    let plan = TiltShiftPlan(
      image: image, parameters: filter.parameters, kernel: BoxKernel(width: filter.parameters.boxWidth))
    var reused = image
    _ = reused.withUnsafeMutablePixels { plan.run(inPlace: $0, bands: 2, scratch: Self.garbage(image.pixels.count)) }
    #expect(reused == fresh)
    let rowBytes = image.bytesPerRow
    let rows = (0..<image.height).map { $0 * rowBytes..<($0 + 1) * rowBytes }
    #expect(rows.contains { fresh.pixels[$0] != image.pixels[$0] }, "the filter blurred rows")
    #expect(rows.contains { fresh.pixels[$0] == image.pixels[$0] }, "and kept some as they were: copied, not left")
  }

  @Test("a batch reuses buffers between files, writes what fresh buffers give, and ends with an empty pool")
  func batchReusesBuffers() async throws {
    let folder = try makeTemporaryFolder("spindle-pool").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // Two sizes, so that buffers are also cut to a smaller count and refused when too small.
    let sizes = [(64, 48), (64, 48), (80, 60), (64, 48), (48, 40), (80, 60), (64, 48)]
    let items = try TiltShiftBatchTests.items(sizes: sizes, in: folder)
    for jobs in [1, 2] {
      for item in items { try? FileManager.default.removeItem(atPath: item.output) }
      let configuration = BatchConfiguration(jobs: jobs)
      let batch = TiltShiftBatch(items: items, configuration: configuration)
      let summary = await batch.run()
      #expect(summary.progress.succeeded == items.count)
      #expect(batch.buffers.reuseCount > 0, "jobs \(jobs): later files reuse earlier files' buffers")
      #expect(batch.buffers.heldCount == 0, "jobs \(jobs): the finished batch holds no buffer")
      for item in items {
        let expected = try ImageEncoder(format: .jpeg).encode(
          configuration.filter.apply(to: try ImageDecoder().decode(contentsOf: item.input)))
        #expect(try ImageFile.read(item.output) == expected, "jobs \(jobs): \(item.output)")
      }
    }
  }

  @Test("one file at a time, every file after the first decodes into the previous file's buffer")
  func serialBatchReusesBothBuffers() async throws {
    let folder = try makeTemporaryFolder("spindle-pool-serial").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // Large enough that the filter streams (smaller images take the whole-image form and a scratch buffer).
    let items = try TiltShiftBatchTests.items(4, in: folder, width: 800, height: 600)
    let configuration = BatchConfiguration.serial()
    let kernel = BoxKernel(width: configuration.filter.parameters.boxWidth)
    #expect(TiltShiftPlan.streams(width: 800, height: 600, channels: 3, kernel: kernel, bands: 1))
    let batch = TiltShiftBatch(items: items, configuration: configuration)
    #expect(await batch.run().progress.succeeded == 4)
    // A file's buffer (decoded, then filtered in place without a scratch buffer) is back before the next file
    // starts: each stage's value is let go once the next stage's body ran.
    #expect(batch.buffers.reuseCount == items.count - 1)
  }
}
