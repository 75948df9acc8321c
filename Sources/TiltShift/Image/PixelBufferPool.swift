import Spindle

/// Pixel buffers handed from one image to the next, so that decoding and filtering write into memory that is
/// already mapped instead of fresh pages.
///
/// A fresh image-sized array is memory the kernel has never given the process, or took back when the last
/// one was freed (glibc returns blocks of 32 MB and more to the kernel at once): every page is cleared on its
/// first write, one fault each, and on a virtual machine the host may fault it in too. In a batch of 12 MP
/// photos that was two 36 MB buffers cleared per file, one for the decoded pixels and one for the filter's
/// output (the filter now streams, in place, and needs the second only for very wide boxes). A pool keeps the
/// buffers of finished files for the next ones instead.
///
/// Value semantics are untouched: a buffer is only written through `withUnsafeMutableBufferPointer`, which
/// copies first if anyone else still holds it, so an image that escaped keeps its pixels.
///
/// ```swift
/// let pool = PixelBufferPool(maxBuffers: 4, maxBytes: 1 << 30)
/// var pixels = pool.take(count: 36_000_000) ?? [UInt8](repeating: 0, count: 36_000_000)
/// pixels.withUnsafeMutableBufferPointer { decodeInto($0) }
/// pool.giveBack(pixels)  // the next image of that size reuses the memory
/// pool.close()           // done: frees what it holds
/// ```
package final class PixelBufferPool: Sendable {
  private struct State {
    var buffers: [[UInt8]] = []
    var bytes = 0
    var reused = 0
    var closed = false
  }

  /// The most buffers held at once.
  package let maxBuffers: Int
  /// The most bytes (of capacity) held at once.
  package let maxBytes: Int
  private let state = TSanVisibleMutex(State())

  /// Creates an empty pool that holds at most `maxBuffers` buffers of at most `maxBytes` bytes in all.
  package init(maxBuffers: Int, maxBytes: Int) {
    self.maxBuffers = max(0, maxBuffers)
    self.maxBytes = max(0, maxBytes)
  }

  /// A held buffer of exactly `count` bytes (its contents are whatever it held), or nil if none fits.
  ///
  /// A buffer of that count is preferred; otherwise the smallest whose capacity holds `count` and wastes at most
  /// an eighth of it (or 64 bytes), cut or extended to `count` within its capacity (no new allocation). The bound
  /// keeps what an image holds close to its own size, which is what a memory budget counts for it.
  package func take(count: Int) -> [UInt8]? {
    // (At least 64 bytes of slack: a small array's capacity is its count rounded up to the allocator's sizes.)
    let largest = count + max(count / 8, 64)
    var buffer: [UInt8]? = state.withLock { state in
      var best: Int?
      for index in state.buffers.indices {
        let capacity = state.buffers[index].capacity
        if state.buffers[index].count == count && capacity <= largest {
          best = index
          break
        }
        if capacity >= count, capacity <= largest, best.map({ capacity < state.buffers[$0].capacity }) ?? true {
          best = index
        }
      }
      guard let best else { return nil }
      let taken = state.buffers.remove(at: best)
      state.bytes -= taken.capacity
      state.reused += 1
      return taken
    }
    guard var found = buffer.take() else { return nil }
    if found.count > count {
      found.removeLast(found.count - count)
    } else if found.count < count {
      found.appendZeros(count - found.count)
    }
    return found
  }

  /// Keeps `buffer` for a later ``take(count:)``, unless the pool is full (then it is freed, outside the lock).
  package func giveBack(_ buffer: consuming [UInt8]) {
    // Moved into the pool, not copied: a second reference alive after the lock would make a taker on another thread
    // copy the whole buffer when it writes.
    var held: [UInt8]? = consume buffer
    let address = held?.withUnsafeBufferPointer { $0.baseAddress }
    let size = held?.capacity ?? 0
    state.withLock { state in
      guard !state.closed, size > 0, state.buffers.count < maxBuffers, state.bytes + size <= maxBytes else { return }
      // The same storage twice (two images sharing their pixels) would be counted twice and written by two takers.
      if state.buffers.contains(where: { $0.withUnsafeBufferPointer { $0.baseAddress } == address }) { return }
      if let moved = held.take() { state.buffers.append(moved) }
      state.bytes += size
    }
    // A refused buffer is freed here, outside the lock.
  }

  /// Frees held buffers, the largest first, until at most `bytes` bytes are held.
  ///
  /// A batch calls it before it admits a file: what the pool holds counts against the memory budget too.
  package func trim(toBytes bytes: Int) {
    let freed: [[UInt8]] = state.withLock { state in
      var freed: [[UInt8]] = []
      while state.bytes > max(0, bytes),
        let largest = state.buffers.indices.max(by: {
          state.buffers[$0].capacity < state.buffers[$1].capacity
        })
      {
        state.bytes -= state.buffers[largest].capacity
        freed.append(state.buffers.remove(at: largest))
      }
      return freed
    }
    _ = freed
  }

  /// Frees every held buffer; buffers given back later are freed at once.
  package func close() {
    let freed = state.withLock { state in
      defer {
        state.buffers = []
        state.bytes = 0
        state.closed = true
      }
      return state.buffers
    }
    _ = freed
  }

  /// How many buffers are held now.
  package var heldCount: Int { state.withLock { $0.buffers.count } }

  /// How many bytes of capacity are held now.
  package var heldBytes: Int { state.withLock { $0.bytes } }

  /// How many times ``take(count:)`` found a buffer.
  package var reuseCount: Int { state.withLock { $0.reused } }
}

/// An image whose pixel buffer goes back to a pool when the last reference to it goes away, unless someone took
/// the image out first.
///
/// A pipeline stage's value lives as long as the `Work` that produced it; wrapping the image in this box gives
/// its pixels back the moment that value is released, without the stage having to own it. A stage that is the
/// image's only consumer can ``take()`` it instead and then own its pixels outright (to write over them).
package final class PooledImage: Sendable {
  private let stored: TSanVisibleMutex<Image?>
  private let pool: PixelBufferPool?

  /// Wraps `image`; its pixels go to `pool` (if any) when this box is released with the image still in it.
  package init(_ image: Image, returningTo pool: PixelBufferPool?) {
    stored = TSanVisibleMutex(image)
    self.pool = pool
  }

  /// The image, or nil once it was taken.
  package var image: Image? { stored.withLock { $0 } }

  /// Moves the image out (nil if it was taken before): the caller holds its pixels now, and the box gives
  /// nothing back.
  package func take() -> Image? { stored.withLock { $0.take() } }

  deinit {
    // Moved out, then handed over: when this scope ends the pool holds the only reference to the pixels (unless
    // the image escaped, in which case the next writer copies: see the pool's notes).
    if let image = stored.withLock({ $0.take() }) { pool?.giveBack(image.intoPixels()) }
  }
}

extension [UInt8] {
  /// Appends `count` zero bytes, copied from a zeroed block on the stack 64 KiB at a time: fast in every build
  /// (`append(contentsOf: repeatElement(0, count: n))` runs element by element through generic code in a debug build,
  /// 7 s for 8 MB, 31 s under ThreadSanitizer; this takes milliseconds).
  mutating func appendZeros(_ count: Int) {
    guard count > 0 else { return }
    reserveCapacity(self.count + count)
    let block = Swift.min(count, 65536)
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: block) { zeros in
      zeros.initialize(repeating: 0)
      var left = count
      while left > 0 {
        let step = Swift.min(left, block)
        append(contentsOf: UnsafeBufferPointer(rebasing: zeros[..<step]))
        left -= step
      }
    }
  }
}
