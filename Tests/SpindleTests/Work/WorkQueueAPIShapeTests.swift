import Dispatch
import Testing

@testable import Spindle

// The API shape from the WorkQueue issue, line by line. If one of these lines stops compiling, the
// public API broke its promise.

private struct Image: Sendable, Equatable {
  var pixels: [Int]
}

private struct DecodeError: Error {}

private func decode(_ path: String) throws -> Image {
  guard !path.isEmpty else { throw DecodeError() }
  return Image(pixels: Array(path.utf8).map(Int.init))
}

private func tiltShift(_ image: Image) -> Image {
  Image(pixels: image.pixels.map { $0 * 2 })
}

private func store(_ image: Image) async throws -> Int {
  await Task.yield()
  return image.pixels.reduce(0, +)
}

private func legacyFetch(_ completion: @escaping @Sendable (Int) -> Void) {
  DispatchQueue.global().async { completion(42) }
}

private func blockUntilAllFinished(_ queue: WorkQueue) {
  queue.waitUntilAllFinished()
}

@Suite("WorkQueue API shape")
struct WorkQueueAPIShapeTests {
  @Test("every line of the issue's API shape compiles and works")
  func issueShape() async throws {
    let path = "ab"
    let queue = WorkQueue(name: "images", maxConcurrent: 4)  // also qos:, and maxConcurrent: 1 = serial
    let load = queue.add(name: "load") { try decode(path) }  // Work<Image>; sync throwing body
    let blur = queue.add(name: "blur", after: load) { image in tiltShift(image) }  // typed value passed in
    let a = queue.add { 20 }
    let b = queue.add { 22 }
    let pair = queue.add(after: a, b) { x, y in x + y }  // several typed dependencies
    let save = queue.add(after: blur) { image async throws in try await store(image) }  // async body
    let old = queue.addCallback { finish in legacyFetch { finish($0) } }  // the seed's AsyncOperation case
    let v = try await save.value  // async; throws the failure or CancellationError

    #expect(v == (97 + 98) * 2)
    #expect(try await pair.value == 42)
    #expect(try await old.value == 42)
    #expect(load.name == "load")
    #expect(blur.state == .finished)

    save.cancel()
    queue.cancelAll()
    queue.suspend()
    queue.resume()
    blockUntilAllFinished(queue)  // blocking, marked unavailable from async contexts
    try await queue.allFinished()
    #expect(queue.unfinishedCount == 0)
    #expect(save.state == .finished, "cancelling finished work changes nothing")
  }

  @Test("the other shapes: serial queue, qos, ordering-only, Result inputs, priorities, callbacks")
  func otherShapes() async throws {
    let serial = WorkQueue(name: "serial", maxConcurrent: 1, qos: .utility)
    let text = serial.add(name: "text", priority: .high) { "x" }
    let number = serial.add(name: "number", priority: .low) { 1 }
    let ordered = serial.add(name: "ordered", dependencies: [text, number]) { "after both" }
    let typedAndOrdered = serial.add(after: text, dependencies: [number]) { $0 + "!" }
    let outcome = serial.add(afterResults: number) { result in (try? result.get()) ?? -1 }
    let three = serial.add(after: text, number, outcome) { t, n, o in "\(t)\(n)\(o)" }
    let four = serial.add(after: text, number, outcome, three) { t, n, o, s in "\(t)\(n)\(o)\(s)" }
    let withInput = serial.addCallback(after: number) { n, finish in finish(n + 1) }
    let fromResult: Work<Int> = serial.addCallback { finish in finish(Result<Int, any Error>.success(5)) }
    let context = serial.add { WorkContext.current?.name ?? "none" }
    #expect(try await ordered.value == "after both")
    #expect(try await typedAndOrdered.value == "x!")
    #expect(try await outcome.value == 1)
    #expect(try await three.value == "x11")
    #expect(try await four.value == "x11x11")
    #expect(try await withInput.value == 2)
    #expect(try await fromResult.value == 5)
    #expect(try await context.value == "none")
    #expect(WorkContext.current == nil)
    #expect(serial.maxConcurrent == 1)
    #expect(serial.qos == .utility)
    #expect(WorkQueue().maxConcurrent == WorkQueue.activeProcessorCount)
  }
}
