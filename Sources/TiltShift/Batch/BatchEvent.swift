/// What a running batch reports through ``TiltShiftBatch/events()``.
public enum BatchEvent: Sendable {
  /// One file ended; the progress includes it.
  case fileFinished(FileReport, BatchProgress)
  /// Every file ended; always the last event.
  case finished(BatchSummary)
}
