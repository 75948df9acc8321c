/// Why an image could not be read, decoded, encoded or written, and which file it was.
///
/// The `description` is one line meant for a user, naming the file when it is known:
/// `holiday.jpg: corrupt JPEG data: Premature end of JPEG file`.
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
    /// The codec rejected the data (corrupt or truncated); `message` is the codec's own wording.
    case corruptData(format: ImageFormat, message: String)
    /// The header declares more pixels than the decoder's limit; refused before allocating.
    case tooManyPixels(width: Int, height: Int, limit: Int)
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
    case .corruptData(let format, let message): what = "corrupt \(format) data: \(message)"
    case .tooManyPixels(let width, let height, let limit):
      what = "\(width)x\(height) is \(width * height) pixels, more than the limit of \(limit)"
    case .unsupported(let format, let message): what = "unsupported \(format): \(message)"
    case .encodingFailed(let format, let message): what = "cannot encode \(format): \(message)"
    case .writeFailed(let reason): what = "cannot write file: \(reason)"
    case .destinationExists: what = "destination exists and would not be replaced"
    case .invalidParameters(let message): what = "invalid tilt-shift parameters: \(message)"
    }
    guard let path else { return what }
    return "\(path): \(what)"
  }
}
