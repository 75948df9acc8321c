import Foundation
import SpindleTestSupport
import Testing

@testable import TiltShift

/// A review of the streaming in-place filter (``TiltShiftPlan/runStreaming(inPlace:bands:chunkRows:)``): its output
/// must be the whole-image form's (``TiltShiftFilter/apply(to:bands:)`` with one band) byte for byte, for random
/// sizes, parameters, orientations, layouts, band counts and chunk sizes, and for the edge cases of its ring.
@Suite(.offThePool) struct StreamingFilterReviewTests {
  /// A quarter of the random cases under ThreadSanitizer (CI's run): it looks for races, which a few cases of each
  /// kind reach, and the full count would starve the timing-bound tests running beside these.
  static func cases(_ count: Int) -> Int { underThreadSanitizer ? max(2, count / 4) : count }

  /// Whether this is CI's ThreadSanitizer run (the fixed sweeps then take fewer step sizes and orientations).
  static let underThreadSanitizer = ProcessInfo.processInfo.environment["SPINDLE_EXPECT_TSAN"] == "1"

  /// A small seeded generator (SplitMix64), so every failure names a case that can be run again.
  struct Generator {
    var state: UInt64
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int {
      range.lowerBound + Int(next() % UInt64(range.count))
    }
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    mutating func pick<T>(_ values: [T]) -> T { values[int(0...values.count - 1)] }
  }

  /// Streams `image` with `plan` and returns the result.
  static func streamed(_ image: Image, _ plan: TiltShiftPlan, bands: Int, chunkRows: Int) -> Image {
    var copy = image
    copy.withUnsafeMutablePixels { plan.runStreaming(inPlace: $0.baseAddress!, bands: bands, chunkRows: chunkRows) }
    return copy
  }

  /// Random clear bands: inside the image, touching its ends, empty, the whole image; intensity 0 (clear rows
  /// between two blurred ranges), 1 (weights of 255) or anything between.
  static func randomParameters(_ random: inout Generator, radius: Double) throws -> TiltShiftParameters {
    var low = random.pick([0, 1, random.unit(), random.unit(), random.unit() * 0.2])
    var high = random.pick([0, 1, random.unit(), random.unit(), 1 - random.unit() * 0.2])
    if low > high { swap(&low, &high) }
    let inner = random.pick([0, 0, 1, random.unit()])
    return try TiltShiftParameters(radius: radius, clearBand: low...high, innerIntensity: inner)
  }

