/// How much memory one file of a batch needs while it is in flight, estimated from its header alone.
///
/// A file holds, at its peak (while the filter runs), its decoded pixels up to three times over — the original, a
/// work buffer and the output (16-bit filtering; the batch's 8-bit filter writes its output over the original, so
/// two) — and around the codecs its file bytes and the encoded output (taken as the input's size again):
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

  /// The estimate for a decoded size and a file size.
  static func bytes(decoded: Int, fileBytes: Int) -> Int {
    let (tripled, overflow) = decoded.multipliedReportingOverflow(by: 3)
    return overflow ? Int.max : tripled &+ 2 &* fileBytes
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
    bytes = Self.bytes(decoded: header.decodedByteCount, fileBytes: size)
  }
}
