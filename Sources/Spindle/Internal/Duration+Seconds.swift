extension Duration {
  /// The duration in seconds as a `Double`, for timings and rates.
  ///
  /// The package's one copy of this helper: TiltShift, the benchmarks and the CLI all use it.
  ///
  /// ```swift
  /// let start = ContinuousClock.now
  /// work()
  /// let seconds = (ContinuousClock.now - start).secondsValue
  /// ```
  package var secondsValue: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
