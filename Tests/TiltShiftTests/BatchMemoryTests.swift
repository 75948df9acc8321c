import Foundation
import SpindleTestSupport
import Testing

@testable import TiltShift

/// Issue 14 item 10 (and 7): files are admitted by their decoded size under a memory budget.
@Suite(.offThePool) struct BatchMemoryTests {
  /// `count` 96 × 64 RGB PNGs in a fresh folder, their outputs, and the largest and smallest estimates.
  static func pngs(_ count: Int) throws -> (items: [BatchItem], estimate: Int, smallest: Int) {
    let folder = try TiltShiftBatchTests.folder()
    var estimate = 0
    var smallest = Int.max
    let items = try (0..<count).map { index in
      let input = folder + "/in-\(index).png"
      let bytes = try ImageEncoder(format: .png).encode(SamplePhoto(seed: UInt64(index)).render(width: 96, height: 64))
      try ImageFile.writeAtomically(bytes, to: input)
      let info = ImageInfo(format: .png, width: 96, height: 64, layout: .rgb)
      let cost = MemoryEstimate.bytes(info: info, fileBytes: bytes.count, configuration: BatchConfiguration())
      estimate = max(estimate, cost)
      smallest = min(smallest, cost)
      return BatchItem(input: input, output: folder + "/out-\(index).png")
    }
    return (items, estimate, smallest)
  }

  @Test func theBudgetBoundsWhatIsInFlight() async throws {
    let (items, estimate, _) = try Self.pngs(5)
    // Room for one file but not two: they go one at a time although four could be in memory by count.
    let budget = estimate * 3 / 2
    let configuration = BatchConfiguration(jobs: 2, maxImagesInMemory: 4, memoryBudget: budget)
    let summary = await TiltShiftBatch(items: items, configuration: configuration).run()
    #expect(summary.progress.succeeded == 5)
    #expect(summary.progress.peakInFlight == 1)
    #expect(summary.progress.peakBytesInFlight <= budget && summary.progress.peakBytesInFlight > 0)
    // Room for three.
    let (more, _, _) = try Self.pngs(6)
    let roomy = BatchConfiguration(jobs: 2, maxImagesInMemory: 6, memoryBudget: estimate * 3)
    let wide = await TiltShiftBatch(items: more, configuration: roomy).run()
    #expect(wide.progress.succeeded == 6 && wide.progress.peakBytesInFlight <= estimate * 3)
  }

  @Test func aFileOverTheWholeBudgetIsRefusedBeforeDecoding() async throws {
    let (items, _, smallest) = try Self.pngs(2)
    let configuration = BatchConfiguration(jobs: 1, memoryBudget: smallest - 1)
    let summary = await TiltShiftBatch(items: items, configuration: configuration).run()
    #expect(summary.progress.failed == 2)
    guard case .failed(let error) = summary.reports[0].outcome,
      case .exceedsMemoryBudget(96, 64, let bytes, smallest - 1) = error.kind, bytes >= smallest
    else {
      Issue.record("expected a memory refusal, got \(summary.reports[0].outcome)")
      return
    }
    #expect(error.description.contains("more than the memory budget"))
    #expect(summary.reports[0].timings.decode == 0, "refused from the header, never decoded")
    #expect(!FileManager.default.fileExists(atPath: items[0].output))
  }

  @Test func a102MegapixelFrameFitsTheDefaultBudgetByItsHeader() throws {
    // 11648 × 8736 RGB, the medium-format frame of the issue: refused by the old 100 MP default.
    let info = ImageInfo(format: .jpeg, width: 11648, height: 8736, layout: .rgb)
    let estimate = MemoryEstimate.bytes(info: info, fileBytes: 60 << 20, configuration: BatchConfiguration())
    #expect(info.width * info.height > 100_000_000)
    #expect(estimate <= 1 << 29, "\(estimate) fits half a GiB (the default budget is half the RAM, up to 4 GiB)")
  }

