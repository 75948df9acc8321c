@testable import TiltShift

/// The Swift transposes that the C ones (`spindle_transpose_kernels.c`) replaced, kept as the reference they are
/// compared with: the same ``SlabTranspose`` layout, moved with ``ByteTranspose`` blocks.
///
/// Transposed row `x` is pixel `x` of every row of the slab: `channels` runs of `lanes` bytes, run `c` holding
/// channel `c` of slab rows `0..<lanes`. Sixteen pixels of sixteen rows are `channels` blocks of 16 × 16 bytes,
/// and byte `B` of a row's 16-pixel run is channel `B % channels` of pixel `B / channels`, so whole 16-pixel
/// blocks move as ``ByteTranspose`` blocks (the channel split is only in where each column goes); the pixels
/// past the last whole block move byte by byte.
extension SlabTranspose {
  /// Transposes slab rows `0..<rows` starting at `first` into ``transposed``.
  ///
  /// Lanes past `rows` in a group of 16 get copies of the last row; whole groups past `rows` keep what they held.
  func referenceGather(_ first: UnsafePointer<UInt8>, rows: Int) {
    switch channels {
    case 1: referenceGather(first, rows: rows, One.self)
    case 2: referenceGather(first, rows: rows, Two.self)
    case 3: referenceGather(first, rows: rows, Three.self)
    default: referenceGather(first, rows: rows, Four.self)
    }
  }

  /// Writes back transposed row `x` (finished, at slot `x & 15` of ``finished``) into slab rows `0..<rows` at
  /// `output`: sixteen pixels at once when `x` ends a whole block, else nothing until it does, and the pixels
  /// past the last whole block one by one.
  func referenceScatter(_ x: Int, into output: UnsafeMutablePointer<UInt8>, rows: Int) {
    switch channels {
    case 1: referenceScatter(x, into: output, rows: rows, One.self)
    case 2: referenceScatter(x, into: output, rows: rows, Two.self)
    case 3: referenceScatter(x, into: output, rows: rows, Three.self)
    default: referenceScatter(x, into: output, rows: rows, Four.self)
    }
  }

  private func referenceGather<C: ChannelCount>(_ first: UnsafePointer<UInt8>, rows: Int, _: C.Type) {
    let channels = C.value
    let blockBytes = 16 * channels
    let blocks = width / 16
    let (lanes, slabBytes, rowBytes) = (self.lanes, self.slabBytes, self.rowBytes)
    var base = 0
    while base < rows {
      let lastRow = rows - 1
      for block in 0..<blocks {
        let input = first + block &* blockBytes
        let output = transposed + (block &* 16 &* slabBytes &+ base)
        for part in 0..<channels {
          ByteTranspose.block(
            { k in
              let offset: Int = min(base &+ k, lastRow) &* rowBytes &+ part &* 16
              return UnsafeRawPointer(input + offset).loadUnaligned(as: ByteTranspose.Vector.self)
            },
            { j, column in
              let byte = part &* 16 &+ j
              let offset: Int = (byte / channels) &* slabBytes &+ (byte % channels) &* lanes
              UnsafeMutableRawPointer(output + offset).storeBytes(of: column, as: ByteTranspose.Vector.self)
            })
        }
      }
      for x in (blocks * 16)..<width {
        let pixel = first + x &* channels
        let target = transposed + (x &* slabBytes &+ base)
        for channel in 0..<channels {
          let lane = target + channel &* lanes
          for k in 0..<min(16, rows - base) { lane[k] = pixel[(base &+ k) &* rowBytes &+ channel] }
        }
      }
      base += 16
    }
  }

  private func referenceScatter<C: ChannelCount>(
    _ x: Int, into output: UnsafeMutablePointer<UInt8>, rows: Int, _: C.Type
  ) {
    let channels = C.value
    let blockBytes = 16 * channels
    let (lanes, slabBytes, rowBytes) = (self.lanes, self.slabBytes, self.rowBytes)
    if x < width / 16 * 16 {
      guard x & 15 == 15 else { return }
      let target = output + (x >> 4) &* blockBytes
      var base = 0
      while base < rows {
        let source = finished + base
        let count = rows - base
        for part in 0..<channels {
          ByteTranspose.block(
            { j in
              let byte = part &* 16 &+ j
              let offset: Int = (byte / channels) &* slabBytes &+ (byte % channels) &* lanes
              return UnsafeRawPointer(source + offset).loadUnaligned(as: ByteTranspose.Vector.self)
            },
            { k, row in
              guard k < count else { return }
              let offset: Int = (base &+ k) &* rowBytes &+ part &* 16
              UnsafeMutableRawPointer(target + offset).storeBytes(of: row, as: ByteTranspose.Vector.self)
            })
        }
        base += 16
      }
      return
    }
    let pixel = output + x &* channels
    let slot = finished + (x & 15) &* slabBytes
    for channel in 0..<channels {
      let lane = slot + channel &* lanes
      for k in 0..<rows { pixel[k &* rowBytes &+ channel] = lane[k] }
    }
  }
}
