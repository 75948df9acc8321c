import Dispatch
import Foundation
import Spindle
import Synchronization
import Testing

/// Issue 15, item 10: completed work lets go of everything, and repeating a big scenario does not grow memory.
@Suite("Reliability: memory")
struct MemoryTests {
  struct Failure: Error {}

  /// A mixed scenario: chains, fan-in, failures, cancellations, sync, async and callback bodies, each capturing
  /// a payload. Returns weak references to every payload and work item; the caller drops the handles.
  static func scenario(items: Int, queue: WorkQueue) -> (payloads: [WeakBox], works: [WeakBox]) {
    var payloads: [WeakBox] = []
    var works: [WeakBox] = []
    var previous: Work<Int>?
    for index in 0..<items {
      let payload = Payload(index)
      payloads.append(WeakBox(payload))
      let work: Work<Int>
      switch index % 5 {
      case 0:
        work = queue.add { payload.index }
      case 1:
        work = queue.add { () async -> Int in payload.index }
      case 2:
        work = queue.addCallback { (finish: WorkFinish<Int>) in
          DispatchQueue.global().async { finish(payload.index) }
        }
      case 3:
        if let previous {
          work = queue.add(afterResults: previous) { _ in payload.index }
        } else {
          work = queue.add { payload.index }
        }
      default:
        work = queue.add { () throws -> Int in
          if payload.index % 10 == 4 { throw Failure() }
          return payload.index
        }
      }
      if index % 50 == 7 { work.cancel() }
      works.append(WeakBox(work))
      previous = work
    }
    return (payloads, works)
  }

  @Test("after draining, every payload a body captured and every dropped work item is freed")
  func weakReferencesAreNilAfterDraining() async throws {
    let items = Reliability.size(10_000, full: 100_000)
    var queue: WorkQueue? = WorkQueue(name: "memory", maxConcurrent: 4)
    let (payloads, works) = Self.scenario(items: items, queue: queue!)
    #expect(await drained(queue!))
    let queueRef = WeakBox(queue!)
    queue = nil
    let payloadsFreed = await eventually { payloads.allSatisfy { $0.object == nil } }
    #expect(payloadsFreed, "\(payloads.filter { $0.object != nil }.count) of \(items) captured payloads alive")
    let worksFreed = await eventually { works.allSatisfy { $0.object == nil } }
    #expect(worksFreed, "\(works.filter { $0.object != nil }.count) of \(items) work items alive")
    let queueFreed = await eventually { queueRef.object == nil }
    #expect(queueFreed, "the drained queue is still alive")
    print(
      "reliability memory: \(items) items, payloads alive \(payloads.filter { $0.object != nil }.count), "
        + "work items alive \(works.filter { $0.object != nil }.count), queue alive \(queueRef.object != nil)")
  }

  @Test("a completed item held by its handle has already released its body and its inputs")
  func heldHandleReleasesBody() async throws {
    let queue = WorkQueue(name: "held")
    var payload: Payload? = Payload(1)
    let weak = WeakBox(payload!)
    let work = queue.add { [payload] in payload!.index }
    let dependent = queue.add(after: work) { $0 + 1 }
    payload = nil
    #expect(try await dependent.value == 2)
    #expect(await eventually { weak.object == nil }, "the body's capture outlived the work")
    #expect(work.state == .finished)
  }

  @Test("the error a body threw is freed with its work: nothing keeps a failure's payload alive")
  func thrownErrorsAreFreed() async throws {
    struct CarryingError: Error {
      let payload: Payload
    }
    let queue = WorkQueue(name: "errors")
    var weak: [WeakBox] = []
    var works: [Work<Int>] = []
    for index in 0..<100 {
      let payload = Payload(index)
      weak.append(WeakBox(payload))
      let root = queue.add { () throws -> Int in throw CarryingError(payload: payload) }
      works.append(root)
      works.append(queue.add(after: root) { $0 })  // fails with the same error, which it now holds too
    }
    #expect(await drained(queue))
    #expect(works.allSatisfy { $0.state == .failed })
    works.removeAll()
    let freed = await eventually { weak.allSatisfy { $0.object == nil } }
    #expect(freed, "\(weak.filter { $0.object != nil }.count) error payloads still alive")
  }

  /// Runs in a child process so that no other test's allocations count: ten rounds of the scenario, with the
  /// resident set size after each. The growth from round 2 to round 10 must stay under 32 MB.
  @Test(
    "ten rounds of 100,000 items in one process grow RSS by less than 32 MB after the first (child process)",
    .disabled(if: Reliability.underAddressSanitizer, "AddressSanitizer's quarantine holds freed memory"))
  func rssIsBoundedOverTenRounds() async throws {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let items = Reliability.size(20_000, full: 100_000)
      var sizes: [Int] = []
      for _ in 0..<10 {
        let queue = WorkQueue(name: "rss", maxConcurrent: 4)
        _ = Self.scenario(items: items, queue: queue)
        blockUntilFinished(queue)
        usleep(100_000)  // let handlers dispatched at completion finish and free
        sizes.append(procStatus("VmRSS") ?? 0)
      }
      let growth = (sizes[9] - sizes[1]) / 1024
      report("items=\(items) rss-kB=\(sizes) growthMB=\(growth)")
      exit(growth < 32 ? 0 : 1)
    }
    let output = text(result?.standardErrorContent)
    print("reliability rss: \(output)")
    #expect(reported("growthMB", in: result?.standardErrorContent) != nil, "\(output)")
  }
}
