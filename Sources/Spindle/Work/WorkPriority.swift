/// The priority of a work item among the ready items of its queue.
///
/// When a slot frees up, the queue starts the ready item with the highest priority; items of the same
/// priority start in the order they became ready (first in, first out). Priority orders ready work only:
/// it never preempts a running body and does not change the thread's quality of service.
public enum WorkPriority: Int, Sendable, Comparable, CaseIterable {
  /// Runs after every other ready item.
  case veryLow
  /// Runs after normal work.
  case low
  /// The default priority.
  case normal
  /// Runs before normal work.
  case high
  /// Runs before every other ready item.
  case veryHigh

  /// Whether `lhs` runs after `rhs` (a lower priority).
  public static func < (lhs: WorkPriority, rhs: WorkPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}
