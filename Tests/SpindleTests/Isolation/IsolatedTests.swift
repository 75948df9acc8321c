import Dispatch
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

private struct Person: Sendable {
  var first: String
  var last: String
}

private struct Pair: Sendable {
  var a = 0
  var b = 0
}

private enum Boom: Error { case boom }

/// Burns a little time between two field writes so that a missing lock would let readers see them torn.
@inline(never)
private func busyWork(_ n: Int) -> Int {
  var x = n
  for i in 0..<50 { x = x &* 31 &+ i }
  return x
}

@Suite struct IsolatedTests {
  @Test func issueShape() {
    let person = Isolated(Person(first: "Anna", last: "Adams"))
    // The issue's shape, verbatim.
    // swift-format-ignore
    person.write { $0.first = "Brian"; $0.last = "Biggles" }
    let name = person.read { "\($0.first) \($0.last)" }
    #expect(name == "Brian Biggles")
    person.writeAsync { $0.last = "Frost" }
    #expect(person.read { "\($0.first) \($0.last)" } == "Brian Frost")
  }

  @Test func writeReturnsTheClosureResultAndKeepsChangesMadeBeforeAThrow() {
    let pair = Isolated(Pair())
    let previous = pair.write { p in
      defer { p.a = 7 }
      return p.a
    }
    #expect(previous == 0)
    #expect(throws: Boom.boom) {
      try pair.write { (p: inout Pair) throws(Boom) in
        p.b = 9
        throw .boom
      }
    }
    #expect(pair.read(\.a) == 7)
    #expect(pair.read(\.b) == 9)
    #expect(throws: Boom.boom) {
      try pair.read { (_: borrowing Pair) throws(Boom) -> Int in throw .boom }
    }
  }

  @Test func neverTearsUnderConcurrentWriters() {
    let pair = Isolated(Pair())
    let torn = Counter()
    let iterations = Stress.scaled(5_000)
    DispatchQueue.concurrentPerform(iterations: 4) { worker in
      for i in 0..<iterations {
        let stamp = worker * iterations + i
        switch (worker + i) % 3 {
        case 0:
          pair.write { p in
            if p.a != p.b { torn.add(1) }
            p.a = stamp
            p.b = busyWork(stamp) == 0 ? -1 : stamp
          }
        case 1:
          pair.writeAsync { p in
            if p.a != p.b { torn.add(1) }
            p.a = -stamp
            p.b = busyWork(stamp) == 0 ? -1 : -stamp
          }
        default:
          if pair.read({ $0.a != $0.b }) { torn.add(1) }
        }
      }
    }
    #expect(torn.value == 0)
    #expect(pair.read { $0.a == $0.b })
  }

  @Test func laterReadOnAnotherThreadSeesWriteAsync() {
    // The background drain never runs here: readers alone must apply the queued writes.
    let stalled = DispatchQueue(label: "spindle.test.stalled-drain")
    stalled.suspend()
    defer { stalled.resume() }
    let pair = Isolated(Pair(), drainingOn: stalled)
    var stale = 0
    for i in 1...Stress.scaled(500) {
      pair.writeAsync { $0.a = i }
      let seen = TSanVisibleMutex(0)
      let done = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        seen.withLock { $0 = pair.read(\.a) }
        done.signal()
      }
      done.wait()
      if seen.withLock({ $0 }) != i { stale += 1 }
    }
    #expect(stale == 0)
  }

  @Test func laterWriteSeesWriteAsyncAndAsyncWritesKeepIssueOrder() {
    let stalled = DispatchQueue(label: "spindle.test.stalled-drain")
    stalled.suspend()
    defer { stalled.resume() }
    let log = Isolated([Int](), drainingOn: stalled)
    for i in 0..<1_000 { log.writeAsync { $0.append(i) } }
    let count = log.write { list in
      list.append(-1)
      return list.count
    }
    #expect(count == 1_001)
    #expect(log.read { $0 } == Array(0..<1_000) + [-1])
  }

  @Test func writeAsyncFromManyThreadsLosesNothing() {
    let counter = Isolated(0)
    let perThread = Stress.scaled(2_000)
    DispatchQueue.concurrentPerform(iterations: 4) { _ in
      for _ in 0..<perThread { counter.writeAsync { $0 += 1 } }
    }
    #expect(counter.read { $0 } == 4 * perThread)
  }

  @Test func writeAsyncIsAppliedWithoutAnyLaterAccess() {
    let flag = Isolated(false)
    let applied = DispatchSemaphore(value: 0)
    flag.writeAsync {
      $0 = true
      applied.signal()
    }
    #expect(applied.wait(timeout: .now() + 120 * hangBoundScale) == .success)
    #expect(flag.read { $0 })
  }

  // MARK: - writeAsync with an argument (the form that allocates nothing when the lock is free)

  @Test func argumentWritesInterleaveWithClosureWritesInIssueOrder() {
    // The drain never runs and the lock is held by another thread at times, so some writes queue and some apply
    // at once; the log must still be in issue order, whichever form issued each write.
    let stalled = DispatchQueue(label: "spindle.test.stalled-drain")
    stalled.suspend()
    defer { stalled.resume() }
    let log = Isolated([Int](), drainingOn: stalled)
    let holder = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      log.write { _ in
        holder.signal()
        release.wait()
      }
    }
    holder.wait()
    for i in 0..<200 {
      if i == 100 { release.signal() }  // the first hundred queue behind the held lock, the rest race its release
      if i.isMultiple(of: 2) {
        log.writeAsync(i) { list, i in list.append(i) }
      } else {
        log.writeAsync { $0.append(i) }
      }
    }
    #expect(log.read { $0 } == Array(0..<200))
  }

  @Test func laterReadOnAnotherThreadSeesAnArgumentWrite() {
    let stalled = DispatchQueue(label: "spindle.test.stalled-drain")
    stalled.suspend()
    defer { stalled.resume() }
    let pair = Isolated(Pair(), drainingOn: stalled)
    var stale = 0
    for i in 1...Stress.scaled(300) {
      pair.writeAsync(i) { pair, i in
        pair.a = i
        pair.b = i
      }
      let seen = TSanVisibleMutex(Pair())
      let done = DispatchSemaphore(value: 0)
      DispatchQueue.global().async {
        seen.withLock { $0 = pair.read { $0 } }
        done.signal()
      }
      done.wait()
      if seen.withLock({ $0.a != i || $0.b != i }) { stale += 1 }
    }
    #expect(stale == 0)
  }

  @Test func argumentWritesFromManyThreadsLoseNothing() {
    let counter = Isolated(0)
    let perThread = Stress.scaled(2_000)
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
      for _ in 0..<perThread { counter.writeAsync(thread + 1) { total, step in total += step } }
    }
    #expect(counter.read { $0 } == (1 + 2 + 3 + 4) * perThread)
  }
}
