/// A first-in, first-out queue whose elements can also leave from anywhere, by the ticket `append` returned.
///
/// For waiters that may give up their place (a cancelled task): ``AsyncSemaphore`` keeps its suspended tasks in one.
/// It wraps a ``RingBuffer`` of (ticket, element) entries in arrival order; a removed element leaves a hole that
/// `popFirst` skips, and holes at either end are dropped at once, so a line where every newcomer cancels stays
/// small. Costs: `append` and `popFirst` O(1) amortised, `remove(_:)` O(log n) (a binary search over the tickets,
/// which increase along the ring). Tickets are never reused, so removing with a stale ticket (its element already
/// popped or removed) finds nothing and returns nil. Not thread-safe: keep it inside a lock.
///
/// ```swift
/// var line = TicketedRingBuffer<String>()
/// let a = line.append("a")
/// _ = line.append("b")
/// line.remove(a)  // "a"
/// line.popFirst()  // "b"
/// ```
struct TicketedRingBuffer<Element> {
  /// Names one appended element until it is popped or removed.
  struct Ticket: Hashable, Comparable, Sendable {
    fileprivate let value: UInt64

    static func < (lhs: Ticket, rhs: Ticket) -> Bool { lhs.value < rhs.value }
  }

  fileprivate struct Entry {
    let ticket: UInt64
    var element: Element?
  }

  /// Entries in arrival order; the first and the last always hold an element (holes only in between).
  private var entries = RingBuffer<Entry>()
  private var nextTicket: UInt64 = 0

  /// The number of elements in the queue (holes not counted).
  private(set) var count = 0

  var isEmpty: Bool { count == 0 }

  /// Adds `element` at the end and returns its ticket.
  @discardableResult
  mutating func append(_ element: Element) -> Ticket {
    let ticket = nextTicket
    nextTicket += 1
    entries.append(Entry(ticket: ticket, element: element))
    count += 1
    return Ticket(value: ticket)
  }

  /// Removes and returns the oldest element, or nil when empty.
  mutating func popFirst() -> Element? {
    guard let entry = entries.popFirst() else { return nil }
    count -= 1
    dropHolesAtTheFront()
    return entry.element
  }

  /// The oldest element, or nil when empty.
  var first: Element? { entries.first?.element }

  /// Removes the element of `ticket` wherever it stands and returns it; nil if it already left the queue.
  @discardableResult
  mutating func remove(_ ticket: Ticket) -> Element? {
    guard let offset = offset(of: ticket.value), let element = entries[offset: offset].element else { return nil }
    count -= 1
    if offset == 0 {
      _ = entries.popFirst()
      dropHolesAtTheFront()
    } else if offset == entries.count - 1 {
      _ = entries.popLast()
      while let last = entries.last, last.element == nil { _ = entries.popLast() }
    } else {
      entries[offset: offset].element = nil
    }
    return element
  }

  /// Whether the element of `ticket` is still in the queue.
  func contains(_ ticket: Ticket) -> Bool {
    guard let offset = offset(of: ticket.value) else { return false }
    return entries[offset: offset].element != nil
  }

  /// Removes and returns every element, oldest first.
  mutating func removeAll() -> [Element] {
    var all: [Element] = []
    all.reserveCapacity(count)
    while let element = popFirst() { all.append(element) }
    return all
  }

  /// The number of slots in use, holes included (for tests: how much memory the line holds).
  var slotCountForTesting: Int { entries.count }

  private mutating func dropHolesAtTheFront() {
    while let first = entries.first, first.element == nil { _ = entries.popFirst() }
  }

  /// Binary search: tickets increase from the first entry to the last.
  private func offset(of ticket: UInt64) -> Int? {
    var low = 0
    var high = entries.count
    while low < high {
      let middle = (low + high) / 2
      let candidate = entries[offset: middle].ticket
      if candidate == ticket { return middle }
      if candidate < ticket { low = middle + 1 } else { high = middle }
    }
    return nil
  }
}

extension TicketedRingBuffer: Sendable where Element: Sendable {}
extension TicketedRingBuffer.Entry: Sendable where Element: Sendable {}
