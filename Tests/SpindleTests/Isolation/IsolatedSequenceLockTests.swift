import Dispatch
import Foundation
import SpindleTestSupport
import Synchronization
import Testing

@testable import Spindle

/// 64 bytes, the largest value read through the sequence lock: a read is torn unless all words agree.
private struct EightWords: Sendable {
  var w0: UInt = 0, w1: UInt = 0, w2: UInt = 0, w3: UInt = 0
  var w4: UInt = 0, w5: UInt = 0, w6: UInt = 0, w7: UInt = 0

  init(stamp: UInt = 0) {
    (w0, w1, w2, w3, w4, w5, w6, w7) = (stamp, stamp, stamp, stamp, stamp, stamp, stamp, stamp)
  }

  var isConsistent: Bool { [w1, w2, w3, w4, w5, w6, w7].allSatisfy { $0 == w0 } }
}

/// 72 bytes: too big for the sequence lock, so it is read under the mutex.
private struct NineWords: Sendable {
  var words = EightWords()
  var extra: UInt = 0
}

/// 7 bytes, a partly filled word: the published copy must not read or write past the value.
private struct Packed: Sendable {
  var a: UInt32 = 0
  var b: UInt16 = 0
  var c: UInt8 = 0

  init(stamp: UInt32 = 0) {
    a = stamp
    b = UInt16(truncatingIfNeeded: stamp)
    c = UInt8(truncatingIfNeeded: stamp)
  }

  var isConsistent: Bool { b == UInt16(truncatingIfNeeded: a) && c == UInt8(truncatingIfNeeded: a) }
}

/// Holds a reference (a string), so it is read under the mutex.
private struct Named: Sendable {
  var name = ""
  var a = 0
  var b = 0
}

/// Runs `body(0)`…`body(count - 1)` on `count` threads of their own that start together; returns when all end.
private func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
  let finished = DispatchSemaphore(value: 0)
  let gate = StartLine()
  for index in 0..<count {
    Thread.detachNewThread {
      gate.arrive(expecting: count)
      body(index)
      finished.signal()
    }
  }
  var ended = 0
  for _ in 0..<count where finished.wait(timeout: .now() + .seconds(60)) == .success { ended += 1 }
  return ended == count
}

/// Holds threads until `count` have arrived, so they really overlap.
private final class StartLine: Sendable {
  private let arrived = Atomic<Int>(0)

  func arrive(expecting count: Int) {
    arrived.add(1, ordering: .acquiringAndReleasing)
    while arrived.load(ordering: .acquiring) < count { sched_yield() }
  }
}

/// Burns a little time inside a critical section, so that a broken lock would let others in.
@inline(never)
private func spin(_ n: Int) -> Int {
  var x = n
  for i in 0..<40 { x = x &* 31 &+ i }
  return x
}

@Suite(.offThePool) struct IsolatedSequenceLockTests {
  @Test func readsOfSmallPlainValuesTakeTheSequenceLockOthersTheMutex() {
    #expect(Isolated<Int>.usesSequenceLock)
    #expect(Isolated<Bool>.usesSequenceLock)
    #expect(Isolated<EightWords>.usesSequenceLock)
    #expect(Isolated<Packed>.usesSequenceLock)
    #expect(!Isolated<NineWords>.usesSequenceLock)
    #expect(!Isolated<String>.usesSequenceLock)
    #expect(!Isolated<[Int]>.usesSequenceLock)
    #expect(!Isolated<Named>.usesSequenceLock)
    // The public behaviour is the same either way.
    let wide = Isolated(NineWords())
    wide.write { $0.extra = 3 }
    #expect(wide.read(\.extra) == 3)
    let small = Isolated(Packed(stamp: 7))
    small.write { $0 = Packed(stamp: 0x0102_0304) }
    #expect(small.read { $0.isConsistent && $0.a == 0x0102_0304 })
  }

  /// Many readers against two writers (one through `writeAsync`) on a 64-byte value: every read sees all
  /// eight words equal, readers see writes progress, and the last write wins.
  @Test func sequenceLockedReadsNeverTear() {
    let state = Isolated(EightWords())
    let writes = UInt(Stress.scaled(20_000))
    let writersDone = Atomic<Int>(0)
    let torn = Counter()
    let reads = Counter()
    let distinct = Counter()
    let ended = onThreads(8) { index in
      if index < 2 {
        for i in 1...writes {
          let stamp = i * 2 + UInt(index)  // writer 0 even stamps, writer 1 odd
          if index == 0 || i % 2 == 0 {
            state.write { $0 = EightWords(stamp: stamp) }
          } else {
            state.writeAsync { $0 = EightWords(stamp: stamp) }
          }
        }
        writersDone.add(1, ordering: .releasing)
        return
      }
      var count = 0
      var changes = 0
      var last: UInt = .max
      while writersDone.load(ordering: .acquiring) < 2 {
        let (consistent, stamp) = state.read { ($0.isConsistent, $0.w0) }
        if !consistent { torn.add(1) }
        if stamp != last { changes += 1 }
        last = stamp
        count += 1
      }
      reads.add(count)
      distinct.add(changes)
    }
    #expect(ended)
    #expect(torn.value == 0)
    #expect(reads.value > 0)
    #expect(distinct.value > 1, "readers saw the writes progress")
    let final = state.read { $0 }
    #expect(final.isConsistent)
    #expect(final.w0 == writes * 2 || final.w0 == writes * 2 + 1, "one of the two last writes")
  }

