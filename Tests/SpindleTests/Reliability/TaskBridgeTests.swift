import Dispatch
import Foundation
import Spindle
import Synchronization
import Testing

/// Issue 15, item 9: `await work.value` from many tasks, some cancelled at random moments. Every awaiting task
/// returns exactly once (a leaked continuation would leave one waiting forever; one resumed twice traps the
/// process), cancelling an awaiter never cancels the work, and the work objects are freed afterwards.
@Suite("Reliability: the Task bridge")
struct TaskBridgeTests {
  @Test("100,000 awaited items (bounded by default), a fifth of the awaiters cancelled at random moments")
  func awaitersCancelledAtRandom() async throws {
    let count = Reliability.size(6_000, full: 100_000)
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    let queue = WorkQueue(name: "bridge", maxConcurrent: 4)
    let entered = Tally()
    let returned = Counters(count)
    let gotValue = Tally()
    let gotCancelled = Tally()
    let wrong = Tally()
    var weakWork: [WeakBox] = []
    var awaiters: [Task<Void, Never>] = []
    var cancelAt: [Int: Int] = [:]  // awaiter index → moment (0 at once, 1 after some yields, 2 after its work ends)
    weakWork.reserveCapacity(count)
    awaiters.reserveCapacity(count)
    do {
      var works: [Work<Int>] = []
      works.reserveCapacity(count)
      for index in 0..<count {
        let work: Work<Int>
        if index % 2 == 0 {
          work = queue.add { index }
        } else {
          work = queue.add { () async -> Int in
            await Task.yield()
            return index
          }
        }
        works.append(work)
        weakWork.append(WeakBox(work))
        if random.next() % 5 == 0 { cancelAt[index] = Int(random.next() % 3) }
      }
      for (index, work) in works.enumerated() {
        awaiters.append(
          Task {
            entered.add()
            do {
              let value = try await work.value
              if value == index { gotValue.add() } else { wrong.add() }
            } catch is CancellationError {
              gotCancelled.add()
            } catch {
              wrong.add()
            }
            returned.increment(index)
          })
      }
      var yields = 0
      for (index, moment) in cancelAt.sorted(by: { $0.key < $1.key }) {
        switch moment {
        case 0: awaiters[index].cancel()
        case 1:
          if yields % 16 == 0 { await Task.yield() }
          yields += 1
          awaiters[index].cancel()
        default:
          _ = try? await works[index].value
          awaiters[index].cancel()
        }
      }
      for awaiter in awaiters { await awaiter.value }
      #expect(await drained(queue))
      // Cancelling an awaiter never cancels the work.
      let notFinished = works.indices.filter { works[$0].state != .finished }
      #expect(notFinished.isEmpty, "seed \(seed): work ended other than finished: \(notFinished.prefix(10))")
    }
    awaiters.removeAll()
    #expect(entered.value == count)
    #expect(returned.mismatches { _ in 1 }.isEmpty, "seed \(seed): an awaiter returned ≠ once")
    #expect(gotValue.value + gotCancelled.value == count)
    #expect(gotValue.value >= count - cancelAt.count, "an awaiter that was not cancelled failed")
    #expect(wrong.value == 0, "seed \(seed): a wrong value or error")
    // Nothing keeps a completed item alive: no continuation or handler left holding it.
    let freed = await eventually { weakWork.allSatisfy { $0.object == nil } }
    #expect(freed, "\(weakWork.filter { $0.object != nil }.count) work items still alive")
    print(
      "reliability bridge: \(count) awaiters, \(cancelAt.count) cancelled, returned once "
        + "\((0..<count).filter { returned[$0] == 1 }.count), values \(gotValue.value), cancelled \(gotCancelled.value), "
        + "wrong \(wrong.value), work alive \(weakWork.filter { $0.object != nil }.count)")
  }
}
