import Dispatch
import Spindle
import Synchronization

extension TiltShiftBatch {
  private struct Decoded: Sendable {
    /// The pixels go back to the batch's pool when the stage's value is released, unless the next stage took the
    /// image (see ``PooledImage``): the filter takes the decoded image and writes its output over it.
    var image: PooledImage

    /// The image; only the filter takes a stage's image, once, so it is there for every other reader.
    var stillThere: Image {
      guard let image = image.image else { preconditionFailure("TiltShiftBatch: a stage's image was taken twice") }
      return image
    }
    var format: ImageFormat
    var bytesRead: Int
  }

  private struct Written: Sendable {
    var width: Int
    var height: Int
    var bytesRead: Int
    var bytesWritten: Int
  }

  /// Adds the three work items of file `index` and calls `completion` once with its report.
  ///
  /// The completion handler holds neither the decoded nor the filtered image, so each is released as soon as
  /// the next stage is done with it.
  func startPipeline(_ index: Int, completion: @escaping @Sendable (FileReport) -> Void) {
    let item = items[index]
    let configuration = configuration
    let filterBands = filterBands
    let buffers = buffers
    // 8-bit pixels only: a 16-bit filter holds three buffers at its peak, which the budget's estimate fills.
    // (An 8-bit file holds one: the decoded pixels, which the filter overwrites with its output, streaming through
    // a ring of rows; when streaming would not save memory, also a scratch buffer, which goes back when the filter
    // returns.)
    @Sendable func pooled(_ image: Image) -> PooledImage {
      PooledImage(image, returningTo: image.bitDepth == 8 ? buffers : nil)
    }
    let timings = TSanVisibleMutex(StageTimings())
    let warnings = TSanVisibleMutex([String]())
    let name = item.input.split(separator: "/").last.map(String.init) ?? item.input
    // Added under `itemCounts`, so that `workProgress` reads the count and the queue's progress together.
    let (decode, filter, encode) = itemCounts.withLock { counts in
      let decode = queue.add(name: "decode \(name)") { () throws -> Decoded in
        filterBands.enterCodec()
        defer { filterBands.leave() }
        let clock = ContinuousClock()
        let start = clock.now
        defer { timings.withLock { $0.decode = (clock.now - start).secondsValue } }
        let bytes = try ImageFile.read(item.input)
        try WorkContext.current?.checkCancellation()
        let inputFormat = ImageFormat(detecting: bytes) ?? .jpeg
        var decoder = configuration.decoder
        // 16 bits survive only into PNG; JPEG output is decoded straight to 8 bits.
        decoder.keeps16Bits = (item.format ?? configuration.outputFormat ?? inputFormat) == .png
        let image: Image
        var found: [String] = []
        do throws(ImageError) {
          image = try decoder.decode(bytes, warnings: &found, reusing: buffers)
          // A batch without a memory budget did not read the header first: refuse before the filter runs.
          let format = item.format ?? configuration.outputFormat ?? inputFormat
          try format.checkFits(width: image.width, height: image.height)
        } catch {
          throw error.naming(item.input)
        }
        if !found.isEmpty { warnings.withLock { $0 += found.map { "\(item.input): \($0)" } } }
        return Decoded(image: pooled(image), format: inputFormat, bytesRead: bytes.count)
      }
      let filter = queue.add(name: "filter \(name)", priority: .high, after: decode) {
        (decoded: Decoded) throws -> Decoded in
        try WorkContext.current?.checkCancellation()
        let clock = ContinuousClock()
        let start = clock.now
        defer { timings.withLock { $0.filter = (clock.now - start).secondsValue } }
        var result = decoded
        let bands = filterBands.enter()
        defer { filterBands.leave() }
        // Taken, not copied: the decode's value holds nothing after this, and the output is written over it.
        guard let original = decoded.image.take() else {
          preconditionFailure("TiltShiftBatch: the decoded image of \(name) was taken twice")
        }
        result.image = pooled(
          configuration.filter.apply(consuming: original, bands: bands, scratchFrom: buffers))
        return result
      }
      let encode = queue.add(name: "encode \(name)", priority: .high, after: filter) {
        (filtered: Decoded) throws -> Written in
        try WorkContext.current?.checkCancellation()
        filterBands.enterCodec()
        defer { filterBands.leave() }
        let clock = ContinuousClock()
        let start = clock.now
        defer { timings.withLock { $0.encode = (clock.now - start).secondsValue } }
        let format = item.format ?? configuration.outputFormat ?? filtered.format
        var image = filtered.stillThere
        let (width, height) = (image.width, image.height)
        if configuration.stripsMetadata {
          // Without its orientation tag the picture must be stored as it is shown.
          image = image.orientedUpright()
          image.metadata.strip()
        }
        let encoder = ImageEncoder(
          format: format, jpegQuality: configuration.jpegQuality, background: configuration.background)
        let bytes: [UInt8]
        var found: [String] = []
        do throws(ImageError) {
          bytes = try encoder.encode(image, warnings: &found)
        } catch {
          throw error.naming(item.input)
        }
        if !found.isEmpty { warnings.withLock { $0 += found.map { "\(item.input): \($0)" } } }
        // Last point at which a cancelled batch leaves no output for this file.
        try WorkContext.current?.checkCancellation()
        try ImageFile.writeAtomically(bytes, to: item.output, replacingExisting: configuration.replaceExisting)
        return Written(
          width: width,
          height: height,
          bytesRead: filtered.bytesRead,
          bytesWritten: bytes.count
        )
      }
      counts.added += Self.itemsPerFile
      return (decode, filter, encode)
    }
    // A cancel() that raced with adding this file must still reach it.
    if state.withLock({ $0.cancelled }) {
      decode.cancel()
      filter.cancel()
      encode.cancel()
    }
    encode.onCompletion(on: DispatchQueue.global()) { result in
      let timings = timings.withLock { $0 }
      let outcome: FileReport.Outcome
      switch result {
      case .success(let written):
        outcome = .succeeded(
          width: written.width,
          height: written.height,
          bytesRead: written.bytesRead,
          bytesWritten: written.bytesWritten
        )
      case .failure(let error as ImageError):
        outcome = .failed(error.path == nil ? error.naming(item.input) : error)
      case .failure(is CancellationError):
        outcome = .cancelled
      case .failure(let error):
        outcome = .failed(ImageError(.writeFailed(reason: "\(error)"), path: item.input))
      }
      completion(
        FileReport(item: item, outcome: outcome, timings: timings, warnings: warnings.withLock { $0 }))
    }
  }
}

/// Shares ``BatchConfiguration/bandsPerImage`` with the batch's other running work: a file filtered while
/// nothing else of the batch runs gets every band; next to running decodes, encodes or other filters it gets
/// `most / bodies running` (at least 1). Bands fill the cores that files leave idle; a filter split into bands
/// next to other running work only adds threads that compete for the same cores. The filter's output does not
/// depend on its bands.
final class FilterBands: Sendable {
  private let most: Int
  private let running = Atomic<Int>(0)

  init(most: Int) { self.most = max(1, most) }

  /// Counts a filter in and returns its bands; call ``leave()`` when it returns.
  func enter() -> Int {
    max(1, most / running.add(1, ordering: .relaxed).newValue)
  }

  /// Counts a decode or encode body in (it runs on one thread); call ``leave()`` when it returns.
  func enterCodec() { running.add(1, ordering: .relaxed) }

  /// Counts a body out.
  func leave() { running.subtract(1, ordering: .relaxed) }
}
