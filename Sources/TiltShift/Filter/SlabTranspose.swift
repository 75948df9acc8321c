import CFilterKernels

/// Moves a slab of image rows into and out of the transposed layout the horizontal passes run on.
///
/// Transposed row `x` is pixel `x` of every row of the slab: `channels` runs of `lanes` bytes, run `c` holding
/// channel `c` of slab rows `0..<lanes`. So byte `B` of a row's 16-pixel run (channel `B % channels` of pixel
/// `B / channels`) lands `B · lanes` bytes into the block's transposed rows, whatever `channels` is: the slab is a
/// plain byte matrix transposed with a row pitch of `lanes`. Whole 16-pixel blocks move as 16 × 16 byte transposes
/// (C, `spindle_transpose_kernels.c`, baseline or AVX2 with the other filter kernels); the pixels past the last whole
/// block move byte by byte.
struct SlabTranspose {
  let width: Int
  let channels: Int
  /// Slab rows: bytes per channel run of a transposed row.
  let lanes: Int
  let rowBytes: Int
  /// `channels · lanes`: bytes per transposed row.
  let slabBytes: Int
  /// `width × slabBytes` bytes.
  let transposed: UnsafeMutablePointer<UInt8>
  /// 16 transposed rows: the cascade writes finished row `x` at slot `x & 15`.
  let finished: UnsafeMutablePointer<UInt8>

  init(
    width: Int, channels: Int, lanes: Int, rowBytes: Int, transposed: UnsafeMutablePointer<UInt8>,
    finished: UnsafeMutablePointer<UInt8>
  ) {
    precondition(lanes % 16 == 0, "slab rows come in groups of 16")
    self.width = width
    self.channels = channels
    self.lanes = lanes
    self.rowBytes = rowBytes
    self.slabBytes = channels * lanes
    self.transposed = transposed
    self.finished = finished
  }

  /// Transposes slab rows `0..<rows` starting at `first` into ``transposed``.
  ///
  /// Lanes past `rows` in a group of 16 get copies of the last row; whole groups past `rows` keep what they held.
  /// (The pixels past the last whole block: only lanes below `rows` are written.)
  func gather(_ first: UnsafePointer<UInt8>, rows: Int) {
    precondition(rows <= lanes, "a slab has at most `lanes` rows")
    spindle_slab_gather(first, rowBytes, rows, width / 16 * 16 * channels, width * channels, transposed, lanes)
  }

  /// Writes back transposed row `x` (finished, at slot `x & 15` of ``finished``) into slab rows `0..<rows` at
  /// `output`: sixteen pixels at once when `x` ends a whole block, else nothing until it does, and the pixels
  /// past the last whole block one by one.
  func scatter(_ x: Int, into output: UnsafeMutablePointer<UInt8>, rows: Int) {
    let blockBytes = 16 &* channels
    if x < width / 16 * 16 {
      guard x & 15 == 15 else { return }
      spindle_slab_scatter_block(finished, lanes, rows, blockBytes, output + (x >> 4) &* blockBytes, rowBytes)
      return
    }
    let (channels, lanes, rowBytes) = (self.channels, self.lanes, self.rowBytes)
    let pixel = output + x &* channels
    let slot = finished + (x & 15) &* slabBytes
    for channel in 0..<channels {
      let lane = slot + channel &* lanes
      for k in 0..<rows { pixel[k &* rowBytes &+ channel] = lane[k] }
    }
  }
}
