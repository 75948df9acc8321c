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

extension SmallList: Sendable where Element: Sendable {}
