import Foundation
import SpindleTestSupport
import Testing

@testable import TiltShift

/// A plain, slow tilt-shift written from the definition: direct window sums, no running sums, no bands.
private func referenceTiltShift(_ image: Image, _ parameters: TiltShiftParameters) -> [UInt8] {
  let (w, h, c) = (image.width, image.height, image.layout.channels)
  let d = parameters.boxWidth
  let r = d / 2
  var a = image.pixels
  func horizontal(_ p: [UInt8]) -> [UInt8] {
    var out = p
    for y in 0..<h {
      for x in 0..<w {
        for ch in 0..<c {
          var sum = 0
          for k in -r...r { sum += Int(p[(y * w + min(max(x + k, 0), w - 1)) * c + ch]) }
          out[(y * w + x) * c + ch] = UInt8((sum + r) / d)
        }
      }
    }
    return out
  }
  func vertical(_ p: [UInt8]) -> [UInt8] {
    var out = p
    for y in 0..<h {
      for x in 0..<w {
        for ch in 0..<c {
          var sum = 0
          for k in -r...r { sum += Int(p[(min(max(y + k, 0), h - 1) * w + x) * c + ch]) }
          out[(y * w + x) * c + ch] = UInt8((sum + r) / d)
        }
      }
    }
    return out
  }
  if d > 1 {
    a = horizontal(horizontal(horizontal(a)))
    a = vertical(vertical(vertical(a)))
  }
  let b0 = parameters.clearBand.lowerBound
  let b1 = parameters.clearBand.upperBound
  let mid = (b0 + b1) / 2
  let inner = parameters.innerIntensity
  var out = image.pixels
  for y in 0..<h {
    let t = (Double(y) + 0.5) / Double(h)
    let level: Double
    if t <= b0 {
      level = 1 + (inner - 1) * t / b0
    } else if t <= mid {
      level = inner - inner * (t - b0) / (mid - b0)
    } else if t <= b1 {
      level = inner * (t - mid) / (b1 - mid)
    } else {
      level = inner + (1 - inner) * (t - b1) / (1 - b1)
    }
    let m = Int((level * 255).rounded())
    for i in (y * w * c)..<((y + 1) * w * c) {
      if image.layout.hasAlpha && i % c == c - 1 { continue }
      out[i] = UInt8((Int(image.pixels[i]) * (255 - m) + Int(a[i]) * m + 127) / 255)
    }
  }
  return d > 1 ? out : image.pixels
}