  /// Checks every in-place entry point against the whole-image form; returns how many streamed runs were compared.
  @discardableResult
  static func check(
    _ image: Image, _ parameters: TiltShiftParameters, bands: Int, chunkRows: Int, label: String
  ) -> Int {
    let filter = TiltShiftFilter(parameters: parameters)
    let expected = filter.apply(to: image, bands: 1)
    let box = parameters.boxWidth
    guard box > 1 else { return 0 }
    let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: box))
    var checked = 0
    if plan.canStream {
      #expect(Self.streamed(image, plan, bands: bands, chunkRows: chunkRows) == expected, "\(label)")
      checked += 1
    }
    var inPlace = image
    filter.applyInPlace(to: &inPlace, bands: bands)
    #expect(inPlace == expected, "applyInPlace, \(label)")
    let consumed = filter.apply(consuming: image, bands: bands, scratchFrom: nil)
    #expect(consumed == expected, "apply(consuming:), \(label)")
    return checked
  }

  /// ``check(_:_:bands:chunkRows:label:)`` on a noise image of the given size, layout and orientation.
  static func checkCase(
    _ name: String, seed: UInt32, width: Int, height: Int, layout: Image.Layout, orientation: UInt8,
    _ parameters: TiltShiftParameters, bands: Int, chunkRows: Int
  ) -> Int {
    var image = TestImages.noise(width: width, height: height, layout: layout, seed: seed)
    image.exif = TestImages.exif(orientation: orientation)
    let label =
      "\(name): \(width)x\(height) \(layout) o\(orientation), box \(parameters.boxWidth), "
      + "band \(parameters.clearBand) inner \(parameters.innerIntensity), \(bands) bands, \(chunkRows) rows"
    return check(image, parameters, bands: bands, chunkRows: chunkRows, label: label)
  }

  /// Small images (1 row tall, 1 pixel wide, shorter and taller than the ring), every layout and orientation,
  /// radius 0 up to boxes wider than the image, 1 to 64 bands, chunks of 1 row up to more than the image.
  @Test func randomSmallImagesMatchTheWholeImageForm() throws {
    var random = Generator(state: 0x5EED_0010)
    var streamedCases = 0
    for index in 0..<Self.cases(250) {
      let width = random.pick([1, 2, 3, random.int(1...17), random.int(1...90)])
      let height = random.pick([1, 2, 3, random.int(1...40), random.int(1...260)])
      let layout = random.pick(Image.Layout.allCases)
      let orientation = UInt8(random.int(1...8))
      let radius = random.pick([0, 0.5, 1, 2, Double(random.int(1...12)), random.unit() * 80])
      let parameters = try Self.randomParameters(&random, radius: radius)
      let bands = random.pick([1, 2, 3, 7, 64])
      let chunkRows = random.pick([1, 2, 3, random.int(1...20), 64, random.int(1...400)])
      streamedCases += Self.checkCase(
        "case \(index)", seed: UInt32(index + 1), width: width, height: height, layout: layout,
        orientation: orientation, parameters, bands: bands, chunkRows: chunkRows)
    }
    #expect(streamedCases > Self.cases(250) * 3 / 5)
  }

  /// Images several rings tall, so the ring wraps many times and a second walk restarts in it: narrow images,
  /// radii up to about 100 rows, the clear band inside (two runs) or at an end (one run at row 0 or the last row).
  @Test func randomTallImagesWrapTheRingAndMatch() throws {
    var random = Generator(state: 0x5EED_0011)
    var streamedCases = 0
    for index in 0..<Self.cases(60) {
      let width = random.pick([1, 5, random.int(1...24)])
      let radius = random.pick([1, 3, Double(random.int(4...30)), random.unit() * 60])
      let box = try TiltShiftParameters(radius: radius, clearBand: 0.4...0.6, innerIntensity: 0).boxWidth
      let chunkRows = random.pick([1, 2, 7, 64, random.int(1...100)])
      // Between a little less than one ring and about four rings.
      let ring = chunkRows + 6 * (box / 2) + 8
      let height = random.int(max(1, ring - 10)...(4 * ring + 20))
      let layout = random.pick(Image.Layout.allCases)
      let orientation = UInt8(random.pick([1, 1, 3, 4, 6, 8]))
      let parameters = try Self.randomParameters(&random, radius: radius)
      let bands = random.pick([1, 2, 3, 64])
      streamedCases += Self.checkCase(
        "tall case \(index)", seed: UInt32(1000 + index), width: width, height: height, layout: layout,
        orientation: orientation, parameters, bands: bands, chunkRows: chunkRows)
    }
    #expect(streamedCases > Self.cases(60) * 5 / 6)
  }

  /// Two walks whose gap is just over the merge limit (`3·radius + 1` clear rows: separate walks) and at it
  /// (merged): the second walk's first ring rows must not be confused with the first's.
  @Test func walksSeparatedByTheSmallestGapMatch() throws {
    var checked = 0
    for radius in [1.0, 2, 5, 11] {
      for height in [97, 251] {
        for (low, high) in [(0.3, 0.7), (0.45, 0.55), (0.48, 0.52), (0.1, 0.2), (0.8, 0.95)] {
          let parameters = try TiltShiftParameters(radius: radius, clearBand: low...high, innerIntensity: 0)
          var image = TestImages.noise(width: 9, height: height, layout: .rgba, seed: UInt32(height))
          image.exif = TestImages.exif(orientation: 1)
          let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: parameters.boxWidth))
          for (chunkRows, bands) in Self.walkSteps {
            let label = "radius \(radius) \(height) rows, band \(low)...\(high), runs \(plan.verticalRuns)"
            checked += Self.check(image, parameters, bands: bands, chunkRows: chunkRows, label: label)
          }
        }
      }
    }
    #expect(checked == 4 * 2 * 5 * Self.walkSteps.count)
  }

  /// Step sizes and band counts of the walk sweeps.
  static let walkSteps = underThreadSanitizer ? [(4, 3)] : [(1, 1), (4, 3), (64, 2)]

  /// A sweep of clear gaps across the merge limit: the two blurred ranges are one walk when at most `3·radius + 1`
  /// clear rows lie between them, else two walks, the second starting `3·radius` rows into the first's margin.
  @Test func gapsAcrossTheMergeLimitMatch() throws {
    var gaps: Set<Int> = []
    for radius in [2.0, 4] {
      let parameters = try TiltShiftParameters(radius: radius, clearBand: 0.46...0.54, innerIntensity: 0)
      let limit = 3 * (parameters.boxWidth / 2) + 1
      for height in stride(from: 40, through: 260, by: 3) {
        var image = TestImages.noise(width: 3, height: height, layout: .grayAlpha, seed: UInt32(height))
        image.exif = TestImages.exif(orientation: 1)
        let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: parameters.boxWidth))
        let final = plan.finalRows
        guard final.count == 2 else { continue }
        let gap = final[1].lowerBound - final[0].upperBound
        #expect(plan.verticalRuns.count == (gap <= limit ? 1 : 2), "gap \(gap), limit \(limit)")
        if abs(gap - limit) <= 2 { gaps.insert(gap - limit) }
        for (chunkRows, bands) in Self.underThreadSanitizer ? [(5, 2)] : [(1, 2), (5, 1)] {
          let label = "radius \(radius) \(height) rows, gap \(gap) (limit \(limit)), runs \(plan.verticalRuns)"
          Self.check(image, parameters, bands: bands, chunkRows: chunkRows, label: label)
        }
      }
    }
    #expect(gaps.isSuperset(of: [0, 1]), "gaps around the limit seen: \(gaps.sorted())")
  }

  /// Boxes at the streaming limit (the widest boxes that stream for RGB and RGBA, the narrowest that do not) and
  /// far past it for gray (which always streams), on images narrower and shorter than the box.
  @Test func boxesNearTheStreamingLimitMatch() throws {
    var streamedCases = 0
    // Box 1023 (radius 511) streams for 3 and 4 channels; box 1025 (radius 512) does not.
    for (radius, layout) in [
      (544.0, Image.Layout.rgb), (544, .rgba), (545, .rgb), (546, .rgba), (545, .gray), (2000, .gray),
      (2000, .grayAlpha), (700, .grayAlpha),
    ] {
      for (width, height) in [(1, 40), (33, 7), (24, 150)] {
        for orientation: UInt8 in Self.limitOrientations {
          let parameters = try TiltShiftParameters(radius: radius, clearBand: 0.3...0.6, innerIntensity: 0.2)
          var image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(width + height))
          image.exif = TestImages.exif(orientation: orientation)
          let label = "box \(parameters.boxWidth) \(width)x\(height) \(layout) o\(orientation)"
          streamedCases += Self.check(image, parameters, bands: 2, chunkRows: 17, label: label)
        }
      }
    }
    #expect(streamedCases >= 3 * Self.limitOrientations.count * 4)
  }

  /// The orientations of the streaming-limit sweep (both mask axes; one under ThreadSanitizer).
  static let limitOrientations: [UInt8] = underThreadSanitizer ? [6] : [1, 6]

  /// Rows wider than one column strip (2048 bytes at small radii, less at larger ones), so several strips walk and
  /// blend the same output row at once, the last one partial; many bands.
  @Test func randomWideImagesWithSeveralStripsMatch() throws {
    var random = Generator(state: 0x5EED_0012)
    var streamedCases = 0
    for index in 0..<Self.cases(10) {
      let layout = random.pick(Image.Layout.allCases)
      let width = random.int(2049...4700) / layout.channels
      let height = random.pick([1, 2, random.int(3...30), random.int(30...70)])
      let radius = random.pick([1, 4, Double(random.int(5...40)), random.unit() * 150])
      let parameters = try Self.randomParameters(&random, radius: radius)
      let orientation = UInt8(random.int(1...8))
      let bands = random.pick([2, 3, 5, 64])
      let chunkRows = random.pick([1, 3, 64, random.int(1...50)])
      var image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(2000 + index))
      image.exif = TestImages.exif(orientation: orientation)
      let label =
        "wide case \(index): \(width)x\(height) \(layout) o\(orientation), box \(parameters.boxWidth), "
        + "band \(parameters.clearBand) inner \(parameters.innerIntensity), \(bands) bands, \(chunkRows) rows"
      streamedCases += Self.check(image, parameters, bands: bands, chunkRows: chunkRows, label: label)
    }
    #expect(streamedCases >= Self.cases(10) * 7 / 10)
  }

  /// The plan's `canStream` boundary is where the comment puts it: RGB and RGBA stream up to box 1023.
  @Test func theStreamingLimitIsBoxWidth1023ForColour() {
    let image = TestImages.noise(width: 4, height: 4, layout: .rgb, seed: 1)
    let rgba = TestImages.noise(width: 4, height: 4, layout: .rgba, seed: 1)
    let gray = TestImages.noise(width: 4, height: 4, layout: .gray, seed: 1)
    for (box, streams) in [(1023, true), (1025, false)] {
      for picture in [image, rgba] {
        let plan = TiltShiftPlan(image: picture, parameters: .standard, kernel: BoxKernel(width: box))
        #expect(plan.canStream == streams, "box \(box), \(picture.layout)")
      }
    }
    #expect(TiltShiftPlan(image: gray, parameters: .standard, kernel: BoxKernel(width: 3761)).canStream)
  }
}
