import Dispatch
import Foundation
import Spindle
import Synchronization

/// Isolation primitives: `Isolated` against the lock candidates it was chosen from, bounded task groups
/// against a plain task group, and `AsyncSemaphore` against `DispatchSemaphore` and a bare `Mutex`.
package let isolationBenchmarkSuite = BenchmarkSuite(
  name: "isolation",
  summary: "Isolated vs Mutex / pthread_rwlock / barrier queue; concurrentMap overhead; AsyncSemaphore cost"
) { options in
  var report = BenchmarkReport(suite: "isolation")
  report.results += lockCandidateResults(options)
  report.results += await concurrentMapResults(options)
  report.results += await semaphoreResults(options)
  report.notes = [
    "lock rows: ops split evenly over dedicated threads started together; 95/5 writes every 20th op, 50/50 every other",
    "lock rows: times are the threads' CPU seconds in the mix, summed (wall time on a shared machine measures the wait "
      + "for a core); a thread asleep on a contended lock is not counted, which favours the blocking locks",
    "lock rows: runs interleaved across candidates so that outside load hits all of them alike",
    "Isolated (writeAsync) issues its writes with writeAsync, so reads also apply the queued writes; its closure "
      + "captures the stamp (Swift allocates that closure's context at every call); the argument form passes the "
      + "stamp as writeAsync(_:_:)'s argument to a closure that captures nothing",
    "ratios are medians against the baseline measured in the same run; the machine is shared, quote ratios",
  ]
  return report
}

// MARK: - Lock candidates

private struct Pair {
  var first = 0
  var last = 0
}

/// What a read computes: the sum of the fields, then `spin` dependent multiply-adds (a longer critical section).
@inline(__always)
private func digest(_ pair: Pair, spin: Int) -> Int {
  var x = pair.first &+ pair.last
  for i in 0..<spin { x = x &* 31 &+ i }
  return x
}

/// One way to guard a `Pair`, as the benchmark sees it.
private protocol LockCandidate: Sendable {
  /// Reads the pair under the lock, spending `spin` multiply-adds inside the critical section.
  func read(spin: Int) -> Int
  func write(_ stamp: Int)
  /// Runs `ops` operations, a write every `writeEvery`-th, and returns the reads' digest.
  ///
  /// A requirement (each candidate forwards to the generic ``mixLoop(_:ops:writeEvery:spin:)``), so the loop
  /// is specialised for every candidate: no dynamic dispatch per operation dilutes the differences.
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int
}

/// The operations of one thread: a write, then `writeEvery - 1` reads, and again (a countdown, not a division).
@inline(__always)
private func mixLoop<Candidate: LockCandidate>(_ candidate: Candidate, ops: Int, writeEvery: Int, spin: Int) -> Int {
  var total = 0
  var untilWrite = 0
  for i in 0..<ops {
    if untilWrite == 0 {
      candidate.write(i)
      untilWrite = writeEvery - 1
    } else {
      total &+= candidate.read(spin: spin)
      untilWrite &-= 1
    }
  }
  return total
}

private final class MutexCandidate: LockCandidate {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let state = Mutex(Pair())
  func read(spin: Int) -> Int { state.withLock { digest($0, spin: spin) } }
  func write(_ stamp: Int) {
    state.withLock {
      $0.first = stamp
      $0.last = stamp
    }
  }
}

// The pthread_rwlock_t guards `value`; the lock lives on the heap so its address never moves.
private final class ReaderWriterLockCandidate: LockCandidate, @unchecked Sendable {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let lock: UnsafeMutablePointer<pthread_rwlock_t>
  var value = Pair()

  init() {
    lock = .allocate(capacity: 1)
    lock.initialize(to: pthread_rwlock_t())
    pthread_rwlock_init(lock, nil)
  }

  deinit {
    pthread_rwlock_destroy(lock)
    lock.deallocate()
  }

  func read(spin: Int) -> Int {
    pthread_rwlock_rdlock(lock)
    defer { pthread_rwlock_unlock(lock) }
    return digest(value, spin: spin)
  }

  func write(_ stamp: Int) {
    pthread_rwlock_wrlock(lock)
    value.first = stamp
    value.last = stamp
    pthread_rwlock_unlock(lock)
  }
}

