/// The playground's top-and-bottom gradient, sampled as one 8-bit weight per line.
///
/// Weight 0 keeps the original, 255 takes the blur. Line `i` of `count` is sampled at its centre,
/// `t = (i + 0.5) / count`, like a gradient drawn from the top edge to the bottom edge.
struct GradientMask {
  /// One weight per line (row, or column for rotated photos), 0...255.
  let weights: [UInt8]

  init(count: Int, parameters: TiltShiftParameters, reversed: Bool = false) {
    let low = parameters.clearBand.lowerBound
    let high = parameters.clearBand.upperBound
    let inner = parameters.innerIntensity
    let stops: [(Double, Double)] = [(0, 1), (low, inner), ((low + high) / 2, 0), (high, inner), (1, 1)]
    var weights = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
      let t = (Double(i) + 0.5) / Double(count)
      weights[reversed ? count - 1 - i : i] = UInt8((Self.level(at: t, stops) * 255).rounded())
    }
    self.weights = weights
  }

  /// The gray level at `t`: linear between the two stops around it, the end value outside them.
  static func level(at t: Double, _ stops: [(Double, Double)]) -> Double {
    if t <= stops[0].0 { return stops[0].1 }
    for index in 1..<stops.count where t <= stops[index].0 {
      let (x0, y0) = stops[index - 1]
      let (x1, y1) = stops[index]
      if x1 <= x0 { return y1 }
      return y0 + (y1 - y0) * (t - x0) / (x1 - x0)
    }
    return stops[stops.count - 1].1
  }

  /// The ranges of lines whose weight is not 0 (the lines that need blurred pixels).
  var blurredRanges: [Range<Int>] {
    var ranges: [Range<Int>] = []
    var start: Int?
    for (index, weight) in weights.enumerated() {
      if weight != 0 {
        if start == nil { start = index }
      } else if let begin = start {
        ranges.append(begin..<index)
        start = nil
      }
    }
    if let begin = start { ranges.append(begin..<weights.count) }
    return ranges
  }
}

/// `ranges` grown by `amount` on both sides, clamped to `0..<limit`, merged where they touch.
func expand(_ ranges: [Range<Int>], by amount: Int, limit: Int) -> [Range<Int>] {
  var merged: [Range<Int>] = []
  for range in ranges {
    let grown = max(0, range.lowerBound - amount)..<min(limit, range.upperBound + amount)
    if let last = merged.last, grown.lowerBound <= last.upperBound {
      merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, grown.upperBound)
    } else {
      merged.append(grown)
    }
  }
  return merged
}