  /// A value of 7 bytes (one partly used word) keeps its bytes through many publishes and torn-read checks.
  @Test func partlyFilledWordsPublishExactly() {
    let state = Isolated(Packed())
    let writes = UInt32(Stress.scaled(20_000))
    let stop = Atomic<Bool>(false)
    let torn = Counter()
    let ended = onThreads(6) { index in
      if index == 0 {
        for i in 1...writes { state.write { $0 = Packed(stamp: i &* 2_654_435_761) } }
        stop.store(true, ordering: .releasing)
        return
      }
      while !stop.load(ordering: .acquiring) {
        if !state.read({ $0.isConsistent }) { torn.add(1) }
      }
    }
    #expect(ended)
    #expect(torn.value == 0)
    #expect(state.read(\.a) == writes &* 2_654_435_761)
  }

  /// A sequence-locked value lives in its published words once written: the paths under the mutex (a read or write
  /// that applies queued `writeAsync` closures first, the throwing forms) start from the latest published value,
  /// and what they change is published. The writes are queued by holding the mutex in another thread's `write`
  /// while `writeAsync` is called; the background drain never runs.
  @Test func theMutexPathsOfASequenceLockedValueSeeTheLatestWrite() throws {
    let stalled = DispatchQueue(label: "spindle.test.stalled-drain")
    stalled.suspend()
    defer { stalled.resume() }
    let state = Isolated(EightWords(stamp: 1), drainingOn: stalled)
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let writerDone = DispatchSemaphore(value: 0)
    /// Queues `change` behind a `write` that holds the mutex (so `writeAsync` cannot apply it at once).
    func queue(_ change: @escaping @Sendable (inout EightWords) -> Void) {
      DispatchQueue.global().async {
        state.write { value in
          value = EightWords(stamp: value.w0 * 10)
          inside.signal()
          release.wait()
        }
        writerDone.signal()
      }
      inside.wait()
      state.writeAsync(change)
      release.signal()
      #expect(writerDone.wait(timeout: .now() + 20) == .success)
    }

    // A read that applies a queued write: 1 × 10 by the holder, then + 1 queued.
    queue { $0 = EightWords(stamp: $0.w0 + 1) }
    #expect(state.read { $0.isConsistent ? $0.w0 : 0 } == 11)
    #expect(state.read(\.w7) == 11)
    // A write that applies a queued write first: 11 × 10, + 2 queued, then × 3.
    queue { $0 = EightWords(stamp: $0.w0 + 2) }
    #expect(
      state.write { value -> UInt in
        value = EightWords(stamp: value.w0 * 3)
        return value.w0
      } == 336)
    // The throwing read, with a queued write: 336 × 10 + 4.
    queue { $0 = EightWords(stamp: $0.w0 + 4) }
    struct Refused: Error {}
    let thrown: UInt = try state.read { (value: borrowing EightWords) throws(Refused) -> UInt in
      guard value.isConsistent else { throw Refused() }
      return value.w0
    }
    #expect(thrown == 3_364)
    // The throwing write keeps what it changed before it threw, and publishes it.
    #expect(throws: Refused.self) {
      try state.write { (value: inout EightWords) throws(Refused) in
        value = EightWords(stamp: value.w0 + 1)
        throw Refused()
      }
    }
    #expect(state.read { $0.isConsistent ? $0.w0 : 0 } == 3_365)
    // The argument form with the mutex free: applied at once, from the latest value.
    state.writeAsync(UInt(5)) { value, amount in value = EightWords(stamp: value.w0 + amount) }
    #expect(state.read(\.w3) == 3_370)
  }

  /// Writers never overlap each other, on either read path; readers under the mutex never overlap a write;
  /// nothing is lost.
  @Test func atMostOneWriterAndNoReaderInsideAWrite() {
    let named = Isolated(Named())
    let small = Isolated(EightWords())
    let namedWriters = Atomic<Int>(0)
    let smallWriters = Atomic<Int>(0)
    let writerOverlaps = Counter()
    let readerOverlaps = Counter()
    let perThread = Stress.scaled(5_000)
    let ended = onThreads(8) { index in
      for i in 0..<perThread {
        switch (index + i) % 4 {
        case 0:
          named.write { value in
            if namedWriters.add(1, ordering: .acquiringAndReleasing).newValue != 1 { writerOverlaps.add(1) }
            value.a += 1
            value.b = spin(value.a) == 0 ? -1 : value.a
            namedWriters.subtract(1, ordering: .acquiringAndReleasing)
          }
        case 1:
          small.write { value in
            if smallWriters.add(1, ordering: .acquiringAndReleasing).newValue != 1 { writerOverlaps.add(1) }
            value = EightWords(stamp: value.w0 + UInt(spin(i) == 0 ? 2 : 1))
            smallWriters.subtract(1, ordering: .acquiringAndReleasing)
          }
        case 2:
          named.writeAsync { value in
            if namedWriters.add(1, ordering: .acquiringAndReleasing).newValue != 1 { writerOverlaps.add(1) }
            value.a += 1
            value.b = value.a
            namedWriters.subtract(1, ordering: .acquiringAndReleasing)
          }
        default:
          let overlapped = named.read { value in
            namedWriters.load(ordering: .acquiring) != 0 || value.a != value.b
          }
          if overlapped { readerOverlaps.add(1) }
        }
      }
    }
    #expect(ended)
    #expect(writerOverlaps.value == 0)
    #expect(readerOverlaps.value == 0)
    // Every thread wrote each kind perThread / 4 times (the switch cycles through all four).
    #expect(named.read(\.a) == 8 * 2 * (perThread / 4))
    #expect(small.read(\.w0) == UInt(8 * (perThread / 4)))
    #expect(small.read { $0.isConsistent })
  }
}
