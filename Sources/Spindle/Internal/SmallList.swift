/// A list that stores its first element inline, so the common case (zero or one element) never allocates.
///
/// The overflow array is `nil` until a second element arrives: an empty list holds no reference at all, so copying
/// or destroying one (several times per work item on the engine's hot path) retains and releases nothing.
struct SmallList<Element> {
  private(set) var first: Element?
  private(set) var rest: [Element]?

  init() {}

  var isEmpty: Bool { first == nil }

  /// Appends `element`, which moves into the list (a caller that passes its last use gives up its reference
  /// instead of the list retaining a copy).
  mutating func append(_ element: consuming Element) {
    if first == nil {
      first = consume element
    } else if rest == nil {
      rest = [consume element]
    } else {
      rest!.append(consume element)
    }
  }

  /// Moves the first element out of the list (the rest move up, in order); `nil` when the list is empty.
  ///
  /// The list then holds no reference to the element: the caller's is the only one it had. Linear in the length of
  /// the list: to empty a list that may be long, use ``removeAll(_:)``.
  mutating func popFirst() -> Element? {
    guard let element = first.take() else { return nil }
    if var rest = rest.take() {
      first = rest.removeFirst()
      if !rest.isEmpty { self.rest = rest }
    }
    return element
  }

  /// Empties the list, handing each element in order to `body`: the first one moves out (no retain or release), the
  /// others are passed from the overflow array, which is then released.
  mutating func removeAll(_ body: (consuming Element) throws -> Void) rethrows {
    guard let first = first.take() else { return }
    let rest = rest.take()
    try body(consume first)
    guard let rest else { return }
    for element in rest { try body(element) }
  }

  /// Calls `body` with each element in order, without copying the list.
  @inline(__always)
  func forEachElement(_ body: (Element) throws -> Void) rethrows {
    guard let first else { return }
    try body(first)
    guard let rest else { return }
    for element in rest { try body(element) }
  }
}

extension SmallList: Sequence {
  struct Iterator: IteratorProtocol {
    let list: SmallList
    var index = -1

    mutating func next() -> Element? {
      defer { index += 1 }
      if index < 0 { return list.first }
      guard let rest = list.rest else { return nil }
      return index < rest.count ? rest[index] : nil
    }
  }

  // Consuming: a list iterated as its last use can be moved into the iterator instead of copied.
  __consuming func makeIterator() -> Iterator { Iterator(list: self) }
}

extension SmallList: Sendable where Element: Sendable {}
