/// Every benchmark suite `spindle bench` knows, in the order it runs them.
package let allBenchmarkSuites: [BenchmarkSuite] = [
  executorBenchmarkSuite,
  foundationBenchmarkSuite,
  isolationBenchmarkSuite,
  observabilityBenchmarkSuite,
  queueBenchmarkSuite,
  tiltShiftBenchmarkSuite,
  workQueueBenchmarkSuite,
  engineBenchmarkSuite,
]