  /// An 8-bit file is filtered in place through a ring of rows: its estimate counts its pixels once (and an eighth
  /// for a pooled buffer a little larger), the ring, and the file twice. A 16-bit file, or a box too wide to
  /// stream, counts its pixels three times.
  @Test func theEstimateFollowsWhatTheFilterHolds() throws {
    let configuration = BatchConfiguration(bandsPerImage: 2)
    let photo = ImageInfo(format: .jpeg, width: 4000, height: 3000, layout: .rgb)
    let file = 5 << 20
    let streaming = MemoryEstimate.bytes(info: photo, fileBytes: file, configuration: configuration)
    let kernel = BoxKernel(width: configuration.filter.parameters.boxWidth)
    let ring = TiltShiftPlan.streamingBytes(width: 4000, height: 3000, channels: 3, kernel: kernel, bands: 2)
    #expect(streaming == photo.decodedByteCount + photo.decodedByteCount / 8 + ring + 2 * file)
    #expect(ring > 174 * 12_000 && ring < 16 << 20, "the ring and the cascades: \(ring) bytes, not an image")
    let deep = ImageInfo(format: .png, width: 4000, height: 3000, layout: .rgb, bitDepth: 16)
    #expect(
      MemoryEstimate.bytes(info: deep, fileBytes: file, configuration: configuration)
        == 3 * deep.decodedByteCount + 2 * file)
    var wide = configuration
    wide.filter = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 700))
    #expect(!TiltShiftPlan.canStream(channels: 3, kernel: BoxKernel(width: wide.filter.parameters.boxWidth)))
    #expect(
      MemoryEstimate.bytes(info: photo, fileBytes: file, configuration: wide) == 3 * photo.decodedByteCount + 2 * file)
    var unblurred = configuration
    unblurred.filter = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 0))
    #expect(
      MemoryEstimate.bytes(info: photo, fileBytes: file, configuration: unblurred)
        == 3 * photo.decodedByteCount + 2 * file, "no blur: the estimate of old, an upper bound")
  }

  /// A budget that holds two 8-bit files by what the streaming filter needs (but not by three copies of their
  /// pixels each) has two in flight.
  @Test func aBudgetForTwoStreamingFilesRunsTwoAtOnce() async throws {
    let folder = try TiltShiftBatchTests.folder()
    var items: [BatchItem] = []
    var largest = 0
    var largestFile = 0
    for index in 0..<3 {
      let input = folder + "/wide-\(index).jpg"
      let bytes = try ImageEncoder(format: .jpeg).encode(
        SamplePhoto(seed: UInt64(index)).render(width: 800, height: 600))
      try ImageFile.writeAtomically(bytes, to: input)
      items.append(BatchItem(input: input, output: folder + "/wide-out-\(index).jpg"))
      largestFile = max(largestFile, bytes.count)
    }
    let configuration = BatchConfiguration(jobs: 2, maxImagesInMemory: 3)
    for item in items { largest = max(largest, MemoryEstimate(item: item, configuration: configuration).bytes) }
    let budget = 2 * largest
    #expect(
      budget < 2 * MemoryEstimate.bytes(decoded: 800 * 600 * 3, fileBytes: largestFile), "three copies would not fit")
    var bounded = configuration
    bounded.memoryBudget = budget
    let summary = await TiltShiftBatch(items: items, configuration: bounded).run()
    #expect(summary.progress.succeeded == 3)
    #expect(summary.progress.peakInFlight == 2)
    #expect(summary.progress.peakBytesInFlight <= budget)
  }

  @Test func aMediumFormatHeaderIsAdmittedByTheDefaults() async throws {
    // A PNG whose header is an 11648 × 8736 frame and whose pixels are missing: admitted (and found short),
    // where the old fixed 100 MP default refused it for its size.
    let folder = try TiltShiftBatchTests.folder()
    let header = TestImages.png(width: 11648, height: 8736, bitDepth: 8, colorType: 2, rows: [])
    let input = folder + "/frame.png"
    try ImageFile.writeAtomically(header, to: input)
    let summary = await TiltShiftBatch(items: [BatchItem(input: input, output: folder + "/out.png")]).run()
    guard case .failed(let error) = summary.reports[0].outcome else {
      Issue.record("a frame with no pixel data cannot succeed: \(summary.reports[0].outcome)")
      return
    }
    if case .truncated(.png, 0, 8736, _) = error.kind {
    } else {
      Issue.record("expected it admitted and found empty, got \(error.kind)")
    }
  }

  @Test func lenientDecodesReportTheirWarnings() async throws {
    let (items, _, _) = try Self.pngs(1)
    let bytes = try ImageFile.read(items[0].input)
    try ImageFile.writeAtomically(Array(bytes.prefix(bytes.count * 2 / 3)), to: items[0].input, replacingExisting: true)
    var decoder = ImageDecoder()
    let strict = await TiltShiftBatch(items: items, configuration: BatchConfiguration(decoder: decoder)).run()
    #expect(strict.progress.failed == 1)
    decoder.isLenient = true
    let lenient = await TiltShiftBatch(items: items, configuration: BatchConfiguration(decoder: decoder)).run()
    #expect(lenient.progress.succeeded == 1)
    let warnings = lenient.reports[0].warnings
    #expect(warnings.count == 1 && warnings[0].hasPrefix(items[0].input + ": the PNG file ends too early: rows "))
  }
}
