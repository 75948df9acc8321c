import Dispatch
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Issue 15: how Foundation and Dispatch themselves behave on the misuses Spindle guards against, measured in
/// child processes under a watchdog. These tests record the platform's behaviour (printed, and in RELIABILITY.md);
/// they assert only that each child ended, one way or another, so a platform fix never breaks the build. Spindle's
/// side of each comparison is asserted in Tests/SpindleTests/Reliability.
///
/// Each child exits 3 if the misuse returned, 42 if the 3-second watchdog fired (a hang), or dies by a signal (a
/// crash); all three are "failure" exits, so the expectation itself never fails.
@Suite("Reliability: the platform's misuse behaviour (measured)")
struct PlatformMisuseTests {
  static func describe(_ result: ExitTest.Result?) -> String {
    switch result?.exitStatus {
    case .exitCode(42)?: "hangs (watchdog fired after 3 s)"
    case .exitCode(3)?: "returns"
    case .exitCode(let code)?: "exits \(code)"
    case .signal(let number)?: "crashes (signal \(number))"
    default: "no result"
    }
  }

  static func record(_ name: String, _ result: ExitTest.Result?) {
    print("platform misuse: \(name): \(describe(result))")
    #expect(result != nil)
  }

  @Test("OperationQueue: a two-operation dependency cycle")
  func dependencyCycle() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      Misuse.dependencyCycle()
      exit(3)
    }
    Self.record("OperationQueue two-operation cycle", result)
  }

  @Test("Operation: addDependency(self)")
  func selfDependency() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      Misuse.selfDependency()
      exit(3)
    }
    Self.record("Operation addDependency(self)", result)
  }

  @Test("OperationQueue: adding an operation that is already queued")
  func reAddQueued() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      Misuse.reAddQueued()
      exit(3)
    }
    Self.record("OperationQueue re-adding a queued operation", result)
  }

  @Test("DispatchQueue: sync onto the current serial queue")
  func syncOntoCurrentQueue() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      let queue = DispatchQueue(label: "platform.serial")
      queue.sync { queue.sync {} }
      exit(3)
    }
    Self.record("DispatchQueue sync onto the current serial queue", result)
  }

  @Test("DispatchQueue: a barrier sync inside a read sync on the same concurrent queue")
  func barrierInsideRead() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      let queue = DispatchQueue(label: "platform.concurrent", attributes: .concurrent)
      queue.sync { queue.sync(flags: .barrier) {} }
      exit(3)
    }
    Self.record("DispatchQueue barrier sync inside a read sync", result)
  }

  @Test("DispatchQueue: A sync→ B sync→ A")
  func twoQueueCycle() async {
    let result = await #expect(processExitsWith: .failure) {
      DispatchQueue.global().asyncAfter(deadline: .now() + 3) { exit(42) }
      let a = DispatchQueue(label: "platform.a")
      let b = DispatchQueue(label: "platform.b")
      a.sync { b.sync { a.sync {} } }
      exit(3)
    }
    Self.record("DispatchQueue A→B→A sync cycle", result)
  }
}

/// The misuses themselves, in synchronous functions (exit-test bodies are `async`, where the blocking calls are
/// unavailable).
enum Misuse {
  static func dependencyCycle() {
    let queue = OperationQueue()
    let a = BlockOperation {}
    let b = BlockOperation {}
    a.addDependency(b)
    b.addDependency(a)
    queue.addOperations([a, b], waitUntilFinished: true)
  }

  static func selfDependency() {
    let operation = BlockOperation {}
    operation.addDependency(operation)
    OperationQueue().addOperations([operation], waitUntilFinished: true)
  }

  static func reAddQueued() {
    let queue = OperationQueue()
    queue.isSuspended = true
    let operation = BlockOperation {}
    queue.addOperation(operation)
    queue.addOperation(operation)
    queue.isSuspended = false
    queue.waitUntilAllOperationsAreFinished()
  }
}
