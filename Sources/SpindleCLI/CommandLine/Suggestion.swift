/// "Did you mean …?": the nearest candidate by edit distance, or the only one the typed word begins.
enum Suggestion {
  static func nearest(to typed: String, among candidates: [String]) -> String? {
    guard !typed.isEmpty else { return nil }
    let scored = candidates.map { (candidate: $0, distance: distance(typed, $0)) }
    if let best = scored.min(by: { $0.distance < $1.distance }),
      best.distance <= max(2, min(3, best.candidate.count / 3)), best.distance < best.candidate.count
    {
      return best.candidate
    }
    let prefixed = candidates.filter { $0.hasPrefix(typed) }
    return prefixed.count == 1 ? prefixed[0] : nil
  }

  /// The edit distance: insertions, deletions, substitutions and swaps of neighbours that turn `a` into `b`
  /// (Damerau–Levenshtein, optimal string alignment), so `--jbos` is one edit from `--jobs`.
  static func distance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
        if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
          table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
        }
      }
    }
    return table[a.count][b.count]
  }
}