// The concurrent queue guards `value`: reads run in `sync`, writes in barrier blocks (the seed's pattern).
private final class BarrierQueueCandidate: LockCandidate, @unchecked Sendable {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let queue = DispatchQueue(label: "spindle.bench.barrier", attributes: .concurrent)
  var value = Pair()
  func read(spin: Int) -> Int { queue.sync { digest(value, spin: spin) } }
  func write(_ stamp: Int) {
    queue.sync(flags: .barrier) {
      value.first = stamp
      value.last = stamp
    }
  }
}

private final class IsolatedCandidate: LockCandidate {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let state = Isolated(Pair())
  func read(spin: Int) -> Int { state.read { digest($0, spin: spin) } }
  func write(_ stamp: Int) {
    state.write {
      $0.first = stamp
      $0.last = stamp
    }
  }
}

private final class IsolatedAsyncWriteCandidate: LockCandidate {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let state = Isolated(Pair())
  func read(spin: Int) -> Int { state.read { digest($0, spin: spin) } }
  func write(_ stamp: Int) {
    state.writeAsync {
      $0.first = stamp
      $0.last = stamp
    }
  }
}

private final class IsolatedAsyncArgumentWriteCandidate: LockCandidate {
  func loop(ops: Int, writeEvery: Int, spin: Int) -> Int { mixLoop(self, ops: ops, writeEvery: writeEvery, spin: spin) }
  let state = Isolated(Pair())
  func read(spin: Int) -> Int { state.read { digest($0, spin: spin) } }
  func write(_ stamp: Int) {
    state.writeAsync(stamp) { pair, stamp in
      pair.first = stamp
      pair.last = stamp
    }
  }
}

private let sink = Atomic<Int>(0)

/// Holds every thread until all have arrived, so that the threads of a run really overlap.
private final class StartGate: Sendable {
  private let arrived = Atomic<Int>(0)

  func arriveAndWait(for count: Int) {
    arrived.add(1, ordering: .acquiringAndReleasing)
    while arrived.load(ordering: .acquiring) < count { sched_yield() }
  }
}

