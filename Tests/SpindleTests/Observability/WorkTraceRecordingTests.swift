import Dispatch
import Foundation
import Testing

@testable import Spindle

private struct Broken: Error {}

/// A small pipeline with every kind of ending, recorded by one trace over two queues.
func recordedPipeline() async throws -> (WorkTrace, [String: WorkTraceEvent]) {
  let trace = WorkTrace()
  let codec = WorkQueue(name: "codec", maxConcurrent: 2, trace: trace)
  let filter = WorkQueue(name: "filter", maxConcurrent: 1, trace: trace)
  var ends: [Work<Int>] = []
  for index in 1...3 {
    let decode = codec.add(name: "decode \(index)") { () -> Int in
      usleep(3_000)
      return index
    }
    let blur = filter.add(name: "filter \(index)", after: decode) { value -> Int in
      usleep(4_000)
      return value * 10
    }
    ends.append(codec.add(name: "encode \(index)", after: blur) { $0 + 1 })
  }
  let broken: Work<Int> = codec.add(name: "decode broken") { throw Broken() }
  let skipped = filter.add(name: "filter broken", after: broken) { $0 }
  let remote = codec.add(name: "fetch") { () async -> Int in 7 }
  let callback: Work<Int> = codec.addCallback(name: "legacy") { finish in
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.002) { finish(8) }
  }
  filter.suspend()
  let cancelled = filter.add(name: "filter cancelled") { 0 }
  cancelled.cancel()
  filter.resume()
  for end in ends { _ = try await end.value }
  _ = try await (remote.value, callback.value)
  _ = try? await skipped.value
  try await codec.allFinished()
  try await filter.allFinished()
  let byName = Dictionary(uniqueKeysWithValues: trace.items.map { ($0.name, $0) })
  return (trace, byName)
}

@Suite("WorkTrace recording")
struct WorkTraceRecordingTests {
  @Test("every item: stable id, queue, enqueue ≤ start ≤ end, outcome, attempts and dependency edges")
  func recordsItems() async throws {
    let (trace, byName) = try await recordedPipeline()
    let items = trace.items
    #expect(items.count == 14)
    #expect(items.map(\.id) == Array(1...14))
    #expect(trace.events.count == 14)
    #expect(Set(trace.events.map(\.id)) == Set(items.map(\.id)))
    for item in items {
      #expect(item.isComplete)
      #expect(item.enqueued <= item.start)
      #expect(item.start <= item.end)
      #expect(item.attempts == (item.ran ? 1 : 0))
    }
    for index in 1...3 {
      let decode = try #require(byName["decode \(index)"])
      let blur = try #require(byName["filter \(index)"])
      let encode = try #require(byName["encode \(index)"])
      #expect(decode.queue == "codec" && blur.queue == "filter" && encode.queue == "codec")
      #expect(decode.dependencies.isEmpty)
      #expect(blur.dependencies == [decode.id])
      #expect(encode.dependencies == [blur.id])
      // A dependent starts after its dependency ended, and its waiting covers all of the dependency's run after
      // the dependent was added (the dependency may start before the dependent is added: a TSan run did).
      #expect(blur.start >= decode.end)
      #expect(encode.start >= blur.end)
      #expect(blur.waited >= decode.end - max(blur.enqueued, decode.start))
      #expect(decode.duration >= .milliseconds(3))
      #expect(blur.outcome == .finished && blur.ran)
    }
    #expect(byName["decode broken"]?.outcome == .failed)
    #expect(byName["filter broken"]?.outcome == .failed)
    #expect(byName["filter broken"]?.ran == false)
    #expect(byName["filter broken"]?.dependencies == [byName["decode broken"]!.id])
    #expect(byName["fetch"]?.ran == true)
    #expect(byName["legacy"]?.ran == true)
    #expect(byName["legacy"]!.duration >= .milliseconds(2))
    #expect(byName["filter cancelled"]?.outcome == .cancelled)
    #expect(byName["filter cancelled"]?.ran == false)
    // A serial queue's bodies never overlap.
    let filters = items.filter { $0.queue == "filter" && $0.ran }.sorted { $0.start < $1.start }
    for (a, b) in zip(filters, filters.dropFirst()) { #expect(a.end <= b.start) }
  }

  @Test("unfinished items show where they stand: pending, ready, running")
  func snapshotsUnfinishedWork() async throws {
    let trace = WorkTrace()
    let queue = WorkQueue(name: "gate", maxConcurrent: 1, trace: trace)
    let gate = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    let blocker = queue.addCallback(name: "blocker") { (finish: WorkFinish<Int>) in
      started.signal()
      DispatchQueue.global().async {
        gate.wait()
        finish(1)
      }
    }
    let waiting = queue.add(name: "waiting") { 2 }
    let dependent = queue.add(name: "dependent", after: blocker) { $0 }
    await offPool { started.wait() }
    let snapshot = Dictionary(uniqueKeysWithValues: trace.items.map { ($0.name, $0) })
    #expect(snapshot["blocker"]?.outcome == .running)
    #expect(snapshot["blocker"]?.ran == true)
    #expect(snapshot["waiting"]?.outcome == .ready)
    #expect(snapshot["dependent"]?.outcome == .pending)
    #expect(trace.events.isEmpty)
    #expect(trace.graphDOT().contains("running · "))
    gate.signal()
    _ = try await (waiting.value, dependent.value)
    try await queue.allFinished()
    #expect(trace.items.allSatisfy { $0.isComplete })
  }

  @Test("dependencies on untraced queues are left out; removeAll forgets everything")
  func untracedDependencies() async throws {
    let trace = WorkTrace()
    let plain = WorkQueue(name: "plain")
    let traced = WorkQueue(name: "traced", trace: trace)
    let outside = plain.add(name: "outside") { 1 }
    let inside = traced.add(name: "inside", after: outside) { $0 + 1 }
    #expect(try await inside.value == 2)
    try await traced.allFinished()
    #expect(trace.items.count == 1)
    #expect(trace.items.first?.dependencies == [])
    trace.removeAll()
    #expect(trace.items.isEmpty && trace.events.isEmpty)
    let again = traced.add(name: "again", after: inside) { $0 }
    _ = try await again.value
    try await traced.allFinished()
    #expect(trace.items.map(\.name) == ["again"])
    #expect(trace.items.first?.dependencies == [])
    #expect(trace.items.first?.id == 1)
  }

  @Test("many items from many threads get distinct ids and correct edges")
  func manyItems() async throws {
    let trace = WorkTrace()
    let queue = WorkQueue(name: "many", maxConcurrent: 4, trace: trace)
    let roots = (0..<200).map { index in queue.add(name: "root \(index)") { index } }
    let joins = (0..<200).map { index in
      queue.add(name: "join \(index)", after: roots[index], roots[(index + 1) % 200]) { $0 + $1 }
    }
    for join in joins { _ = try await join.value }
    try await queue.allFinished()
    let items = trace.items
    #expect(items.count == 400)
    let ids = Dictionary(uniqueKeysWithValues: items.map { ($0.name, $0.id) })
    for item in items where item.name.hasPrefix("join ") {
      let index = Int(item.name.dropFirst(5))!
      #expect(item.dependencies == [ids["root \(index)"]!, ids["root \((index + 1) % 200)"]!])
    }
  }
}
