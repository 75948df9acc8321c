/// Where a batch stands: counts, bytes and rate so far.
public struct BatchProgress: Sendable {
  /// Files in the batch.
  public var total: Int
  /// Files written.
  public var succeeded = 0
  /// Files that failed.
  public var failed = 0
  /// Files cancelled.
  public var cancelled = 0
  /// Bytes read from inputs that were written.
  public var bytesRead = 0
  /// Bytes written.
  public var bytesWritten = 0
  /// Pixels of the files written.
  public var pixels = 0
  /// Seconds since the batch started.
  public var elapsed: Double = 0
  /// The most files that were in flight (decoded and not yet written) at once; never above
  /// ``BatchConfiguration/maxImagesInMemory``.
  public var peakInFlight = 0
  /// The most estimated memory the files in flight held at once; never above
  /// ``BatchConfiguration/memoryBudget`` unless one file alone was admitted with more (it never is).
  public var peakBytesInFlight = 0

  /// Files that ended one way or another.
  public var completed: Int { succeeded + failed + cancelled }
  /// Megapixels written per second so far.
  public var megapixelsPerSecond: Double { elapsed > 0 ? Double(pixels) / 1e6 / elapsed : 0 }
  /// Estimated seconds until the batch ends, from the rate so far (nil before the first file).
  public var estimatedSecondsRemaining: Double? {
    guard completed > 0, elapsed > 0 else { return nil }
    return elapsed / Double(completed) * Double(total - completed)
  }
}
