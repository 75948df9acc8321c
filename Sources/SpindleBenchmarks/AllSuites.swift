/// Every benchmark suite `spindle bench` knows, in the order it runs them.
public let allBenchmarkSuites: [BenchmarkSuite] = [
  executorBenchmarkSuite,
  foundationBenchmarkSuite,
  isolationBenchmarkSuite,
  observabilityBenchmarkSuite,
  queueBenchmarkSuite,
  tiltShiftBenchmarkSuite,
  workQueueBenchmarkSuite,
]
