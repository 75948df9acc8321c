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

  /// What ``acquire(_:for:)`` did.
  enum Acquisition {
    /// `item` holds the key now.
    case acquired
    /// `item` is in the key's line: it becomes ready when the key comes to it.
    case waiting
    /// `item` has ended (it was cancelled on its way here): it got neither the key nor a place in line.
    case ended
  }

  /// Takes `key` for `item`, or puts `item` in line for it, unless `item` has ended.
  ///
  /// Never for ended work: a cancel can end an item between its worker's decision to ask for the key and this call,
  /// and the item's retirement then releases a key it neither holds nor waits for (nothing to do). Given the key or a
  /// place in line after that, ended work kept the key for ever (found by a review's stress test). The item's phase
  /// is read under this registry's lock, which its retirement's ``release(_:by:)`` also takes: ended before, it is
  /// turned away here; ended after, the release finds it holding the key or in line.
  func acquire(_ key: String, for item: AnyWork) -> Acquisition {
    keys.withLock { keys in
      // The item's lock inside the registry's: no path takes them the other way round.
      let ended: Bool = item.lock.withLock {
        guard !item.phase.isFinal else { return true }
        // Given the key below (free, or already this item's): marked under both locks, as `release` marks the next.
        if keys[key] == nil || keys[key]?.holder === item { item.extras?.holdsKey = true }
        return false
      }
      if ended { return .ended }
      guard var entry = keys[key] else {
        keys[key] = Key(holder: item)
        return .acquired
      }
      if entry.holder === item { return .acquired }
      entry.line.append(item)
      keys[key] = entry
      return .waiting
    }
  }

  /// Whether `item` holds `key`.
  func isHeld(_ key: String, by item: AnyWork) -> Bool {
    keys.withLock { $0[key]?.holder === item }
  }

  /// The work holding `key`, if any.
  func holder(of key: String) -> AnyWork? {
    keys.withLock { $0[key]?.holder }
  }

  /// The work in line for `key` while `item` holds it (none when it does not): it gets the key only once `item`
  /// completed.
  func line(of key: String, heldBy item: AnyWork) -> [AnyWork] {
    keys.withLock { keys in
      guard let entry = keys[key], entry.holder === item else { return [] }
      // A copy: emptying it copies the storage first, and the key's own line stays as it is.
      var line = entry.line
      return line.removeAll()
    }
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
      next.lock.withLock { next.extras?.holdsKey = true }
      return next
    }
    if let next, let engine = next.dependencyResolved() { engine.makeReady(next) }
  }
}
