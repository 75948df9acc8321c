import SpindleTestSupport
import Testing

@testable import Spindle

/// Serialized: the tests count live `Tracked` elements in one shared counter.
@Suite(.serialized) struct RingBufferTests {
  @Test func appendPrependAndPopKeepOrderAcrossGrowth() {
    var ring = RingBuffer<Int>()
    var model: [Int] = []
    // Wrap the head around several growths: pop some, prepend some, append many.
    for round in 0..<5 {
      for value in 0..<(20 * (round + 1)) {
        ring.append(value)
        model.append(value)
      }
      for _ in 0..<7 { #expect(ring.popFirst() == model.removeFirst()) }
      ring.prepend(-round)
      model.insert(-round, at: 0)
      #expect(ring.popLast() == model.removeLast())
      #expect(ring.count == model.count)
      #expect(ring.first == model.first)
      #expect(ring.last == model.last)
      for offset in [0, model.count / 2, model.count - 1] { #expect(ring[offset: offset] == model[offset]) }
    }
    #expect(ring.removeAll() == model)
    #expect(ring.isEmpty)
    #expect(ring.popFirst() == nil)
    #expect(ring.popLast() == nil)
  }

  /// Counts live instances, so that a test can tell an element released twice (or never) by a growth.
  final class Tracked: Sendable {
    static let live = TSanVisibleMutex<Int>(0)
    let value: Int
    init(_ value: Int) {
      self.value = value
      Self.live.withLock { $0 += 1 }
    }
    deinit { Self.live.withLock { $0 -= 1 } }
  }

  @Test func growthMovesEveryElementOnceWhereverTheHeadIs() {
    let before = Tracked.live.withLock { $0 }
    do {
      var ring = RingBuffer<Tracked>()
      var model: [Int] = []
      var next = 0
      // Grows with the head at 0, in the middle and at the last slot, and with the ring empty in between.
      for round in 0..<6 {
        for _ in 0..<(13 * (round + 1)) {
          ring.append(Tracked(next))
          model.append(next)
          next += 1
        }
        for _ in 0..<(round * 5) where !model.isEmpty { #expect(ring.popFirst()?.value == model.removeFirst()) }
        if round == 3 {
          while let element = ring.popFirst() { #expect(element.value == model.removeFirst()) }
        }
        ring.prepend(Tracked(-round - 1))
        model.insert(-round - 1, at: 0)
        #expect(ring.count == model.count)
        #expect(Tracked.live.withLock { $0 } - before == model.count, "round \(round): an element leaked or died")
      }
      #expect(ring.removeAll().map(\.value) == model)
    }
    #expect(Tracked.live.withLock { $0 } == before, "elements outlived their ring")
  }

  @Test func removeAllKeepingCapacityEmptiesAndStaysUsable() {
    var ring = RingBuffer<String>()
    for value in 0..<40 { ring.append("\(value)") }
    for _ in 0..<30 { _ = ring.popFirst() }
    for value in 40..<60 { ring.append("\(value)") }
    let copy = ring
    ring.removeAllKeepingCapacity()
    #expect(ring.isEmpty)
    #expect(copy.count == 30, "a copy keeps its elements")
    #expect(ring.buffer!.state.capacity == copy.buffer!.state.capacity, "the capacity is kept")
    ring.append("again")
    #expect(ring.popFirst() == "again")
    ring.append("once more")
    let buffer = ObjectIdentifier(ring.buffer!)
    ring.removeAllKeepingCapacity()
    #expect(ring.isEmpty)
    #expect(ObjectIdentifier(ring.buffer!) == buffer, "a ring that owns its buffer empties it in place")
  }

  /// A copy shares the buffer until one side changes: neither sees the other's changes, whichever changes first, with
  /// the head wrapped around, and every element is released once.
  @Test func copiesAreIndependentWhicheverChangesFirst() {
    let before = Tracked.live.withLock { $0 }
    do {
      var ring = RingBuffer<Tracked>()
      for value in 0..<20 { ring.append(Tracked(value)) }
      for _ in 0..<15 { _ = ring.popFirst() }
      for value in 20..<30 { ring.append(Tracked(value)) }  // wraps around the 32-slot buffer's end
      var copy = ring
      #expect(ring.popFirst()?.value == 15)
      copy.append(Tracked(99))
      #expect(ring.count == 14)
      #expect(copy.count == 16)
      #expect(copy.first?.value == 15)
      #expect(copy.last?.value == 99)
      #expect(ring.first?.value == 16)
      let third = copy
      copy[offset: 0] = Tracked(-1)
      #expect(third[offset: 0].value == 15, "a copy made before a subscript write keeps the old element")
      #expect(copy[offset: 0].value == -1)
      #expect(ring.removeAll().map(\.value) == Array(16..<30))
      #expect(third.count == 16)
    }
    #expect(Tracked.live.withLock { $0 } == before, "every element was released exactly once")
  }

  /// A ring that owns its buffer changes it in place: no new buffer while there is room (a uniqueness check that saw
  /// its own binding as a second owner once copied the whole ring at every append, which made a queue's bursts
  /// quadratic), and a copy's buffer is left alone.
  @Test func aRingWithRoomKeepsItsBuffer() {
    var ring = RingBuffer<Int>()
    ring.append(0)
    let buffer = ObjectIdentifier(ring.buffer!)
    for value in 1..<16 { ring.append(value) }
    #expect(ObjectIdentifier(ring.buffer!) == buffer, "appends with room keep the buffer")
    #expect(ring.popFirst() == 0)
    ring.prepend(-1)
    ring[offset: 1] = 100
    #expect(ObjectIdentifier(ring.buffer!) == buffer, "pops, prepends and writes keep the buffer")
    ring.append(16)
    #expect(ObjectIdentifier(ring.buffer!) != buffer, "a full ring grows into a new buffer")
    let grown = ObjectIdentifier(ring.buffer!)
    let copy = ring
    ring.append(17)
    #expect(ObjectIdentifier(ring.buffer!) != grown, "a shared buffer is copied before a change")
    #expect(ObjectIdentifier(copy.buffer!) == grown, "the copy keeps its buffer")
    #expect(copy.count == 17)
    #expect(ring.count == 18)
  }

  /// A burst that grew the ring past ``RingBuffer/keptCapacity`` gives the buffer back when the ring empties; a
  /// smaller ring keeps its buffer; either way the ring stays usable.
  @Test func aLargeRingGivesItsBufferBackWhenItEmpties() {
    var small = RingBuffer<Int>()
    for value in 0..<100 { small.append(value) }
    while small.popFirst() != nil {}
    #expect(small.buffer != nil, "a small ring keeps its buffer")
    var large = RingBuffer<Int>()
    let burst = RingBuffer<Int>.keptCapacity * 3
    for value in 0..<burst { large.append(value) }
    #expect(large.buffer!.state.capacity >= burst)
    for value in 0..<(burst - 1) { #expect(large.popFirst() == value) }
    #expect(large.buffer != nil, "not empty yet")
    #expect(large.popLast() == burst - 1)
    #expect(large.buffer == nil, "the emptied large ring gave its buffer back")
    large.append(7)
    #expect(large.popFirst() == 7)
  }

  /// Random operations against an array, on elements that count themselves.
  @Test(arguments: [UInt64(1), 2, 3])
  func randomOperationsMatchAnArray(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let before = Tracked.live.withLock { $0 }
    do {
      var ring = RingBuffer<Tracked>()
      var model: [Int] = []
      var saved: (RingBuffer<Tracked>, [Int])? = nil
      for step in 0..<20_000 {
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<45:
          ring.append(Tracked(step))
          model.append(step)
        case 45..<75: #expect(ring.popFirst()?.value == (model.isEmpty ? nil : model.removeFirst()))
        case 75..<85:
          ring.prepend(Tracked(-step))
          model.insert(-step, at: 0)
        case 85..<95: #expect(ring.popLast()?.value == model.popLast())
        case 95..<98: saved = (ring, model)  // a copy that must not change
        default:
          if let (copy, copyModel) = saved {
            #expect(copy.count == copyModel.count)
            if !copyModel.isEmpty {
              let offset = Int.random(in: 0..<copyModel.count, using: &random)
              #expect(copy[offset: offset].value == copyModel[offset])
            }
          }
        }
        #expect(ring.count == model.count)
      }
      #expect(ring.removeAll().map(\.value) == model)
      saved = nil
    }
    #expect(Tracked.live.withLock { $0 } == before, "elements leaked or died twice")
  }
}

/// Off the cooperative pool: the model-based test computes for seconds under ThreadSanitizer.
@Suite(.offThePool) struct TicketedRingBufferTests {
  @Test func removalByTicketLeavesTheRestInOrder() {
    var line = TicketedRingBuffer<Int>()
    let tickets = (0..<10).map { line.append($0) }
    #expect(line.remove(tickets[4]) == 4)
    #expect(line.remove(tickets[0]) == 0)
    #expect(line.remove(tickets[9]) == 9)
    #expect(line.count == 7)
    #expect(!line.contains(tickets[4]))
    #expect(line.contains(tickets[5]))
    #expect(line.removeAll() == [1, 2, 3, 5, 6, 7, 8])
  }

  @Test func staleTicketsFindNothing() {
    var line = TicketedRingBuffer<Int>()
    let first = line.append(1)
    let second = line.append(2)
    #expect(line.popFirst() == 1)
    #expect(line.remove(first) == nil, "already popped")
    #expect(line.remove(second) == 2)
    #expect(line.remove(second) == nil, "already removed")
    // Tickets are never reused: a new element does not answer to an old ticket.
    let third = line.append(3)
    #expect(third != second && third != first)
    #expect(line.remove(second) == nil)
    #expect(line.popFirst() == 3)
    #expect(line.popFirst() == nil)
  }

  @Test func holesAtEitherEndAreDroppedSoChurnDoesNotGrowTheLine() {
    var line = TicketedRingBuffer<Int>()
    let head = line.append(-1)
    // Every newcomer leaves again (a waiter that is cancelled) while the head stays.
    for value in 0..<10_000 {
      let ticket = line.append(value)
      #expect(line.remove(ticket) == value)
    }
    #expect(line.slotCountForTesting == 1)
    // Holes in the middle disappear once they reach the front.
    let middle = (0..<50).map { line.append($0) }
    for ticket in middle.dropLast() { line.remove(ticket) }
    #expect(line.count == 2)
    #expect(line.remove(head) == -1)
    #expect(line.slotCountForTesting == 1)
    #expect(line.first == 49)
  }

  @Test func matchesAModelUnderRandomOperations() {
    var line = TicketedRingBuffer<Int>()
    var model: [(ticket: TicketedRingBuffer<Int>.Ticket, value: Int)] = []
    var generator = SeededGenerator(seed: 42)
    for step in 0..<20_000 {
      switch generator.next() % 3 {
      case 0:
        model.append((line.append(step), step))
      case 1:
        let popped = line.popFirst()
        #expect(popped == (model.isEmpty ? nil : model.removeFirst().value))
      default:
        guard !model.isEmpty else { continue }
        let index = Int(generator.next() % UInt64(model.count))
        #expect(line.remove(model[index].ticket) == model[index].value)
        model.remove(at: index)
      }
      #expect(line.count == model.count)
    }
    #expect(line.removeAll() == model.map(\.value))
  }
}
