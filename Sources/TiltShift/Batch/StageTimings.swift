/// Seconds spent in each stage of one file.
public struct StageTimings: Sendable, Hashable {
  /// Reading and decoding.
  public var decode: Double = 0
  /// The tilt-shift filter.
  public var filter: Double = 0
  /// Encoding and the atomic write.
  public var encode: Double = 0

  /// The sum of the stages.
  public var total: Double { decode + filter + encode }

  /// Creates timings.
  public init(decode: Double = 0, filter: Double = 0, encode: Double = 0) {
    self.decode = decode
    self.filter = filter
    self.encode = encode
  }

  static func + (lhs: StageTimings, rhs: StageTimings) -> StageTimings {
    StageTimings(decode: lhs.decode + rhs.decode, filter: lhs.filter + rhs.filter, encode: lhs.encode + rhs.encode)
  }
}
