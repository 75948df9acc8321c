import CFilterKernels
import Testing

@testable import TiltShift

/// The C slab transposes (`spindle_transpose_kernels.c`, through ``SlabTranspose``) against the Swift ones they
/// replaced (`SlabTranspose.referenceGather` and `referenceScatter`), byte for byte, with each kernel variant the
/// processor runs: every channel count, widths with and without pixels past the last whole 16-pixel block, every row
/// count of a slab. In the kernels' suite, which is serialized: these switch the process's variant too.
extension FilterKernelTests {
  static let slabWidths = [1, 15, 16, 17, 31, 32, 47, 100]

  /// Gather writes what the Swift gather wrote into a buffer of old bytes: the transposed rows, copies of the last
  /// row in the lanes past `rows` of its group (whole blocks), and nothing in whole groups past `rows` nor, past the
  /// last whole block, in lanes past `rows`.
  @Test func slabGatherWritesTheReferenceBytes() {
    defer { FilterKernelVariant.force(nil) }
    var random = Generator(state: 7)
    for variant in Self.supported {
      #expect(FilterKernelVariant.force(variant))
      for channels in 1...4 {
        for width in Self.slabWidths {
          for lanes in [16, 32, 64] {
            // Rows with a few bytes of padding, as an image's `bytesPerRow` may have.
            let rowBytes = width * channels + Int(random.next() % 5)
            let source = random.bytes(lanes * rowBytes)
            let old = random.bytes(width * channels * lanes)
            for rows in 1...lanes {
              let (expected, actual) = Self.gathered(
                source, rows: rows, old: old, width: width, channels: channels, lanes: lanes, rowBytes: rowBytes)
              #expect(
                Self.firstDifference(expected, actual) == nil,
                "\(variant) gather: \(channels) channels, width \(width), \(rows) of \(lanes) rows")
            }
          }
        }
      }
    }
  }

  /// Scatter writes what the Swift scatter wrote, called for every transposed row in order as the cascade calls
  /// it (each finished row written into its slot first), and leaves the rows past `rows` alone.
  @Test func slabScatterWritesTheReferenceBytes() {
    defer { FilterKernelVariant.force(nil) }
    var random = Generator(state: 11)
    for variant in Self.supported {
      #expect(FilterKernelVariant.force(variant))
      for channels in 1...4 {
        for width in Self.slabWidths {
          for lanes in [16, 32, 64] {
            let rowBytes = width * channels + Int(random.next() % 5)
            let slots = random.bytes(width * channels * lanes)
            let old = random.bytes((lanes + 1) * rowBytes)
            for rows in 1...lanes {
              let (expected, actual) = Self.scattered(
                slots, rows: rows, old: old, width: width, channels: channels, lanes: lanes, rowBytes: rowBytes)
              #expect(
                Self.firstDifference(expected, actual) == nil,
                "\(variant) scatter: \(channels) channels, width \(width), \(rows) of \(lanes) rows")
            }
          }
        }
      }
    }
  }

  /// Each variant has its own table, and a variant that does not exist has none.
  @Test func everySupportedVariantHasSlabTransposes() {
    for variant in Self.supported { #expect(spindle_transpose_kernels_for(variant.rawValue) != nil) }
    #expect(spindle_transpose_kernels_for(7) == nil)
    #expect(spindle_transpose_kernels_for(-1) == nil)
  }

  /// The first index where `a` and `b` differ (nil when they are equal): a short failure message.
  static func firstDifference(_ a: [UInt8], _ b: [UInt8]) -> Int? {
    a.count == b.count ? a.indices.first { a[$0] != b[$0] } : min(a.count, b.count)
  }

  /// The transposed buffers after the reference gather and ``SlabTranspose/gather(_:rows:)`` from `source`, both
  /// starting from `old`.
  static func gathered(
    _ source: [UInt8], rows: Int, old: [UInt8], width: Int, channels: Int, lanes: Int, rowBytes: Int
  ) -> (expected: [UInt8], actual: [UInt8]) {
    var expected = old
    var actual = old
    let finished = UnsafeMutablePointer<UInt8>.allocate(capacity: 16 * channels * lanes)
    defer { finished.deallocate() }
    source.withUnsafeBufferPointer { source in
      expected.withUnsafeMutableBufferPointer { buffer in
        SlabTranspose(
          width: width, channels: channels, lanes: lanes, rowBytes: rowBytes, transposed: buffer.baseAddress!,
          finished: finished
        ).referenceGather(source.baseAddress!, rows: rows)
      }
      actual.withUnsafeMutableBufferPointer { buffer in
        SlabTranspose(
          width: width, channels: channels, lanes: lanes, rowBytes: rowBytes, transposed: buffer.baseAddress!,
          finished: finished
        ).gather(source.baseAddress!, rows: rows)
      }
    }
    return (expected, actual)
  }

  /// The output rows (`lanes + 1` of them, starting from `old`) after the reference scatter and
  /// ``SlabTranspose/scatter(_:into:rows:)`` of every transposed row `x`, whose bytes are row `x` of `slots`.
  static func scattered(
    _ slots: [UInt8], rows: Int, old: [UInt8], width: Int, channels: Int, lanes: Int, rowBytes: Int
  ) -> (expected: [UInt8], actual: [UInt8]) {
    let slabBytes = channels * lanes
    var expected = old
    var actual = old
    let finished = UnsafeMutablePointer<UInt8>.allocate(capacity: 16 * slabBytes)
    let transposed = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    defer {
      finished.deallocate()
      transposed.deallocate()
    }
    let slab = SlabTranspose(
      width: width, channels: channels, lanes: lanes, rowBytes: rowBytes, transposed: transposed, finished: finished)
    expected.withUnsafeMutableBufferPointer { expected in
      actual.withUnsafeMutableBufferPointer { actual in
        for x in 0..<width {
          for j in 0..<slabBytes { finished[(x & 15) * slabBytes + j] = slots[x * slabBytes + j] }
          slab.referenceScatter(x, into: expected.baseAddress!, rows: rows)
          slab.scatter(x, into: actual.baseAddress!, rows: rows)
        }
      }
    }
    return (expected, actual)
  }
}