@Suite("TiltShift filter", .offThePool)
struct TiltShiftFilterTests {
  @Test(arguments: [0.5, 1, 2.5, 6, 20, 150])
  func matchesTheReference(radius: Double) throws {
    let parameters = try TiltShiftParameters(radius: radius)
    for (width, height, layout) in [(37, 23, Image.Layout.rgb), (19, 41, .rgba), (13, 7, .gray), (5, 64, .grayAlpha)] {
      let image = TestImages.noise(width: width, height: height, layout: layout)
      let expected = referenceTiltShift(image, parameters)
      for bands in [1, 3] {
        let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: bands)
        #expect(output.pixels == expected, "\(width)x\(height) \(layout), radius \(radius), \(bands) bands")
        #expect(output.width == width && output.height == height && output.layout == layout)
      }
    }
  }

  @Test func matchesTheReferenceWithOtherMasks() throws {
    let image = TestImages.noise(width: 31, height: 29, layout: .rgb, seed: 3)
    for (band, inner) in [(0.0...1.0, 0.3), (0.2...0.3, 1.0), (0.5...0.5, 0.0), (0.1...0.9, 0.0)] {
      let parameters = try TiltShiftParameters(radius: 3, clearBand: band, innerIntensity: inner)
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
      #expect(output.pixels == referenceTiltShift(image, parameters), "band \(band) inner \(inner)")
    }
  }

  @Test func wideBandsAndTallImagesAgreeAcrossBandCounts() throws {
    // Wider than one 2048-byte column run, so strips are split into several runs.
    let image = TestImages.noise(width: 1500, height: 40, layout: .rgb)
    let filter = TiltShiftFilter(parameters: try TiltShiftParameters(radius: 4))
    let serial = filter.bothWays(image, bands: 1)
    #expect(filter.bothWays(image, bands: 2).pixels == serial.pixels)
    #expect(filter.bothWays(image, bands: 7).pixels == serial.pixels)
    #expect(serial.pixels != image.pixels)
  }

  /// Wide rows under boxes of every size up to radius 20, every layout, against the reference: the other reference
  /// tests take wide images with radii of 3 at most, and the tests of the streaming form compare it with the
  /// whole-image form, which runs the same horizontal passes (``HorizontalSlabs``).
  @Test func wideRowsUnderLargeBoxesMatchTheReference() throws {
    var state: UInt32 = 0x5EED_4242
    func random(_ range: ClosedRange<Int>) -> Int {
      state = state &* 1_664_525 &+ 1_013_904_223
      return range.lowerBound + Int(state >> 8) % (range.count)
    }
    let layouts: [Image.Layout] = [.gray, .grayAlpha, .rgb, .rgba]
    for trial in 0..<12 {
      let layout = layouts[trial % 4]
      let radius = Double([1, 3, random(4...20)][trial % 3])
      let parameters = try TiltShiftParameters(radius: radius, clearBand: 0.4...0.6, innerIntensity: 0.5)
      let width = random(100...600)
      let height = random(1...5)
      let image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(trial + 900))
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: random(1...3))
      #expect(
        output.pixels == referenceTiltShift(image, parameters),
        "\(width)x\(height) \(layout), radius \(radius)")
    }
  }

  /// The optimised filter (fused vertical passes in rings, strips, bands) against the plain reference on random
  /// sizes, layouts, radii, masks and band counts, including images wider than one strip.
  @Test func randomImagesAndParametersMatchTheReference() throws {
    var state: UInt32 = 0x5EED_1234
    func random(_ range: ClosedRange<Int>) -> Int {
      state = state &* 1_664_525 &+ 1_013_904_223
      return range.lowerBound + Int(state >> 8) % (range.count)
    }
    let layouts: [Image.Layout] = [.gray, .grayAlpha, .rgb, .rgba]
    for trial in 0..<16 {
      // Every eighth image is wider than a 2048-byte strip (short, small radius: the reference is slow).
      let wide = trial % 8 == 7
      let layout = layouts[random(0...3)]
      let width = wide ? random(520...760) : random(1...64)
      let height = wide ? random(1...12) : random(1...48)
      let radius = wide ? Double(random(1...3)) : Double(random(1...64)) / 4
      let low = Double(random(0...10)) / 10
      let high = min(1, low + Double(random(0...10)) / 10)
      let inner = Double(random(0...4)) / 4
      let parameters = try TiltShiftParameters(radius: radius, clearBand: low...high, innerIntensity: inner)
      let image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(trial + 11))
      let bands = random(1...4)
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: bands)
      #expect(
        output.pixels == referenceTiltShift(image, parameters),
        "\(width)x\(height) \(layout), \(parameters), \(bands) bands")
    }
  }

  @Test func tinyImagesMatchTheReference() throws {
    let parameters = try TiltShiftParameters(radius: 4)
    for (width, height, layout) in [(1, 1, Image.Layout.rgb), (1, 9, .gray), (9, 1, .rgba), (2, 2, .grayAlpha)] {
      let image = TestImages.noise(width: width, height: height, layout: layout)
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 4)
      #expect(output.pixels == referenceTiltShift(image, parameters), "\(width)x\(height)")
    }
  }

  @Test func colourUnderWideBoxesTakesNarrowSlabsAndMatchesTheReference() throws {
    // Box width 601: cascade strips of 128 bytes, narrower than 64 rows of colour pixels, so colour slabs take 32
    // rows (gray ones keep 64); the output must not depend on it.
    let parameters = try TiltShiftParameters(radius: 300, clearBand: 0.2...0.5, innerIntensity: 0.7)
    let kernel = BoxKernel(width: parameters.boxWidth)
    #expect(TiltShiftPlan.slabRows(channels: 3, kernel: kernel) == 32)
    #expect(TiltShiftPlan.slabRows(channels: 4, kernel: kernel) == 32)
    #expect(TiltShiftPlan.slabRows(channels: 1, kernel: kernel) == 64)
    #expect(TiltShiftPlan.slabRows(channels: 3, kernel: BoxKernel(width: 35)) == 64)
    for (width, height, layout) in [(23, 70, Image.Layout.rgb), (17, 45, .rgba), (20, 66, .gray)] {
      let image = TestImages.noise(width: width, height: height, layout: layout, seed: 9)
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
      #expect(output.pixels == referenceTiltShift(image, parameters), "\(width)x\(height) \(layout)")
    }
  }

  @Test func veryWideBoxesMatchTheReference() throws {
    // Box width 1129: rings so long that strips are narrower than a transposed slab, so the horizontal
    // passes go row by row (one channel keeps the slab path); both must agree with the reference.
    let parameters = try TiltShiftParameters(radius: 600, clearBand: 0.3...0.6, innerIntensity: 0.5)
    for (width, height, layout) in [(9, 7, Image.Layout.rgb), (6, 5, .gray), (4, 6, .rgba)] {
      let image = TestImages.noise(width: width, height: height, layout: layout, seed: 5)
      let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
      #expect(output.pixels == referenceTiltShift(image, parameters), "\(width)x\(height) \(layout)")
    }
  }

  /// Slabs of several 16-row groups with whole 16-pixel blocks (the vector transposes) and a tail of pixels, and
  /// clear bands wider and narrower than the gap below which the in-place vertical walks are joined.
  @Test func multiSlabImagesAndNearbyBlurredRangesMatchTheReference() throws {
    let sizes = [(53, 75, Image.Layout.rgb), (70, 90, .gray), (35, 70, .rgba), (40, 81, .grayAlpha)]
    for (width, height, layout) in sizes {
      let image = TestImages.noise(width: width, height: height, layout: layout, seed: 9)
      for band in [0.4...0.6, 0.3...0.7, 0.47...0.53] {
        let parameters = try TiltShiftParameters(radius: 2, clearBand: band, innerIntensity: 0)
        let expected = referenceTiltShift(image, parameters)
        for bands in [1, 2] {
          let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: bands)
          #expect(output.pixels == expected, "\(width)x\(height) \(layout), band \(band), \(bands) bands")
        }
      }
    }
  }

  /// The streaming form on images many rings tall: several vertical walks (clear rows between them, where the ring
  /// restarts), both mask axes, alpha, every band count; each must give the reference's bytes.
  @Test func streamingOverTallImagesMatchesTheReference() throws {
    let cases: [(Int, Int, Image.Layout, UInt8)] = [(31, 700, .rgb, 1), (18, 450, .rgba, 6), (40, 333, .gray, 3)]
    for (width, height, layout, orientation) in cases {
      var image = TestImages.noise(width: width, height: height, layout: layout, seed: UInt32(height))
      image.exif = TestImages.exif(orientation: orientation)
      for (radius, band) in [(1.0, 0.2...0.3), (4.0, 0.45...0.55), (9.0, 0.1...0.9)] {
        let parameters = try TiltShiftParameters(radius: radius, clearBand: band, innerIntensity: 0)
        let filter = TiltShiftFilter(parameters: parameters)
        let expected = filter.apply(to: image, bands: 1)
        if orientation == 1 {
          #expect(expected.pixels == referenceTiltShift(image, parameters), "\(width)x\(height), radius \(radius)")
        }
        let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: parameters.boxWidth))
        #expect(plan.canStream)
        // Fewer steps under ThreadSanitizer (CI's run), which looks for races, not for other bytes.
        let underThreadSanitizer = ProcessInfo.processInfo.environment["SPINDLE_EXPECT_TSAN"] == "1"
        for bands in underThreadSanitizer ? [1, 3] : [1, 2, 3] {
          for chunkRows in underThreadSanitizer
            ? [5, TiltShiftPlan.streamChunkRows] : [1, 5, 64, TiltShiftPlan.streamChunkRows]
          {
            var streamed = image
            streamed.withUnsafeMutablePixels {
              plan.runStreaming(inPlace: $0.baseAddress!, bands: bands, chunkRows: chunkRows)
            }
            let label =
              "\(width)x\(height) \(layout) o\(orientation), radius \(radius), \(bands) bands, \(chunkRows) rows"
            #expect(streamed == expected, "\(label)")
          }
        }
      }
    }
  }

  /// The streaming form's slabs cover the rows asked for, in order, at most a slab long, and never cross the end
  /// of the ring (a slab's rows are written to consecutive ring rows).
  @Test func streamingSlabsNeverWrapTheRing() {
    for (rows, lanes, ringRows) in [(0..<100, 32, 37), (5..<6, 32, 7), (30..<500, 64, 64), (3..<90, 16, 100)] {
      let slabs = TiltShiftPlan.slabs(rows, lanes: lanes, ringRows: ringRows)
      #expect(slabs.flatMap { $0 } == Array(rows))
      for slab in slabs {
        #expect(!slab.isEmpty && slab.count <= lanes)
        #expect(slab.lowerBound % ringRows + slab.count <= ringRows, "\(slab) wraps a ring of \(ringRows)")
      }
    }
  }

  @Test func aFlatImageStaysFlat() {
    for layout in Image.Layout.allCases {
      let image = Image(width: 50, height: 33, layout: layout, filledWith: 173)
      #expect(TiltShiftFilter().bothWays(image, bands: 2).pixels == image.pixels)
    }
  }

  @Test func theClearBandIsUnchanged() throws {
    let image = TestImages.noise(width: 40, height: 100, layout: .rgb)
    let parameters = try TiltShiftParameters(radius: 5, clearBand: 0.35...0.65, innerIntensity: 0)
    let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
    let rowBytes = image.bytesPerRow
    // Rows whose centres lie strictly inside the band have weight 0.
    #expect(output.pixels[36 * rowBytes..<64 * rowBytes] == image.pixels[36 * rowBytes..<64 * rowBytes])
    #expect(output.pixels[0..<10 * rowBytes] != image.pixels[0..<10 * rowBytes])
    #expect(output.pixels[90 * rowBytes..<100 * rowBytes] != image.pixels[90 * rowBytes..<100 * rowBytes])
  }

  @Test func alphaIsUnchanged() {
    for layout in [Image.Layout.rgba, .grayAlpha] {
      let image = TestImages.noise(width: 65, height: 30, layout: layout)
      let output = TiltShiftFilter().bothWays(image, bands: 3)
      let c = layout.channels
      let alphaIn = stride(from: c - 1, to: image.pixels.count, by: c).map { image.pixels[$0] }
      let alphaOut = stride(from: c - 1, to: output.pixels.count, by: c).map { output.pixels[$0] }
      #expect(alphaIn == alphaOut)
      #expect(output.pixels != image.pixels)
    }
  }

  @Test func exifIsCarriedAndRotationTurnsTheBand() throws {
    var image = TestImages.noise(width: 60, height: 40, layout: .gray)
    let parameters = try TiltShiftParameters(radius: 3, innerIntensity: 0)
    image.exif = TestImages.exif(orientation: 6)
    #expect(image.exifOrientation == 6)
    let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
    #expect(output.exif == image.exif)
    // Displayed a quarter turn round: the clear band is the middle columns of the stored pixels.
    for y in 0..<40 {
      #expect(output[30, y] == image[30, y])
      #expect(output[2, y] != image[2, y] || output[57, y] != image[57, y])
    }
  }

  /// The mask along the stored columns (orientations 5–8) weighs each byte column on its own: in place, alpha
  /// columns must be skipped, not blended.
  @Test func rotatedImagesWithAlphaFilterTheSameInPlace() throws {
    let parameters = try TiltShiftParameters(radius: 2, clearBand: 0.3...0.6, innerIntensity: 0.25)
    for layout in Image.Layout.allCases {
      for orientation: UInt8 in [1, 3, 5, 6, 7, 8] {
        var image = TestImages.noise(width: 45, height: 33, layout: layout, seed: UInt32(orientation))
        image.exif = TestImages.exif(orientation: orientation)
        let output = TiltShiftFilter(parameters: parameters).bothWays(image, bands: 2)
        let c = layout.channels
        if layout.hasAlpha {
          let alpha = { (pixels: [UInt8]) in stride(from: c - 1, to: pixels.count, by: c).map { pixels[$0] } }
          #expect(alpha(output.pixels) == alpha(image.pixels), "\(layout), orientation \(orientation)")
        }
        #expect(output.pixels != image.pixels)
      }
    }
  }

  @Test func zeroRadiusReturnsTheImage() throws {
    let image = TestImages.noise(width: 9, height: 9, layout: .rgb)
    #expect(TiltShiftFilter(parameters: try TiltShiftParameters(radius: 0)).apply(to: image) == image)
  }

  @Test func boxWidthFollowsTheSeedFormula() throws {
    #expect(try TiltShiftParameters(radius: 6).boxWidth == 11)
    #expect(try TiltShiftParameters(radius: 18).boxWidth == 35)
    #expect(try TiltShiftParameters(radius: 1).boxWidth == 3)
    #expect(TiltShiftParameters.standard.boxWidth == 35)
  }

  @Test func badParametersAreRefused() {
    #expect(throws: ImageError.self) { try TiltShiftParameters(radius: -1) }
    #expect(throws: ImageError.self) { try TiltShiftParameters(radius: .nan) }
    #expect(throws: ImageError.self) { try TiltShiftParameters(radius: 1e6) }
    #expect(throws: ImageError.self) { try TiltShiftParameters(clearBand: -0.1...0.5) }
    #expect(throws: ImageError.self) { try TiltShiftParameters(innerIntensity: 2) }
  }

  @Test func averageAndMixAreExact() throws {
    for width in [1, 3, 35, 257, 1001, 3761, 4095] {
      let kernel = BoxKernel(width: width)
      var mismatches = 0
      for sum in 0...(255 * width) where Int(kernel.average(UInt32(sum))) != (sum + width / 2) / width {
        mismatches += 1
      }
      #expect(mismatches == 0, "box width \(width)")
    }
    #expect(try TiltShiftParameters(radius: TiltShiftParameters.maximumRadius).boxWidth <= BoxKernel.maximumWidth)
    // The 16-bit vertical path covers the usual radii; wider boxes take the 32-bit path (radius 150 above).
    #expect(BoxKernel.narrowReciprocal(35) != nil)
    #expect(BoxKernel.narrowReciprocal(283) == nil)
    for a in stride(from: 0, through: 255, by: 5) {
      for b in stride(from: 0, through: 255, by: 3) {
        for w in [0, 1, 127, 128, 254, 255] {
          let expected = (a * (255 - w) + b * w + 127) / 255
          #expect(Int(TiltShiftPlan.mix(UInt16(a), UInt16(255 - w), UInt16(b), UInt16(w))) == expected)
        }
      }
    }
  }
}

