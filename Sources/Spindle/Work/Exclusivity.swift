/// The exclusivity keys of running work, process-wide: work tagged with a key (`add(exclusive:)`) runs only
/// while no other work with that key runs, on any queue.
///
/// Work that finds its key taken goes back to pending and joins the key's line, holding no slot and no thread;
/// when the holder completes, the first in line gets the key and becomes ready. So exclusivity never
/// deadlocks with width 1, barriers or dependencies: a waiting item takes nothing from anyone.
final class ExclusivityRegistry: Sendable {
  private struct Key {
    var holder: AnyWork
    var line = RingBuffer<AnyWork>()
  }

  static let shared = ExclusivityRegistry()

  private let keys = Locked<[String: Key]>([:])

  /// Takes `key` for `item`, or puts `item` in line for it; `true` when `item` holds the key now.
  func acquire(_ key: String, for item: AnyWork) -> Bool {
    keys.withLock { keys in
      guard var entry = keys[key] else {
        keys[key] = Key(holder: item)
        return true
      }
      if entry.holder === item { return true }
      entry.line.append(item)
      keys[key] = entry
      return false
    }
  }

  /// Whether `item` holds `key`.
  func isHeld(_ key: String, by item: AnyWork) -> Bool {
    keys.withLock { $0[key]?.holder === item }
  }

  /// `item` completed: gives its key to the next in line (made ready), or leaves the line if it was in it.
  func release(_ key: String, by item: AnyWork) {
    let next: AnyWork? = keys.withLock { keys in
      guard var entry = keys[key] else { return nil }
      guard entry.holder === item else {
        // A waiter that ended (cancelled) leaves the line.
        let remaining = entry.line.removeAll().filter { $0 !== item }
        for waiter in remaining { entry.line.append(waiter) }
        keys[key] = entry
        return nil
      }
      guard let next = entry.line.popFirst() else {
        keys[key] = nil
        return nil
      }
      entry.holder = next
      keys[key] = entry
      return next
    }
    if let next, let engine = next.dependencyResolved() { engine.makeReady(next) }
  }
}
