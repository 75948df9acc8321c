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
///
/// The elements live in a buffer of their own (a `ManagedBuffer`) whose free slots are uninitialized memory: growing,
/// emptying or dropping a ring touches only its live elements. Its first version kept `Optional` slots in an array,
/// and every free slot was destroyed through the element type's value witnesses (about 35 instructions a slot under
/// callgrind) each time the array grew or went away: for a queue's ready ring that a burst had doubled to 32,768
/// slots, 57 instructions per item of a 20,000-item burst, under the engine's lock. A ring that a burst grew beyond
/// ``keptCapacity`` gives its buffer back when it empties. Copies share the buffer until one of them changes (copy on
/// write).
@usableFromInline
struct RingBuffer<Element> {
  /// Nil until the first element (and again after a large ring emptied).
  @usableFromInline var buffer: RingBufferStorage<Element>?

  @inlinable
  init() {}

  /// The number of elements.
  @inlinable
  var count: Int { buffer?.state.count ?? 0 }

  @inlinable
  var isEmpty: Bool { count == 0 }

  @inlinable
  mutating func append(_ element: consuming Element) {
    let storage = uniqueStorageWithRoom()
    var element = Optional(consume element)
    storage.withUnsafeMutablePointers { header, elements in
      var index = header.pointee.head + header.pointee.count
      if index >= header.pointee.capacity { index -= header.pointee.capacity }
      (elements + index).initialize(to: element.take().unsafelyUnwrapped)
      header.pointee.count += 1
    }
  }

  @inlinable
  mutating func popFirst() -> Element? {
    guard count > 0 else { return nil }
    let storage = uniqueStorage()
    let (element, emptied) = storage.withUnsafeMutablePointers { header, elements in
      let element = (elements + header.pointee.head).move()
      header.pointee.head += 1
      if header.pointee.head == header.pointee.capacity { header.pointee.head = 0 }
      header.pointee.count -= 1
      return (element, header.pointee.count == 0)
    }
    if emptied { didEmpty() }
    return element
  }

  /// Inserts `element` before the first element.
  mutating func prepend(_ element: Element) {
    let storage = uniqueStorageWithRoom()
    storage.withUnsafeMutablePointers { header, elements in
      header.pointee.head = header.pointee.head == 0 ? header.pointee.capacity - 1 : header.pointee.head - 1
      (elements + header.pointee.head).initialize(to: element)
      header.pointee.count += 1
    }
  }

  mutating func popLast() -> Element? {
    guard count > 0 else { return nil }
    let storage = uniqueStorage()
    let (element, emptied) = storage.withUnsafeMutablePointers { header, elements in
      let index = header.pointee.physicalIndex(header.pointee.count - 1)
      let element = (elements + index).move()
      header.pointee.count -= 1
      return (element, header.pointee.count == 0)
    }
    if emptied { didEmpty() }
    return element
  }

  /// The element `offset` places after the first one; `offset` must be in `0..<count`.
  subscript(offset offset: Int) -> Element {
    get {
      precondition(offset >= 0 && offset < count, "RingBuffer offset \(offset) out of 0..<\(count)")
      return buffer.unsafelyUnwrapped.withUnsafeMutablePointers { header, elements in
        elements[header.pointee.physicalIndex(offset)]
      }
    }
    set {
      precondition(offset >= 0 && offset < count, "RingBuffer offset \(offset) out of 0..<\(count)")
      uniqueStorage().withUnsafeMutablePointers { header, elements in
        elements[header.pointee.physicalIndex(offset)] = newValue
      }
    }
  }

  /// The first element, or nil when empty.
  var first: Element? { count > 0 ? self[offset: 0] : nil }

  /// The last element, or nil when empty.
  var last: Element? { count > 0 ? self[offset: count - 1] : nil }

  /// Removes every element and keeps the storage for reuse.
  @inlinable
  mutating func removeAllKeepingCapacity() {
    guard count > 0 else { return }
    guard isKnownUniquelyReferenced(&buffer) else {
      // Shared: a fresh buffer of the same size, rather than a copy of elements only to destroy them.
      buffer = RingBufferStorage.make(capacity: buffer.unsafelyUnwrapped.state.capacity)
      return
    }
    buffer.unsafelyUnwrapped.withUnsafeMutablePointers { header, elements in
      header.pointee.deinitializeElements(elements)
      header.pointee.head = 0
    }
  }

  /// Removes and returns every element, oldest first, and gives back the storage.
  mutating func removeAll() -> [Element] {
    var all: [Element] = []
    all.reserveCapacity(count)
    while let element = popFirst() { all.append(element) }
    buffer = nil
    return all
  }