extension TiltShiftFilter {
  /// The filter run both ways, which must agree: ``apply(to:bands:)``, and in place over a copy of the pixels
  /// with a scratch buffer full of other bytes (what `TiltShiftBatch` runs); records a mismatch, returns the first.
  func bothWays(_ image: Image, bands: Int, sourceLocation: SourceLocation = #_sourceLocation) -> Image {
    let output = apply(to: image, bands: bands)
    var copy = image
    copy.withUnsafeMutablePixels { _ in }  // a copy of its own, so that the in-place run cannot touch `image`
    let pool = PixelBufferPool(maxBuffers: 1, maxBytes: .max)
    pool.giveBack((0..<image.pixels.count).map { UInt8(truncatingIfNeeded: $0 &* 89 &+ 7) })
    let inPlace = apply(consuming: copy, bands: bands, scratchFrom: pool)
    let size = "\(image.width)x\(image.height) \(image.layout)"
    #expect(inPlace == output, "in place, \(size)", sourceLocation: sourceLocation)
    let filtersIn8Bits = parameters.boxWidth > 1 && image.bitDepth == 8
    let plan = TiltShiftPlan(image: image, parameters: parameters, kernel: BoxKernel(width: parameters.boxWidth))
    // The streaming form takes no scratch buffer; the whole-image form (very wide boxes, or images smaller than
    // the ring and cascades) takes the pool's.
    let streams = plan.streams(bands: max(1, bands))
    #expect(pool.reuseCount == (filtersIn8Bits && !streams ? 1 : 0), sourceLocation: sourceLocation)
    #expect(pool.heldCount == 1, "the scratch is given back (or never taken)", sourceLocation: sourceLocation)
    guard filtersIn8Bits else { return output }
    // Both in-place forms, whichever `apply` chose: the whole image at once over a scratch buffer of old bytes,
    // and streaming in steps small enough that the ring of horizontal rows wraps around many times.
    var whole = image
    _ = whole.withUnsafeMutablePixels { pixels in
      plan.run(inPlace: pixels, bands: bands, scratch: (0..<pixels.count).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    }
    #expect(whole == output, "whole image in place, \(size)", sourceLocation: sourceLocation)
    guard plan.canStream else { return output }
    for chunkRows in [1, 3, 17] {
      var streamed = image
      streamed.withUnsafeMutablePixels {
        plan.runStreaming(inPlace: $0.baseAddress!, bands: bands, chunkRows: chunkRows)
      }
      #expect(streamed == output, "streamed \(chunkRows) rows at a time, \(size)", sourceLocation: sourceLocation)
    }
    return output
  }
}
