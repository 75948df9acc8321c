/// A growable first-in, first-out ring buffer: O(1) amortised `append`, `popFirst`, `prepend` and `popLast`.
///
/// The package's one FIFO: the scheduler keeps one per priority, ``BlockingExecutor`` one of jobs, the bounded task
/// groups one of finished results. Not thread-safe; each owner keeps it inside its own lock or a non-`Sendable`
/// value. Waiters that can leave the line (cancellation) use ``TicketedRingBuffer``, which wraps this type, so the
/// plain path pays nothing for removal.
///
/// ```swift
/// var jobs = RingBuffer<Int>()
/// jobs.append(1)
/// jobs.append(2)
/// jobs.prepend(0)
/// jobs.popFirst()  // 0
/// ```
///
/// `@usableFromInline`, with its common operations `@inlinable`: the bounded task groups and `concurrentMap` are
/// inlined into the client so that they are specialised for the client's result type (unspecialised, they cost
/// 1.2–1.7× a plain task group per child in `spindle bench isolation`); they hold their finished results here.
@usableFromInline
struct RingBuffer<Element> {
  @usableFromInline var storage: ContiguousArray<Element?> = []
  @usableFromInline var head = 0
  /// The number of elements (set only by the buffer's own methods).
  @usableFromInline var count = 0

  @inlinable
  init() {}

  @inlinable
  var isEmpty: Bool { count == 0 }

  @inlinable
  mutating func append(_ element: consuming Element) {
    if count == storage.count { grow() }
    var index = head + count
    if index >= storage.count { index -= storage.count }
    // Moved in: a borrowed element was retained here for the store and released by the caller.
    storage[index] = consume element
    count += 1
  }

  @inlinable
  mutating func popFirst() -> Element? {
    guard count > 0 else { return nil }
    let element = storage[head].take()
    head += 1
    if head == storage.count { head = 0 }
    count -= 1
    return element
  }

  /// Inserts `element` before the first element.
  mutating func prepend(_ element: Element) {
    if count == storage.count { grow() }
    head = head == 0 ? storage.count - 1 : head - 1
    storage[head] = element
    count += 1
  }

  mutating func popLast() -> Element? {
    guard count > 0 else { return nil }
    var index = head + count - 1
    if index >= storage.count { index -= storage.count }
    let element = storage[index].take()
    count -= 1
    return element
  }

  /// The element `offset` places after the first one; `offset` must be in `0..<count`.
  subscript(offset offset: Int) -> Element {
    get {
      precondition(offset >= 0 && offset < count, "RingBuffer offset \(offset) out of 0..<\(count)")
      return storage[physicalIndex(offset)]!
    }
    set {
      precondition(offset >= 0 && offset < count, "RingBuffer offset \(offset) out of 0..<\(count)")
      storage[physicalIndex(offset)] = newValue
    }
  }

  /// The first element, or nil when empty.
  var first: Element? { count > 0 ? storage[head] : nil }

  /// The last element, or nil when empty.
  var last: Element? { count > 0 ? storage[physicalIndex(count - 1)] : nil }

  /// Removes every element and keeps the storage for reuse.
  @inlinable
  mutating func removeAllKeepingCapacity() {
    while count > 0 {
      storage[head] = nil
      head += 1
      if head == storage.count { head = 0 }
      count -= 1
    }
    head = 0
  }

  @inline(__always)
  private func physicalIndex(_ offset: Int) -> Int {
    let index = head + offset
    return index >= storage.count ? index - storage.count : index
  }

  /// Removes and returns every element, oldest first, and gives back the storage.
  mutating func removeAll() -> [Element] {
    var all: [Element] = []
    all.reserveCapacity(count)
    while let element = popFirst() { all.append(element) }
    storage = []
    head = 0
    return all
  }

  @usableFromInline
  mutating func grow() {
    let capacity = Swift.max(16, storage.count * 2)
    let live = count
    // The elements are moved (memory copies, no retain or release), oldest first, into a new array whose other
    // slots are set to nil in one pass; moved-from slots get nil again, so the old array destroys nothing twice.
    // Element by element through `append`, as before, this was 2-3 % of a worker's samples on a queue whose
    // adding thread ran far ahead (its ready ring doubling from 16 to 100,000 slots).
    let grown = storage.withUnsafeMutableBufferPointer { old in
      ContiguousArray<Element?>(unsafeUninitializedCapacity: capacity) { new, initialized in
        let target = new.baseAddress!
        if live > 0 {
          let source = old.baseAddress!
          let first = Swift.min(live, old.count - head)
          target.moveInitialize(from: source + head, count: first)
          (source + head).initialize(repeating: nil, count: first)
          if live > first {
            (target + first).moveInitialize(from: source, count: live - first)
            source.initialize(repeating: nil, count: live - first)
          }
        }
        (target + live).initialize(repeating: nil, count: capacity - live)
        initialized = capacity
      }
    }
    storage = grown
    head = 0
  }
}

extension RingBuffer: Sendable where Element: Sendable {}
