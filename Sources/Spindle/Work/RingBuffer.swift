/// A growable first-in, first-out ring buffer: O(1) amortised `append` and `popFirst`.
///
/// Not thread-safe; the scheduler keeps one per priority inside its lock.
struct RingBuffer<Element> {
  private var storage: ContiguousArray<Element?> = []
  private var head = 0
  private(set) var count = 0

  var isEmpty: Bool { count == 0 }

  mutating func append(_ element: Element) {
    if count == storage.count { grow() }
    var index = head + count
    if index >= storage.count { index -= storage.count }
    storage[index] = element
    count += 1
  }

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

  /// Removes and returns every element, oldest first, and gives back the storage.
  mutating func removeAll() -> [Element] {
    var all: [Element] = []
    all.reserveCapacity(count)
    while let element = popFirst() { all.append(element) }
    storage = []
    head = 0
    return all
  }

  private mutating func grow() {
    let capacity = Swift.max(16, storage.count * 2)
    var grown = ContiguousArray<Element?>()
    grown.reserveCapacity(capacity)
    for offset in 0..<count {
      var index = head + offset
      if index >= storage.count { index -= storage.count }
      grown.append(storage[index])
    }
    grown.append(contentsOf: repeatElement(nil, count: capacity - count))
    storage = grown
    head = 0
  }
}

/// A list that stores its first element inline, so the common case (zero or one element) never allocates.
struct SmallList<Element> {
  private(set) var first: Element?
  private(set) var rest: [Element] = []

  var isEmpty: Bool { first == nil }

  mutating func append(_ element: Element) {
    if first == nil {
      first = element
    } else {
      rest.append(element)
    }
  }

}

extension SmallList: Sequence {
  struct Iterator: IteratorProtocol {
    let list: SmallList
    var index = -1

    mutating func next() -> Element? {
      defer { index += 1 }
      if index < 0 { return list.first }
      return index < list.rest.count ? list.rest[index] : nil
    }
  }

  func makeIterator() -> Iterator { Iterator(list: self) }
}

extension RingBuffer: Sendable where Element: Sendable {}

extension SmallList: Sendable where Element: Sendable {}
