import Foundation

/// How big the stress tests run: bounded by default (CI runs that every time), larger with `SPINDLE_STRESS=1`.
///
/// The one place that reads `SPINDLE_STRESS`:
///
/// ```swift
/// let rounds = Stress.size(small: 2_000, large: 200_000)
/// let workers = Stress.scaled(8)  // 8, or 80 under SPINDLE_STRESS=1
/// ```
package enum Stress {
  /// Whether `SPINDLE_STRESS` is `1` or `full`.
  package static let enabled: Bool = isEnabled(ProcessInfo.processInfo.environment["SPINDLE_STRESS"])

  /// How `SPINDLE_STRESS`'s value is read: `1` or `full` enables the large sizes; anything else (unset, `0`,
  /// `yes`) keeps the bounded ones.
  package static func isEnabled(_ value: String?) -> Bool { value == "1" || value == "full" }

  /// `small` normally, `large` under `SPINDLE_STRESS=1`.
  package static func size(small: Int, large: Int) -> Int { enabled ? large : small }

  /// `base` normally, `base × factor` under `SPINDLE_STRESS=1`.
  package static func scaled(_ base: Int, by factor: Int = 10) -> Int { enabled ? base * factor : base }
}
