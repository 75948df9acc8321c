import Dispatch
import Testing

@testable import Spindle

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

@Suite("WorkTrace")
struct WorkTraceTests {
  @Test("one event per item: name, queue, thread, times and outcome, for every kind of body")
  func recordsEveryItem() async throws {
    let trace = WorkTrace()
    let queue = WorkQueue(name: "traced", maxConcurrent: 2, trace: trace)
    let load = queue.add(name: "load \"a\"") { 1 }
    let fail: Work<Int> = queue.add(name: "fail") { throw TestError(code: 1) }
    let skipped = queue.add(name: "skipped", after: fail) { $0 }
    let remote = queue.add(name: "async") { () async in 2 }
    let callback: Work<Int> = queue.addCallback(name: "callback") { finish in
      DispatchQueue.global().async { finish(3) }
    }
    queue.suspend()
    let cancelled = queue.add(name: "cancelled") { 4 }
    cancelled.cancel()
    queue.resume()
    _ = try await (load.value, remote.value, callback.value)
    try await queue.allFinished()
    _ = skipped

    let events = trace.events
    #expect(events.count == 6)
    let byName = Dictionary(uniqueKeysWithValues: events.map { ($0.name, $0) })
    #expect(byName["load \"a\""]?.outcome == .finished)
    #expect(byName["load \"a\""]?.ran == true)
    #expect(byName["fail"]?.outcome == .failed)
    #expect(byName["skipped"]?.outcome == .failed)
    #expect(byName["skipped"]?.ran == false)
    #expect(byName["async"]?.outcome == .finished)
    #expect(byName["callback"]?.ran == true)
    #expect(byName["cancelled"]?.outcome == .cancelled)
    #expect(byName["cancelled"]?.ran == false)
    for event in events {
      #expect(event.queue == "traced")
      #expect(event.end >= event.start)
    }

    let json = trace.chromeTraceJSON()
    #expect(json.hasPrefix("{\"traceEvents\":["))
    #expect(json.contains("\"name\":\"load \\\"a\\\"\""))
    #expect(json.contains("\"ph\":\"X\""))
    #expect(json.contains("\"ph\":\"i\""))
    #expect(json.contains("\"outcome\":\"cancelled\""))
    #expect(json.contains("\"thread_name\""))
  }

  @Test("write(toFile:) writes the JSON; a bad path throws an error naming it")
  func writesFile() throws {
    let trace = WorkTrace()
    let queue = WorkQueue(name: "file", trace: trace)
    queue.add(name: "only") {}
    waitForAll(queue)
    let path = "/tmp/spindle-trace-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
    try trace.write(toFile: path)
    defer { unlink(path) }
    let file = try #require(fopen(path, "r"))
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = fread(&buffer, 1, buffer.count, file)
      if count <= 0 { break }
      bytes += buffer[0..<count]
    }
    #expect(String(decoding: bytes, as: UTF8.self) == trace.chromeTraceJSON())

    let badPath = "/nonexistent-directory-\(getpid())/trace.json"
    let error = #expect(throws: WorkTraceError.self) { try trace.write(toFile: badPath) }
    #expect(error?.description.contains(badPath) == true)
  }

  @Test("a queue without a trace records nothing and the trace can be cleared")
  func untracedQueue() async throws {
    let trace = WorkTrace()
    let traced = WorkQueue(name: "t", trace: trace)
    let plain = WorkQueue(name: "p")
    _ = try await plain.add { 1 }.value
    _ = try await traced.add { 1 }.value
    try await traced.allFinished()
    #expect(trace.events.count == 1)
    #expect(plain.trace == nil)
    trace.removeAll()
    #expect(trace.events.isEmpty)
  }
}
