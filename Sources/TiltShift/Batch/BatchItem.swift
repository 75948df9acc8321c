/// One file of a batch: where to read it, where its result goes, and in which format.
public struct BatchItem: Sendable, Hashable {
  /// The photo to read (JPEG or PNG, detected from its bytes).
  public var input: String
  /// Where the filtered photo is written (atomically).
  public var output: String
  /// The output's format; nil follows ``BatchConfiguration/outputFormat``, then the input's own format.
  public var format: ImageFormat?

  /// Creates an item.
  public init(input: String, output: String, format: ImageFormat? = nil) {
    self.input = input
    self.output = output
    self.format = format
  }
}
