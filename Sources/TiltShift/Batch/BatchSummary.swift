/// The end of a batch: every file's report (in input order) and the totals.
public struct BatchSummary: Sendable {
  /// One report per item, in the order the items were given.
  public var reports: [FileReport]
  /// Final counts and rate.
  public var progress: BatchProgress
  /// Stage times summed over every file.
  public var stageTotals: StageTimings
  /// Whether ``TiltShiftBatch/cancel()`` was called.
  public var wasCancelled: Bool
}