  /// The most slots an empty ring keeps: a larger one (grown by a burst) gives its buffer back when it empties, so a
  /// queue that once held 100,000 ready items does not keep a megabyte for the rest of its life, while one that keeps
  /// emptying and refilling below 4,096 items (32 KB of references) never allocates again.
  @inlinable
  static var keptCapacity: Int { 4_096 }

  /// The ring's last element left: a large buffer is given back.
  @inlinable
  mutating func didEmpty() {
    if let buffer, buffer.state.capacity > Self.keptCapacity { self.buffer = nil }
  }

  /// The buffer, made unique (copied if another ring shares it); the ring must not be empty.
  @inlinable
  mutating func uniqueStorage() -> RingBufferStorage<Element> {
    if !isKnownUniquelyReferenced(&buffer) { reallocate(capacity: buffer.unsafelyUnwrapped.state.capacity) }
    return buffer.unsafelyUnwrapped
  }

  /// The buffer, unique and with a free slot (grown, or made, when needed).
  @inlinable
  mutating func uniqueStorageWithRoom() -> RingBufferStorage<Element> {
    // Uniqueness first: a binding of the buffer made before the check would be a second reference.
    let unique = isKnownUniquelyReferenced(&buffer)
    let (count, capacity) = buffer.map { ($0.state.count, $0.state.capacity) } ?? (0, 0)
    if !unique || count == capacity {
      reallocate(capacity: count == capacity ? Swift.max(16, capacity * 2) : capacity)
    }
    return buffer.unsafelyUnwrapped
  }

  /// Moves (if the buffer is unique) or copies the elements, oldest first, into a new buffer of `capacity` slots.
  @usableFromInline
  mutating func reallocate(capacity: Int) {
    let new = RingBufferStorage<Element>.make(capacity: capacity)
    // Uniqueness first: the binding below is a second reference.
    let unique = isKnownUniquelyReferenced(&buffer)
    guard let old = buffer else {
      buffer = new
      return
    }
    old.withUnsafeMutablePointers { oldHeader, source in
      new.withUnsafeMutablePointers { newHeader, target in
        let live = oldHeader.pointee.count
        let head = oldHeader.pointee.head
        let first = Swift.min(live, oldHeader.pointee.capacity - head)
        if unique {
          // Moved: memory copies, no retain or release; the old buffer is left with nothing to destroy.
          target.moveInitialize(from: source + head, count: first)
          (target + first).moveInitialize(from: source, count: live - first)
          oldHeader.pointee.count = 0
        } else {
          target.initialize(from: source + head, count: first)
          (target + first).initialize(from: source, count: live - first)
        }
        newHeader.pointee.count = live
      }
    }
    buffer = new
  }
}

/// Where a ring's elements start, how many there are, and how many fit.
@usableFromInline
struct RingBufferHeader {
  @usableFromInline var head = 0
  @usableFromInline var count = 0
  @usableFromInline let capacity: Int

  @inlinable
  init(capacity: Int) { self.capacity = capacity }

  /// The slot of the element `offset` places after the first.
  @inlinable
  func physicalIndex(_ offset: Int) -> Int {
    let index = head + offset
    return index >= capacity ? index - capacity : index
  }

  /// Destroys the live elements (the slots become free) and empties the ring.
  @inlinable
  mutating func deinitializeElements<Element>(_ elements: UnsafeMutablePointer<Element>) {
    let first = Swift.min(count, capacity - head)
    (elements + head).deinitialize(count: first)
    elements.deinitialize(count: count - first)
    count = 0
  }
}

/// A ring's elements: the live ones from `head`, wrapping around; the other slots are uninitialized.
@usableFromInline
final class RingBufferStorage<Element>: ManagedBuffer<RingBufferHeader, Element> {
  /// A buffer of `capacity` free slots.
  @inlinable
  static func make(capacity: Int) -> RingBufferStorage<Element> {
    let buffer = create(minimumCapacity: capacity) { _ in RingBufferHeader(capacity: capacity) }
    return unsafeDowncast(buffer, to: RingBufferStorage<Element>.self)
  }

  /// The header, read through its pointer: `header` itself is a class's stored property, and each access to it went
  /// through the runtime's exclusivity checks (about 115 instructions per item of a burst, under callgrind).
  @inlinable
  var state: RingBufferHeader { withUnsafeMutablePointerToHeader { $0.pointee } }

  deinit {
    withUnsafeMutablePointers { header, elements in header.pointee.deinitializeElements(elements) }
  }
}

// A ring of sendable elements is sendable, as an array is.
// @unchecked Sendable: as `Array`; the buffer is shared only between copies of one ring, and a copy changes it only
// once it holds the only reference (copy on write).
extension RingBuffer: @unchecked Sendable where Element: Sendable {}
