import Dispatch
import Spindle
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Main-actor delivery in both shapes of command-line program (swiftlang/swift#90851: on Linux the
/// main actor runs wherever the main queue is drained, which is not the main thread after
/// `dispatchMain()`). Each case runs in a child process so it owns the process's main queue.
///
/// `dispatchMain()` is called from a plain POSIX thread: on Linux it ends the calling thread with
/// `pthread_exit`, which from a cooperative-pool thread (where an exit test's body runs) tears a Swift
/// task down mid-flight and crashes the child now and then. (The child's real main thread is already
/// parked by the async entry point of the test runner, which on Linux also goes through `dispatch_main`.)
@Suite struct MainActorDeliveryTests {
  @Test func deliversOnTheMainActorInAProgramThatCallsDispatchMain() async {
    await #expect(processExitsWith: .success) {
      let sut = ConcurrentActionExecutor<Int, Int> { $0 * 2 }
      startDispatchMainOnAPlainThread()
      sut.executeAndDeliverOnMain(21) { output in
        MainActor.preconditionIsolated("completion must be isolated to the main actor")
        dispatchPrecondition(condition: .onQueue(.main))
        exit(output == 42 ? EXIT_SUCCESS : EXIT_FAILURE)
      }
      try? await Task.sleep(for: .seconds(30))
      exit(EXIT_FAILURE)  // the completion never ran
    }
  }

  @Test func voidAndThrowingFormsDeliverOnTheMainActorAfterDispatchMain() async {
    await #expect(processExitsWith: .success) {
      let plain = ConcurrentActionExecutor<Void, Int> { 1 }
      let throwing = ThrowingConcurrentActionExecutor<Void, Int> { 2 }
      startDispatchMainOnAPlainThread()
      plain.executeAndDeliverOnMain { first in
        MainActor.preconditionIsolated()
        throwing.executeAndDeliverOnMain { second in
          MainActor.preconditionIsolated()
          dispatchPrecondition(condition: .onQueue(.main))
          exit(first == 1 && (try? second.get()) == 2 ? EXIT_SUCCESS : EXIT_FAILURE)
        }
      }
      try? await Task.sleep(for: .seconds(30))
      exit(EXIT_FAILURE)  // the completion never ran
    }
  }

  @Test func deliversOnTheMainActorInAProgramWithAnAsyncMain() async {
    await #expect(processExitsWith: .success) {
      // The body runs inside the child's async main; it awaits delivery instead of parking.
      let sut = ConcurrentActionExecutor<Int, Int> { $0 + 1 }
      let output = await withCheckedContinuation { continuation in
        sut.executeAndDeliverOnMain(1) { output in
          MainActor.preconditionIsolated()
          dispatchPrecondition(condition: .onQueue(.main))
          continuation.resume(returning: output)
        }
      }
      let resumed = await Task { @MainActor in await sut.executeAndDeliverOnMain(2) }.value
      exit(output == 2 && resumed == 3 ? EXIT_SUCCESS : EXIT_FAILURE)
    }
  }
}

/// Starts a plain POSIX thread that calls `dispatchMain()`, and returns once it is about to.
func startDispatchMainOnAPlainThread() {
  let ready = DispatchSemaphore(value: 0)
  let context = Unmanaged.passRetained(ready).toOpaque()
  #if canImport(Glibc)
    var thread = pthread_t()
  #else
    var thread: pthread_t? = nil
  #endif
  #if canImport(Glibc)
    let body: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { argument in
      Unmanaged<DispatchSemaphore>.fromOpaque(argument!).takeRetainedValue().signal()
      dispatchMain()
    }
  #else
    let body: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? = { argument in
      Unmanaged<DispatchSemaphore>.fromOpaque(argument).takeRetainedValue().signal()
      dispatchMain()
    }
  #endif
  let result = pthread_create(&thread, nil, body, context)
  precondition(result == 0, "pthread_create failed: \(result)")
  ready.wait()
}
