/// How much memory one file of a batch needs while it is in flight, estimated from its header alone.
///
/// A file holds, at its peak (while the filter runs), its decoded pixels, and around the codecs its file bytes and
/// the encoded output (taken as the input's size again). An 8-bit file is filtered in place, streaming through a
/// ring of rows (``TiltShiftPlan/streamingBytes(width:height:channels:kernel:bands:)``), and its pixels may sit in a pooled
/// buffer up to an eighth larger than they are: `9/8 × decoded + ring + 2 × file`. A 16-bit file, or a box too
/// wide to stream, holds its pixels three times over (the original, a work buffer and the output):
/// `3 × decoded + 2 × file`. The batch admits a file only when its estimate fits in
/// what the budget has left (``BatchConfiguration/memoryBudget``), and refuses outright a file whose
/// estimate is over the whole budget.
struct MemoryEstimate {
  /// The probe reads this much of a file first; only a header that does not fit makes it read the rest.
  static let probeBytes = 1 << 18

  /// The estimated peak bytes.
  var bytes: Int
  /// The header, when it could be read (a file that cannot is left to the pipeline to report).
  var info: ImageInfo?

  /// The estimate for a decoded size and a file size, when the filter needs three image-sized buffers.
  static func bytes(decoded: Int, fileBytes: Int) -> Int {
    let (tripled, overflow) = decoded.multipliedReportingOverflow(by: 3)
    return overflow ? Int.max : tripled &+ 2 &* fileBytes
  }

  /// The estimate for a file that `configuration`'s filter handles as `info` says: streaming in place for 8 bits
  /// (see the type's description), three image-sized buffers otherwise.
  static func bytes(info: ImageInfo, fileBytes: Int, configuration: BatchConfiguration) -> Int {
    let decoded = info.decodedByteCount
    let box = configuration.filter.parameters.boxWidth
    guard info.bitDepth == 8, box > 1 else { return bytes(decoded: decoded, fileBytes: fileBytes) }
    let kernel = BoxKernel(width: box)
    let channels = info.layout.channels
    let bands = max(1, configuration.bandsPerImage)
    guard
      TiltShiftPlan.streams(width: info.width, height: info.height, channels: channels, kernel: kernel, bands: bands)
    else { return bytes(decoded: decoded, fileBytes: fileBytes) }
    let ring = TiltShiftPlan.streamingBytes(
      width: info.width, height: info.height, channels: channels, kernel: kernel, bands: bands)
    let (pixels, overflow) = decoded.addingReportingOverflow(decoded / 8)
    let (total, overflow2) = pixels.addingReportingOverflow(ring &+ 2 &* fileBytes)
    return overflow || overflow2 ? Int.max : total
  }

  init(item: BatchItem, configuration: BatchConfiguration) {
    bytes = 0
    info = nil
    guard let (head, size) = try? ImageFile.readPrefix(item.input, maxBytes: Self.probeBytes) else { return }
    bytes = 2 * size
    guard let inputFormat = ImageFormat(detecting: head) else { return }
    var decoder = configuration.decoder
    decoder.keeps16Bits = (item.format ?? configuration.outputFormat ?? inputFormat) == .png
    var header = try? decoder.info(head)
    if header == nil, head.count < size, let whole = try? ImageFile.read(item.input) {
      header = try? decoder.info(whole)
    }
    guard let header else { return }
    info = header
    bytes = Self.bytes(info: header, fileBytes: size, configuration: configuration)
  }
}
