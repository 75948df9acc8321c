import CFilterKernels
import SpindleTestSupport
import Testing

@testable import TiltShift

/// The C kernels of the filter (CFilterKernels), each variant against the scalar formulas they replace, and the
/// whole filter with each variant. Serialized: one test switches the process's variant for a while.
@Suite("Filter kernels", .serialized, .offThePool)
struct FilterKernelTests {
  /// A small deterministic generator (a linear congruential one: the same data in every run).
  struct Generator {
    var state: UInt64
    mutating func next() -> UInt64 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return state >> 16
    }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }
  }

  static var supported: [FilterKernelVariant] { FilterKernelVariant.allCases.filter(\.isSupported) }

  @Test func theWidestSupportedVariantIsTheOneInUse() {
    #expect(FilterKernelVariant.baseline.isSupported)
    #expect(FilterKernelVariant.current == (FilterKernelVariant.avx2.isSupported ? .avx2 : .baseline))
    // A variant that does not exist is refused and changes nothing.
    #expect(spindle_kernels_for(7) == nil)
    #expect(spindle_kernels_force_variant(7) == 0)
    #expect(FilterKernelVariant.current == (FilterKernelVariant.avx2.isSupported ? .avx2 : .baseline))
  }

  /// Every kernel of every variant the processor runs computes exactly the scalar formula, for lengths around the
  /// vector widths (the tails take the scalar loop) and arbitrary sums, roundings, multipliers and shifts (the
  /// vector code must truncate as the scalar code does, even where the filter never takes it).
  @Test func everyVariantComputesTheScalarFormulas() throws {
    var random = Generator(state: 42)
    for variant in Self.supported {
      let kernels = try #require(spindle_kernels_for(variant.rawValue)?.pointee)
      for trial in 0..<400 {
        let count = trial < 100 ? trial : [127, 128, 129, 2047, 2048][trial % 5] + Int(random.next() % 3)
        let sums = (0..<count).map { _ in UInt16(truncatingIfNeeded: random.next()) }
        let (entering, leaving) = (random.bytes(count), random.bytes(count))
        let rounding = UInt16(truncatingIfNeeded: random.next())
        let multiplier = UInt16(truncatingIfNeeded: random.next())
        let shift = UInt16(random.next() % 16)
        var expectedOutput = [UInt8](repeating: 0, count: count)
        var expectedSums = sums
        for j in 0..<count {
          let high = UInt16(truncatingIfNeeded: (UInt32(sums[j] &+ rounding) &* UInt32(multiplier)) &>> 16)
          expectedOutput[j] = UInt8(truncatingIfNeeded: high &>> shift)
          expectedSums[j] = sums[j] &+ UInt16(entering[j]) &- UInt16(leaving[j])
        }
        var output = [UInt8](repeating: 0xAA, count: count)
        var slid = sums
        kernels.slide_row_u16(&slid, &output, entering, leaving, count, rounding, multiplier, shift)
        #expect(output == expectedOutput && slid == expectedSums, "\(variant) slide, \(count) bytes")
        var averaged = [UInt8](repeating: 0x55, count: count)
        kernels.average_row_u16(sums, &averaged, count, rounding, multiplier, shift)
        #expect(averaged == expectedOutput, "\(variant) average, \(count) bytes")

        let (target, blurred, weights) = (random.bytes(count), random.bytes(count), random.bytes(count))
        let weight = UInt16(random.next() % 256)
        var blended = target
        kernels.blend_row(&blended, blurred, count, weight)
        #expect(
          blended
            == (0..<count).map { TiltShiftPlan.mix(UInt16(target[$0]), 255 - weight, UInt16(blurred[$0]), weight) },
          "\(variant) blend, weight \(weight), \(count) bytes")
        var weighted = target
        kernels.blend_weighted(&weighted, blurred, weights, count)
        let expectedWeighted = (0..<count).map { j in
          TiltShiftPlan.mix(UInt16(target[j]), 255 - UInt16(weights[j]), UInt16(blurred[j]), UInt16(weights[j]))
        }
        #expect(weighted == expectedWeighted, "\(variant) weighted blend, \(count) bytes")
      }
    }
  }

  /// The cascade's fused step (three slides, each stage entering the row the stage before it outputs) gives exactly
  /// the bytes and sums of the three single slides it stands for, in every variant, for lengths around the vector
  /// widths and arbitrary sums, roundings, multipliers and shifts.
  @Test func theFusedCascadeStepIsThreeSlides() throws {
    var random = Generator(state: 7)
    for variant in Self.supported {
      let kernels = try #require(spindle_kernels_for(variant.rawValue)?.pointee)
      for trial in 0..<300 {
        let count = trial < 70 ? trial : [191, 192, 193, 2047, 2048][trial % 5] + Int(random.next() % 3)
        let sums = (0..<3).map { _ in (0..<count).map { _ in UInt16(truncatingIfNeeded: random.next()) } }
        let entering = random.bytes(count)
        let leaving = (0..<3).map { _ in random.bytes(count) }
        // The filter's own parameters half of the time (multiplier and shift of a real box), arbitrary otherwise.
        let (rounding, multiplier, shift): (UInt16, UInt16, UInt16)
        if trial % 2 == 0, let narrow = BoxKernel.narrowReciprocal(2 * (trial % 40) + 1) {
          (rounding, multiplier, shift) = (
            UInt16(trial % 40), UInt16(truncatingIfNeeded: narrow.multiplier), narrow.shift
          )
        } else {
          rounding = UInt16(truncatingIfNeeded: random.next())
          multiplier = UInt16(truncatingIfNeeded: random.next())
          shift = UInt16(random.next() % 16)
        }
        // Expected: three single slides through the same variant's kernel, each entering the previous output.
        var expectedSums = sums
        var expectedOutputs = [[UInt8]](repeating: [UInt8](repeating: 0, count: count), count: 3)
        kernels.slide_row_u16(
          &expectedSums[0], &expectedOutputs[0], entering, leaving[0], count, rounding, multiplier, shift)
        kernels.slide_row_u16(
          &expectedSums[1], &expectedOutputs[1], expectedOutputs[0], leaving[1], count, rounding, multiplier, shift)
        kernels.slide_row_u16(
          &expectedSums[2], &expectedOutputs[2], expectedOutputs[1], leaving[2], count, rounding, multiplier, shift)
        var (s1, s2, s3) = (sums[0], sums[1], sums[2])
        var (o1, o2, o3) = (
          [UInt8](repeating: 0xAA, count: count), [UInt8](repeating: 0x55, count: count),
          [UInt8](repeating: 0x11, count: count)
        )
        kernels.slide3_row_u16(
          &s1, &s2, &s3, &o1, &o2, &o3, entering, leaving[0], leaving[1], leaving[2], count, rounding, multiplier,
          shift)
        #expect([s1, s2, s3] == expectedSums, "\(variant) fused sums, \(count) bytes, trial \(trial)")
        #expect([o1, o2, o3] == expectedOutputs, "\(variant) fused outputs, \(count) bytes, trial \(trial)")
      }
    }
  }

  /// The whole filter gives the same bytes with each variant: row masks and column masks (a rotated photo),
  /// every layout, streamed and whole-image forms, images wider than a vector and than a strip.
  @Test func theFilterGivesTheSameBytesWithEachVariant() throws {
    defer { FilterKernelVariant.force(nil) }
    let parameters = try TiltShiftParameters(radius: 5, clearBand: 0.3...0.6, innerIntensity: 0.4)
    var outputs: [FilterKernelVariant: [[UInt8]]] = [:]
    for variant in Self.supported {
      #expect(FilterKernelVariant.force(variant))
      #expect(FilterKernelVariant.current == variant)
      var results: [[UInt8]] = []
      for (index, layout) in Image.Layout.allCases.enumerated() {
        for orientation: UInt8 in [1, 6] {
          var image = TestImages.noise(width: 700 + index, height: 37, layout: layout, seed: UInt32(index + 3))
          image.exif = TestImages.exif(orientation: orientation)
          let filter = TiltShiftFilter(parameters: parameters)
          let whole = filter.apply(to: image, bands: 2)
          let streamed = filter.apply(consuming: image, bands: 2, scratchFrom: nil)
          #expect(whole.pixels == streamed.pixels, "\(variant) \(layout) o\(orientation)")
          #expect(whole.pixels != image.pixels)
          results.append(whole.pixels)
        }
      }
      outputs[variant] = results
    }
    let baseline = try #require(outputs[.baseline])
    for (variant, results) in outputs { #expect(results == baseline, "\(variant) differs from the baseline") }
    if FilterKernelVariant.avx2.isSupported { #expect(outputs.count == 2) }
  }
}
