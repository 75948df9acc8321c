// Text helpers shared by the trace's exports, without Foundation: number formatting, escaping, atomic files.

/// Writes `text` to a temporary file next to `path`, then renames it over `path`: readers see the old file or
/// the whole new one, never half of it. Nothing is left behind when it fails.
func writeTextAtomically(_ text: String, to path: String) throws(WorkTraceError) {
  if let failure = Platform.replaceFile(atPath: path, with: text.utf8) {
    throw WorkTraceError(path: path, code: failure)
  }
}

/// The duration in nanoseconds.
func nanoseconds(_ duration: Duration) -> Int64 {
  let (seconds, attoseconds) = duration.components
  return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}

/// The duration in seconds, as a `Double`.
func secondsValue(_ duration: Duration) -> Double {
  let (seconds, attoseconds) = duration.components
  return Double(seconds) + Double(attoseconds) / 1e18
}

/// The duration in microseconds with three decimals ("12.345"), for Chrome trace timestamps.
func microsecondsText(_ duration: Duration) -> String {
  let nanoseconds = nanoseconds(duration)
  let sign = nanoseconds < 0 ? "-" : ""
  let magnitude = nanoseconds.magnitude
  let fraction = String(magnitude % 1000)
  return sign + String(magnitude / 1000) + "." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

/// Appends the duration in microseconds with three decimals, as ``microsecondsText(_:)`` does, without temporaries.
func appendMicroseconds(_ duration: Duration, to out: inout String) {
  let nanoseconds = nanoseconds(duration)
  if nanoseconds < 0 { out += "-" }
  let magnitude = nanoseconds.magnitude
  out += String(magnitude / 1000)
  let fraction = magnitude % 1000
  out += fraction < 10 ? ".00" : fraction < 100 ? ".0" : "."
  out += String(fraction)
}

/// Appends `text` as a JSON string literal; text with nothing to escape is copied as is.
func appendJSONString(_ text: String, to out: inout String) {
  if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
    out += "\""
    out += text
    out += "\""
  } else {
    out += jsonString(text)
  }
}

/// `value` rounded to `places` decimals, without exponent ("3.14", "-0.5", "12").
func decimalText(_ value: Double, places: Int) -> String {
  guard value.isFinite else { return "0" }
  var scale = 1.0
  for _ in 0..<places { scale *= 10 }
  let scaled = Int64((abs(value) * scale).rounded())
  let sign = value < 0 && scaled != 0 ? "-" : ""
  guard places > 0 else { return sign + String(scaled) }
  let divisor = Int64(scale)
  let fraction = String(scaled % divisor)
  return sign + String(scaled / divisor) + "." + String(repeating: "0", count: places - fraction.count) + fraction
}

/// A short human duration with three significant digits: "850 ns", "12.3 µs", "4.56 ms", "1.25 s", "2 min 5 s".
func durationText(_ duration: Duration) -> String {
  let seconds = secondsValue(duration)
  func threeDigits(_ value: Double, _ unit: String) -> String {
    let places = value < 10 ? 2 : value < 100 ? 1 : 0
    return decimalText(value, places: places) + " " + unit
  }
  switch abs(seconds) {
  case ..<1e-6: return decimalText(seconds * 1e9, places: 0) + " ns"
  case ..<1e-3: return threeDigits(seconds * 1e6, "µs")
  case ..<1: return threeDigits(seconds * 1e3, "ms")
  case ..<120: return threeDigits(seconds, "s")
  default:
    let whole = Int(seconds.rounded())
    return "\(whole / 60) min \(whole % 60) s"
  }
}

/// `value` with thousands separated by commas ("30,000").
func groupedText(_ value: Int) -> String {
  let digits = String(value.magnitude)
  var result = ""
  for (index, digit) in digits.enumerated() {
    if index > 0, (digits.count - index) % 3 == 0 { result += "," }
    result.append(digit)
  }
  return (value < 0 ? "-" : "") + result
}

/// `text` as a JSON string literal, quotes included.
func jsonString(_ text: String) -> String {
  var result = "\""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": result += "\\\""
    case "\\": result += "\\\\"
    case "\n": result += "\\n"
    case "\r": result += "\\r"
    case "\t": result += "\\t"
    case _ where scalar.value < 0x20:
      let hex = String(scalar.value, radix: 16)
      result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result + "\""
}

/// `text` escaped for XML character data and attribute values; control characters XML forbids are dropped.
func xmlEscaped(_ text: String) -> String {
  var result = ""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "&": result += "&amp;"
    case "<": result += "&lt;"
    case ">": result += "&gt;"
    case "\"": result += "&quot;"
    case "'": result += "&apos;"
    case "\t", "\n", "\r": result += " "
    case _ where scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value): continue
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result
}

extension WorkState {
  /// The state's name ("finished"), without the cost of reflection.
  var label: String {
    switch self {
    case .pending: "pending"
    case .ready: "ready"
    case .running: "running"
    case .finished: "finished"
    case .cancelled: "cancelled"
    case .failed: "failed"
    }
  }
}
