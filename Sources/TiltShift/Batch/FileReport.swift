/// What happened to one file.
public struct FileReport: Sendable {
  /// How a file ended.
  public enum Outcome: Sendable {
    /// Written to the item's output.
    case succeeded(width: Int, height: Int, bytesRead: Int, bytesWritten: Int)
    /// Not written; the error names the file and the reason.
    case failed(ImageError)
    /// The batch was cancelled before this file was written; nothing was left behind.
    case cancelled
  }

  /// The file.
  public var item: BatchItem
  /// How it ended.
  public var outcome: Outcome
  /// Time spent per stage (zero for stages that did not run).
  public var timings: StageTimings
  /// What the file's decode and encode let through or left out, one line each, naming the file: rows a lenient
  /// decode filled in, a JPEG's missing end marker, metadata that could not be read or written (a text chunk with a
  /// bad CRC, an ICC profile libpng refuses).
  public var warnings: [String] = []

  /// Whether the output was written.
  public var succeeded: Bool {
    if case .succeeded = outcome { return true }
    return false
  }
}