/// CPU seconds the calling thread has used.
private func threadCPUSeconds() -> Double {
  var time = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
  return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Runs the mix on `threads` dedicated threads that start together (a start gate), so that they really overlap,
/// and returns the CPU seconds the threads spent in the mix, summed.
///
/// CPU time, not wall time: on a machine shared with other work, a thread's wall time mostly measures how
/// long it waited for a core. CPU time still counts every cache-line transfer, spin and system call of the
/// lock; time a thread sleeps in a futex waiting for the lock is not counted, which favours blocking locks
/// (Mutex, pthread_rwlock) over Isolated's lock-free reads, never the other way.
private func runMix<Candidate: LockCandidate>(
  _ candidate: Candidate,
  ops: Int,
  threads: Int,
  writeEvery: Int,
  spin: Int
) -> Double {
  let gate = StartGate()
  let finished = DispatchSemaphore(value: 0)
  let nanoseconds = Atomic<Int>(0)
  for _ in 0..<threads {
    Thread.detachNewThread {
      gate.arriveAndWait(for: threads)
      let start = threadCPUSeconds()
      let total = candidate.loop(ops: ops / threads, writeEvery: writeEvery, spin: spin)
      nanoseconds.add(Int((threadCPUSeconds() - start) * 1e9), ordering: .relaxed)
      sink.wrappingAdd(total, ordering: .relaxed)
      finished.signal()
    }
  }
  for _ in 0..<threads { finished.wait() }
  return Double(nanoseconds.load(ordering: .relaxed)) / 1e9
}

private func lockCandidateResults(_ options: BenchmarkOptions) -> [BenchmarkResult] {
  // Short runs, many of them: on a loaded machine a run longer than a scheduler time slice gets preempted
  // and its wall time measures the load, not the lock; the median of many short runs does not.
  let ops = options.quick ? 200_000 : 500_000
  let rounds = options.quick ? options.runs : max(options.runs, 15)
  let candidates: [(String, any LockCandidate)] = [
    ("Mutex", MutexCandidate()),
    ("Spindle Isolated", IsolatedCandidate()),
    ("pthread_rwlock", ReaderWriterLockCandidate()),
    // These two leave Dispatch worker threads busy for a moment after a run, so they go last in a round,
    // followed by a short pause, not to slow down whoever runs next.
    ("Spindle Isolated (writeAsync)", IsolatedAsyncWriteCandidate()),
    ("Spindle Isolated (writeAsync, argument)", IsolatedAsyncArgumentWriteCandidate()),
    ("concurrent queue + barrier", BarrierQueueCandidate()),
  ]
  var results: [BenchmarkResult] = []
  let mixes = [
    (name: "read-heavy 95/5", writeEvery: 20, spin: 0, share: 1),
    (name: "write-heavy 50/50", writeEvery: 2, spin: 0, share: 1),
    (name: "long reads (~200 multiply-adds) 95/5", writeEvery: 20, spin: 200, share: 20),
  ]
  for mix in mixes {
    for threads in [1, 2] {
      let scenario = "\(mix.name), \(threads) thread\(threads == 1 ? "" : "s")"
      let ops = ops / mix.share
      // Runs are interleaved (one run of each candidate per round) so that load from other processes on
      // this shared machine hits every candidate alike.
      let counts = candidates.map { name, _ in
        // The barrier queue is 20-90x slower; a tenth of the ops keeps the run short (per-op cost is reported).
        name.hasPrefix("concurrent queue") ? ops / 10 : ops
      }
      var seconds = Array(repeating: [Double](), count: candidates.count)
      for round in -1..<rounds {
        for (index, (_, candidate)) in candidates.enumerated() {
          let cpu = runMix(
            candidate, ops: counts[index], threads: threads, writeEvery: mix.writeEvery, spin: mix.spin)
          if round >= 0 { seconds[index].append(cpu) }  // round -1 warms up
          usleep(2_000)
        }
      }
      for (index, (name, _)) in candidates.enumerated() {
        let sample = Sample(seconds[index])
        let perSecond = Double(counts[index]) / sample.median
        results.append(
          BenchmarkResult(
            scenario: scenario,
            contender: name,
            sample: normalized(sample, by: Double(ops) / Double(counts[index])),
            items: ops,
            isBaseline: index == 0,
            note: String(format: "%.1f M ops per CPU-second", perSecond / 1e6)
          )
        )
      }
    }
  }
  return results
}

/// Scales a sample measured on fewer items to the full item count, so medians compare directly.
private func normalized(_ sample: Sample, by factor: Double) -> Sample {
  var scaled = sample
  scaled.median *= factor
  scaled.min *= factor
  scaled.max *= factor
  return scaled
}

// MARK: - Bounded task groups

@inline(never)
private func cheapTransform(_ x: Int) -> Int { x &* 2_654_435_761 }

private func concurrentMapResults(_ options: BenchmarkOptions) async -> [BenchmarkResult] {
  let count = options.quick ? 2_000 : 20_000
  let input = Array(0..<count)
  let scenario = "map \(count) trivial items"

  let contenders: [(name: String, body: () async -> Void)] = [
    (
      "withTaskGroup, all added",
      {
        let output = await withTaskGroup(of: (Int, Int).self, returning: [Int].self) { group in
          for x in input { group.addTask { (x, cheapTransform(x)) } }
          var buffer = [Int](repeating: 0, count: count)
          for await (index, value) in group { buffer[index] = value }
          return buffer
        }
        precondition(output.count == count)
      }
    ),
    (
      "concurrentMap maxConcurrent 4",
      {
        let output = try? await input.concurrentMap(maxConcurrent: 4) { cheapTransform($0) }
        precondition(output?.count == count)
      }
    ),
    (
      "concurrentMap maxConcurrent 64",
      {
        let output = try? await input.concurrentMap(maxConcurrent: 64) { cheapTransform($0) }
        precondition(output?.count == count)
      }
    ),
    (
      "withBoundedTaskGroup maxConcurrent 4",
      {
        let total = await withBoundedTaskGroup(maxConcurrent: 4, of: Int.self) { group in
          for x in input { await group.addTask { cheapTransform(x) } }
          var sum = 0
          while let value = await group.next() { sum &+= value }
          return sum
        }
        sink.wrappingAdd(total, ordering: .relaxed)
      }
    ),
  ]
  // One run of each contender per round, so that load from other processes hits all of them alike; the note gives
  // the median of the per-round ratios, the figure least moved by load that drifts between rounds.
  let clock = ContinuousClock()
  for contender in contenders { await contender.body() }  // warm-up
  var seconds = Array(repeating: [Double](), count: contenders.count)
  for _ in 0..<options.runs {
    for (index, contender) in contenders.enumerated() {
      let start = clock.now
      await contender.body()
      seconds[index].append((clock.now - start).secondsValue)
    }
  }
  return contenders.indices.map { index in
    let ratios = zip(seconds[index], seconds[0]).map { $0 / $1 }
    return BenchmarkResult(
      scenario: scenario,
      contender: contenders[index].name,
      sample: Sample(seconds[index]),
      items: count,
      isBaseline: index == 0,
      note: index == 0 ? "runs interleaved" : "per-round ratio \(formatRatio(Sample(ratios).median))"
    )
  }
}

private func formatRatio(_ ratio: Double) -> String {
  let hundredths = Int((ratio * 100).rounded())
  let fraction = String(hundredths % 100)
  return String(hundredths / 100) + "." + String(repeating: "0", count: 2 - fraction.count) + fraction + "x"
}

// MARK: - Semaphores

private func semaphoreResults(_ options: BenchmarkOptions) async -> [BenchmarkResult] {
  let pairs = options.quick ? 100_000 : 1_000_000
  var results: [BenchmarkResult] = []
  let uncontended = "wait+signal, uncontended, \(pairs)"

  let mutex = Mutex(0)
  let lockSample = measureQuiet(runs: options.runs) {
    for _ in 0..<pairs { mutex.withLock { $0 &+= 1 } }
  }
  results.append(
    BenchmarkResult(
      scenario: uncontended, contender: "Mutex lock+unlock", sample: lockSample, items: pairs, isBaseline: true)
  )
  let dispatchSemaphore = DispatchSemaphore(value: 1)
  let dispatchSample = measureQuiet(runs: options.runs) {
    for _ in 0..<pairs {
      dispatchSemaphore.wait()
      dispatchSemaphore.signal()
    }
  }
  results.append(
    BenchmarkResult(scenario: uncontended, contender: "DispatchSemaphore", sample: dispatchSample, items: pairs)
  )
  let semaphore = AsyncSemaphore(value: 1)
  let asyncSample = await measureAsyncQuiet(runs: options.runs) {
    for _ in 0..<pairs {
      await semaphore.wait()
      semaphore.signal()
    }
  }
  results.append(BenchmarkResult(scenario: uncontended, contender: "AsyncSemaphore", sample: asyncSample, items: pairs))

  let tasks = 8
  let perTask = options.quick ? 2_000 : 20_000
  let contended = "withPermit, \(tasks) tasks, 2 permits, \(tasks * perTask) total"
  let permits = AsyncSemaphore(value: 2)
  let contendedSample = await measureAsyncQuiet(runs: options.runs) {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<tasks {
        group.addTask {
          for _ in 0..<perTask {
            _ = try? await permits.withPermit { await Task.yield() }
          }
        }
      }
    }
  }
  let yieldOnly = await measureAsyncQuiet(runs: options.runs) {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<tasks {
        group.addTask {
          for _ in 0..<perTask { await Task.yield() }
        }
      }
    }
  }
  results.append(
    BenchmarkResult(
      scenario: contended,
      contender: "Task.yield only (no semaphore)",
      sample: yieldOnly,
      items: tasks * perTask,
      isBaseline: true
    )
  )
  results.append(
    BenchmarkResult(
      scenario: contended,
      contender: "AsyncSemaphore.withPermit",
      sample: contendedSample,
      items: tasks * perTask
    )
  )
  return results
}

/// `measure` for bodies that cannot fail (the harness's defaulted `prepare` makes the plain call `throws`).
private func measureQuiet(runs: Int, _ body: () -> Void) -> Sample {
  measure(runs: runs, prepare: {}, body)
}

/// `measureAsync` for bodies that cannot fail.
private func measureAsyncQuiet(runs: Int, _ body: () async -> Void) async -> Sample {
  await measureAsync(runs: runs) { await body() }
}
