import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Proves that ThreadSanitizer is really on in the TSan run: a deliberate data race runs in a child process.
///
/// The child's standard error is captured by the exit test, so its race report never reaches this process's output
/// (CI fails when a ThreadSanitizer warning header appears anywhere in its log; this comment avoids quoting it, since
/// swift-testing prints a failing suite's comment). With `SPINDLE_EXPECT_TSAN=1` (set by `.ci/run` for
/// `swift test --sanitize=thread`) the child must fail and mention ThreadSanitizer; without it the child must exit
/// normally.
@Suite struct ThreadSanitizerCanaryTests {
  static let marker = "spindle canary: two threads raced"

  @Test func deliberateRaceIsCaughtOnlyUnderThreadSanitizer() async {
    if environmentFlag("SPINDLE_EXPECT_TSAN") {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        runDeliberateRace()
      }
      let stderr = text(result?.standardErrorContent)
      let reported = stderr.contains("ThreadSanitizer")
      let raced = stderr.contains(Self.marker)
      #expect(reported, "SPINDLE_EXPECT_TSAN=1 but the child's race was not reported: is TSan on?")
      #expect(raced, "the canary child did not run its race")
    } else {
      let result = await #expect(
        processExitsWith: .success,
        observing: [\.standardErrorContent],
        "exit code 66 means ThreadSanitizer is on: the TSan run must set SPINDLE_EXPECT_TSAN=1"
      ) {
        runDeliberateRace()
      }
      if let result {
        let raced = text(result.standardErrorContent).contains(Self.marker)
        #expect(raced, "the canary child did not run its race")
      }
    }
  }
}

/// Two threads increment one unsynchronised counter, then a marker line goes to standard error.
private func runDeliberateRace() {
  let counter = UnsafeMutablePointer<Int>.allocate(capacity: 1)
  counter.initialize(to: 0)
  #if canImport(Glibc)
    let increment: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { raw in
      incrementUnsynchronised(raw!)
      return nil
    }
    var threads = [pthread_t(), pthread_t()]
    for index in threads.indices { pthread_create(&threads[index], nil, increment, counter) }
    for thread in threads { pthread_join(thread, nil) }
  #else
    let increment: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? = { raw in
      incrementUnsynchronised(raw)
      return nil
    }
    var threads: [pthread_t?] = [nil, nil]
    for index in threads.indices { pthread_create(&threads[index], nil, increment, counter) }
    for thread in threads { if let thread { pthread_join(thread, nil) } }
  #endif
  let line = "\(ThreadSanitizerCanaryTests.marker) (count \(counter.pointee))\n"
  _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
}

/// The racing half: 10,000 unsynchronised increments of the `Int` at `raw`.
private func incrementUnsynchronised(_ raw: UnsafeMutableRawPointer) {
  let counter = raw.assumingMemoryBound(to: Int.self)
  for _ in 0..<10_000 { counter.pointee &+= 1 }
}
