/// Why an image could not be read, decoded, encoded or written, and which file it was.
///
/// The `description` is one line meant for a user, naming the file when it is known, in plain words first
/// and the codec's own words after it, for experts:
/// `holiday.jpg: the JPEG file ends too early: rows 640–1199 of 1200 are missing (libjpeg: Premature end of JPEG file)`.
///
/// ```swift
/// do {
///   let image = try ImageDecoder().decode(contentsOf: "in.jpg")
/// } catch let error as ImageError where error.kind == .emptyFile {
///   print("skipping empty file")
/// }
/// ```
public struct ImageError: Error, CustomStringConvertible, Sendable, Equatable {
  /// What went wrong.
  public enum Kind: Sendable, Equatable {
    /// The file could not be opened or read; `reason` is the system's message.
    case unreadableFile(reason: String)
    /// The file has no bytes.
    case emptyFile
    /// The bytes are neither JPEG nor PNG.
    case notAnImage
    /// The codec rejected the data as corrupt; `message` is the codec's own wording.
    case corruptData(format: ImageFormat, message: String)
    /// The compressed pixels are corrupt where they are (a bad Huffman code, a marker inside the data, a bad
    /// checksum or zlib stream), not cut short. `firstDamagedRow` is the row the decoder found the damage in (the
    /// rows after it are not decoded, and rows before it may be wrong too); `height` when every row was decoded but
    /// the data after them is damaged; nil when unknown (a progressive or interlaced image, a checksum that fails:
    /// the damage may be anywhere).
    case damagedData(format: ImageFormat, firstDamagedRow: Int?, height: Int, message: String)
    /// The file's structure (signature, header, chunk layout) is damaged, so no pixel could be read.
    case invalidFile(format: ImageFormat, message: String)
    /// The data ends early. `firstMissingRow` is the first row not decoded: `height` when every row was
    /// decoded but the end marker is missing; nil when unknown (a progressive or interlaced image).
    case truncated(format: ImageFormat, firstMissingRow: Int?, height: Int, message: String)
    /// A metadata block is larger than the output format can hold (EXIF in JPEG: 65,533 bytes).
    case metadataTooLarge(what: String, bytes: Int, limit: Int, format: ImageFormat)
    /// Filtering the image would need more memory than the batch's budget allows.
    case exceedsMemoryBudget(width: Int, height: Int, bytes: Int, budget: Int)
    /// The header declares more pixels than the decoder's limit; refused before allocating.
    case tooManyPixels(width: Int, height: Int, limit: Int)
    /// The image is wider or taller than the output format can be written with (``ImageFormat/maxDimension``:
    /// 65,500 pixels a side for JPEG, libjpeg's limit, a little under the format's 65,535); PNG has no such limit.
    case tooLargeForFormat(width: Int, height: Int, limit: Int, format: ImageFormat)
    /// A valid file the codecs do not handle (an exotic JPEG colour space).
    case unsupported(format: ImageFormat, message: String)
    /// The encoder failed; `message` is the codec's own wording.
    case encodingFailed(format: ImageFormat, message: String)
    /// The output could not be written, synced or renamed; `reason` is the system's message.
    case writeFailed(reason: String)
    /// The destination exists and the caller asked not to replace it.
    case destinationExists
    /// Filter parameters out of range; `message` says which.
    case invalidParameters(message: String)
  }

  /// What went wrong.
  public var kind: Kind
  /// The file concerned, when there is one.
  public var path: String?

  /// Creates an error of `kind` about `path`.
  public init(_ kind: Kind, path: String? = nil) {
    self.kind = kind
    self.path = path
  }

  /// This error about `path`, unless it already names a file.
  public func naming(_ path: String) -> ImageError {
    var copy = self
    if copy.path == nil { copy.path = path }
    return copy
  }

  /// One line for a user: `PATH: what went wrong`, or just what went wrong when no file is known.
  public var description: String {
    let what: String
    switch kind {
    case .unreadableFile(let reason): what = "cannot read file: \(reason)"
    case .emptyFile: what = "empty file"
    case .notAnImage: what = "not a JPEG or PNG image"
    case .corruptData(let format, let message):
      what = "corrupt \(format) image data (\(format.codecName): \(message))"
    case .damagedData(let format, let first, let height, let message):
      let rows: String
      switch first {
      case nil: rows = "the image is damaged"
      case let first? where first >= height: rows = "every row was decoded, but the data after the pixels is damaged"
      case let first?: rows = "the decoder found damage in row \(first) of \(height)"
      }
      what = "corrupt \(format) image data: \(rows) (\(format.codecName): \(message))"
    case .invalidFile(let format, let message):
      what = "not a readable \(format) file: its structure is damaged (\(format.codecName): \(message))"
    case .truncated(let format, let first, let height, let message):
      let rows: String
      switch first {
      case nil: rows = "the image is incomplete"
      case let first? where first >= height: rows = "every row is there, but the file's end is missing"
      case let first?:
        rows =
          first == height - 1
          ? "row \(first) of \(height) is missing" : "rows \(first)–\(height - 1) of \(height) are missing"
      }
      what = "the \(format) file ends too early: \(rows) (\(format.codecName): \(message))"
    case .metadataTooLarge(let name, let bytes, let limit, let format):
      what =
        "the \(name) metadata is \(bytes) bytes, more than \(format) can hold (\(limit)); "
        + "write another format or strip the metadata"
    case .exceedsMemoryBudget(let width, let height, let bytes, let budget):
      what =
        "\(width)x\(height) needs about \(Self.mebibytes(bytes)) to filter, more than the memory budget of "
        + "\(Self.mebibytes(budget))"
    case .tooManyPixels(let width, let height, let limit):
      what = "\(width)x\(height) is \(width * height) pixels, more than the limit of \(limit) pixels"
    case .tooLargeForFormat(let width, let height, let limit, let format):
      what =
        "\(width)x\(height) is too large for \(format): its sides can be at most \(limit) pixels"
        + (format == .jpeg ? " (libjpeg's limit, a little under the 65535 of JPEG's header)" : "")
        + "; PNG has no such limit"
    case .unsupported(let format, let message): what = "unsupported \(format) file (\(format.codecName): \(message))"
    case .encodingFailed(let format, let message): what = "cannot encode as \(format) (\(format.codecName): \(message))"
    case .writeFailed(let reason): what = "cannot write file: \(reason)"
    case .destinationExists: what = "destination exists and would not be replaced"
    case .invalidParameters(let message): what = "invalid tilt-shift parameters: \(message)"
    }
    guard let path else { return what }
    return "\(path): \(what)"
  }

  static func mebibytes(_ bytes: Int) -> String { "\((bytes + (1 << 20) - 1) >> 20) MiB" }
}
