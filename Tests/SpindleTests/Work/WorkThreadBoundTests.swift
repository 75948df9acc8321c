import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Spindle

/// The number of threads of this process, from `/proc/self/status` (Linux); `nil` elsewhere.
func processThreadCount() -> Int? {
  guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
  for line in status.split(separator: "\n") where line.hasPrefix("Threads:") {
    return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
  }
  return nil
}

/// Runs `workload` while sampling the thread count; exits the (child) process with the growth as its status if the
/// peak rose above the count before it by more than `width` plus the documented constant.
func expectThreadBound(width: Int, _ workload: () throws -> Void) rethrows {
  guard let before = processThreadCount() else { return }
  let peak = Atomic<Int>(before)
  let done = Atomic<Bool>(false)
  let sampler = Thread {
    while !done.load(ordering: .relaxed) {
      if let now = processThreadCount() { peak.max(now, ordering: .relaxed) }
      usleep(200)
    }
  }
  sampler.start()
  try workload()
  done.store(true, ordering: .relaxed)
  // The documented bound: `maxConcurrent` lanes, plus the cooperative pool and Dispatch's manager threads
  // (a constant); sanitizers add threads of their own.
  let sanitized = ProcessInfo.processInfo.environment["SPINDLE_EXPECT_TSAN"] != nil
  let constant = sanitized ? 16 : 8
  let grown = peak.load(ordering: .relaxed) - before - 1  // minus the sampler
  if grown > width + constant {
    FileHandle.standardError.write(Data("threads grew by \(grown) at width \(width)\n".utf8))
    exit(Int32(min(grown, 250)))
  }
}

@Suite("WorkQueue thread bound")
struct WorkThreadBoundTests {
  @Test("callback bodies that call finish synchronously, width 2: threads stay bounded")
  func callbacksWidthTwo() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      expectThreadBound(width: 2) {
        let queue = WorkQueue(name: "callbacks", maxConcurrent: 2)
        let later = DispatchQueue(label: "finisher")
        for index in 0..<20_000 {
          queue.addCallback { (finish: WorkFinish<Int>) in
            if index % 10 == 0 { later.async { finish(index) } } else { finish(index) }
          }
        }
        queue.waitUntilAllFinished()
      }
    }
    if let result, result.exitStatus != .exitCode(0) {
      Issue.record("\(String(decoding: result.standardErrorContent, as: UTF8.self))")
    }
  }

  @Test("async bodies, widths 2 and 64: they take no lane at all")
  func asyncBodies() async {
    await #expect(processExitsWith: .success) {
      for width in [2, 64] {
        expectThreadBound(width: 2) {  // only the cooperative pool: the bound of width 2 holds for any width
          let queue = WorkQueue(name: "async", maxConcurrent: width)
          for index in 0..<20_000 {
            queue.add { () async -> Int in index }
          }
          queue.waitUntilAllFinished()
        }
      }
    }
  }

  @Test("blocking synchronous bodies, widths 2 and 64: one thread per slot at most")
  func blockingBodies() async {
    await #expect(processExitsWith: .success) {
      for width in [2, 64] {
        expectThreadBound(width: width) {
          let queue = WorkQueue(name: "blocking", maxConcurrent: width)
          for _ in 0..<(width * 4) {
            queue.add { usleep(3_000) }
          }
          queue.waitUntilAllFinished()
        }
      }
    }
  }
}
