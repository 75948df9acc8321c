import Dispatch
import Spindle
import Synchronization
import Testing

/// Issue 15, items 2 and 5: large volumes through one queue, every outcome accounted for.
@Suite("Reliability: volume")
struct EngineVolumeTests {
  struct Failure: Error, Equatable {
    var index: Int
  }

  /// Item 2: a third cancelled before start; every completion exactly once, none stuck, no cancelled body runs.
  @Test("1,000,000 items at width 8, a third cancelled before start (bounded by default)")
  func millionItemsAThirdCancelled() async throws {
    let total = Reliability.size(30_000, full: 1_000_000)
    let queue = WorkQueue(name: "volume", maxConcurrent: 8)
    let ran = Counters(total)
    let completed = Counters(total)
    let outcomes = Counters(total)  // +1 finished with the right value, +2 cancelled, +100 anything else
    let allCompleted = Countdown(total)
    let handlerQueue = DispatchQueue(label: "volume.handlers", attributes: .concurrent)
    queue.suspend()
    var items: [Work<Int>] = []
    items.reserveCapacity(total)
    for index in 0..<total {
      items.append(
        queue.add {
          ran.increment(index)
          return index &* 31
        })
    }
    for index in stride(from: 0, to: total, by: 3) { items[index].cancel() }
    for (index, item) in items.enumerated() {
      item.onCompletion(on: handlerQueue) { result in
        completed.increment(index)
        switch result {
        case .success(let value) where value == index &* 31: outcomes.add(1, to: index)
        case .failure(is CancellationError): outcomes.add(2, to: index)
        default: outcomes.add(100, to: index)
        }
        allCompleted.tick()
      }
    }
    queue.resume()
    let finished = await allCompleted.wait(seconds: Reliability.seconds(60, full: 600))
    #expect(finished, "\(allCompleted.left) of \(total) items never completed")
    #expect(await drained(queue), "the queue still has unfinished work")
    #expect(queue.unfinishedCount == 0)
    let wrongRuns = ran.mismatches { $0 % 3 == 0 ? 0 : 1 }
    #expect(wrongRuns.isEmpty, "bodies run a wrong number of times (cancelled ones must not run): \(wrongRuns)")
    let wrongCompletions = completed.mismatches { _ in 1 }
    #expect(wrongCompletions.isEmpty, "completion handlers not called exactly once: \(wrongCompletions)")
    let wrongOutcomes = outcomes.mismatches { $0 % 3 == 0 ? 2 : 1 }
    #expect(wrongOutcomes.isEmpty, "wrong outcomes (1 value, 2 cancelled): \(wrongOutcomes)")
    let lost = (0..<total).filter { completed[$0] == 0 }.count
    let duplicated = (0..<total).filter { completed[$0] > 1 }.count
    let cancelledRan = stride(from: 0, to: total, by: 3).filter { ran[$0] != 0 }.count
    print(
      "reliability volume: \(total) items: lost \(lost), duplicated \(duplicated), cancelled yet ran \(cancelledRan)")
    for index in [0, 1, 2, total - 1] {
      #expect(items[index].state == (index % 3 == 0 ? .cancelled : .finished))
    }
  }

  /// Item 5: exactly the failures that were thrown are reported; dependents follow the propagation rules.
  @Test("100,000 items with 10% throwing: failures counted exactly, dependents follow (bounded by default)")
  func tenPercentThrow() async throws {
    let total = Reliability.size(10_000, full: 100_000)
    let seed = Reliability.seed()
    var random = Reliability.Random(seed: seed)
    let throwing = (0..<total).map { _ in random.next() % 10 == 0 }
    let expectedFailures = throwing.filter { $0 }.count
    let queue = WorkQueue(name: "throwing", maxConcurrent: 4)
    let dependentRan = Counters(total)
    let observerRan = Counters(total)
    var roots: [Work<Int>] = []
    var dependents: [Work<Int>] = []
    var observers: [Work<Bool>] = []
    for index in 0..<total {
      let fails = throwing[index]
      let root = queue.add { () throws -> Int in
        if fails { throw Failure(index: index) }
        return index
      }
      roots.append(root)
      dependents.append(
        queue.add(after: root) { value in
          dependentRan.increment(index)
          return value + 1
        })
      // A `Result` dependent runs whatever happened and sees exactly the root's error.
      observers.append(
        queue.add(afterResults: root) { result in
          observerRan.increment(index)
          switch result {
          case .success(let value): return !fails && value == index
          case .failure(let error): return fails && (error as? Failure) == Failure(index: index)
          }
        })
    }
    #expect(await drained(queue), "seed \(seed): the queue did not drain")
    var rootFailures = 0
    var wrong: [String] = []
    for index in 0..<total {
      let fails = throwing[index]
      if case .failure(let error)? = roots[index].result {
        rootFailures += 1
        if (error as? Failure) != Failure(index: index) { wrong.append("root \(index): \(error)") }
      }
      switch dependents[index].result {
      case .failure(let error)? where fails && (error as? Failure) == Failure(index: index): break
      case .success(let value)? where !fails && value == index + 1: break
      case let other: wrong.append("dependent \(index): \(String(describing: other))")
      }
      if observers[index].result.flatMap({ try? $0.get() }) != true { wrong.append("observer \(index)") }
      if wrong.count > 10 { break }
    }
    #expect(rootFailures == expectedFailures, "seed \(seed)")
    #expect(wrong.isEmpty, "seed \(seed): \(wrong)")
    #expect(dependentRan.mismatches { throwing[$0] ? 0 : 1 }.isEmpty, "a dependent of a failure ran (seed \(seed))")
    #expect(observerRan.mismatches { _ in 1 }.isEmpty, "a Result dependent did not run exactly once (seed \(seed))")
    print(
      "reliability throwing: \(total) items, \(expectedFailures) thrown, \(rootFailures) failures reported, "
        + "\(wrong.count) wrong outcomes (seed \(seed))")
  }
}

extension Int {
  var double: Double { Double(self) }
}
