/// A list that stores one element inline, so the common case (zero or one element) never allocates.
///
/// An empty list holds no reference at all, and says so in its enum tag: destroying one (several times per work item
/// on the engine's hot path: each item's dependents, handlers and cancellation handlers, each retirement's lists) is
/// a test of the tag, no call. The list used to be an optional first element and an optional overflow array, whose
/// destruction was two release calls on nil, about 16 per chained item on its worker, under callgrind.
struct SmallList<Element> {
  fileprivate enum Storage {
    case empty
    case one(Element)
    /// Two or more elements, in order.
    case many([Element])
  }

  fileprivate var storage = Storage.empty

  init() {}

  var isEmpty: Bool {
    if case .empty = storage { return true }
    return false
  }

  /// Moves the storage out, leaving the list empty: the caller's `switch` over it then binds the elements by moving
  /// them, and an array taken out is uniquely referenced (appending to it does not copy it).
  @inline(__always)
  private mutating func takeStorage() -> Storage {
    var taken = Storage.empty
    swap(&taken, &storage)
    return taken
  }

  /// Appends `element`, which moves into the list (a caller that passes its last use gives up its reference
  /// instead of the list retaining a copy).
  ///
  /// The first element (the common case: an item's one dependent, a retirement's one ready dependent) is stored
  /// inline, in the caller; the others go through ``appendMore(_:)``. As a call, every append to an empty list was
  /// about 20 instructions under callgrind, most of them the call.
  @inline(__always)
  mutating func append(_ element: consuming Element) {
    if case .empty = storage {
      storage = .one(consume element)
      return
    }
    appendMore(element)
  }

  /// ``append(_:)`` to a list that is not empty.
  @inline(never)
  private mutating func appendMore(_ element: consuming Element) {
    let taken = takeStorage()
    switch consume taken {
    case .empty:
      storage = .one(consume element)
    case .one(let first):
      storage = .many([consume first, consume element])
    case .many(var elements):
      elements.append(element)
      storage = .many(elements)
    }
  }

  /// Moves the first element out of the list (the rest move up, in order); `nil` when the list is empty.
  ///
  /// The list then holds no reference to the element: the caller's is the only one it had. Linear in the length of
  /// the list: to empty a list that may be long, use ``removeAll(_:)``.
  mutating func popFirst() -> Element? {
    let taken = takeStorage()
    switch consume taken {
    case .empty:
      return nil
    case .one(let element):
      return consume element
    case .many(var elements):
      let element = elements.removeFirst()
      storage = elements.count == 1 ? .one(elements.removeLast()) : .many(elements)
      return element
    }
  }

  /// Moves the element out of a list of exactly one, leaving it empty; `nil` (and the list unchanged) otherwise.
  @inline(__always)
  mutating func popOnly() -> Element? {
    guard case .one = storage else { return nil }
    // Inline, not through `popFirst` (a call of about 20 instructions, on every item of a chain).
    let taken = takeStorage()
    switch consume taken {
    case .one(let element): return consume element
    case .empty: return nil
    case .many(let elements):
      storage = .many(consume elements)
      return nil
    }
  }

  /// Empties the list, handing each element in order to `body`: a lone element moves out (no retain or release), the
  /// elements of a longer list are passed from its array, which is then released.
  ///
  /// Inline: the caller's list is then known to be empty afterwards, so that its end is no destroy call.
  @inline(__always)
  mutating func removeAll(_ body: (consuming Element) throws -> Void) rethrows {
    let taken = takeStorage()
    switch consume taken {
    case .empty:
      return
    case .one(let element):
      try body(consume element)
    case .many(let elements):
      for element in elements { try body(element) }
    }
  }

  /// Calls `body` with each element in order, without copying the list.
  @inline(__always)
  func forEachElement(_ body: (Element) throws -> Void) rethrows {
    switch storage {
    case .empty:
      return
    case .one(let element):
      try body(element)
    case .many(let elements):
      for element in elements { try body(element) }
    }
  }
}

extension SmallList: Sequence {
  struct Iterator: IteratorProtocol {
    let list: SmallList
    var index = 0

    mutating func next() -> Element? {
      defer { index += 1 }
      switch list.storage {
      case .empty:
        return nil
      case .one(let element):
        return index == 0 ? element : nil
      case .many(let elements):
        return index < elements.count ? elements[index] : nil
      }
    }
  }

  // Consuming: a list iterated as its last use can be moved into the iterator instead of copied.
  __consuming func makeIterator() -> Iterator { Iterator(list: self) }
}

extension SmallList: Sendable where Element: Sendable {}
extension SmallList.Storage: Sendable where Element: Sendable {}
