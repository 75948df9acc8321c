import Foundation
import TiltShift

/// Where output goes and how it may look: colours only on a terminal and never with `NO_COLOR`.
enum Terminal {
  static let stdoutIsTerminal = isatty(STDOUT_FILENO) == 1
  static let stderrIsTerminal = isatty(STDERR_FILENO) == 1
  static let colorAllowed: Bool = {
    let noColor = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
    return !noColor && ProcessInfo.processInfo.environment["TERM"] != "dumb"
  }()

  enum Style: String {
    case bold = "1"
    case dim = "2"
    case red = "31"
    case green = "32"
    case yellow = "33"
    case cyan = "36"
  }

  /// `text` wrapped in an ANSI style when stdout (or stderr, with `forError`) is a colour terminal.
  static func styled(_ text: String, _ style: Style, forError: Bool = false) -> String {
    let terminal = forError ? stderrIsTerminal : stdoutIsTerminal
    guard terminal, colorAllowed else { return text }
    return "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m"
  }

  /// Writes to standard error without buffering, as ``shown(_:)`` shows it.
  static func error(_ text: String) {
    let shown = shown(text)
    rawError(shown.hasSuffix("\n") ? shown : shown + "\n")
  }

  /// `text` as it is safe to write to a terminal: a byte of a path that is not UTF-8 shows as `\xFF`
  /// (``SystemPath/displayed(_:)``), and every control character but a line break or a tab as `\x1B` (C1 ones as
  /// `\u{9B}`), except the colour sequences ``styled(_:_:forError:)`` makes (ESC `[` digits and `;` `m`).
  ///
  /// Messages carry text from the files they are about (a file's name, a PNG keyword, a colour profile's name in
  /// libpng's words): written raw, a crafted file could set the terminal's title, move the cursor or hide lines.
  static func shown(_ text: String) -> String {
    let text = SystemPath.displayed(text)
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var shown = String.UnicodeScalarView()
    let scalars = Array(text.unicodeScalars)
    var index = 0
    while index < scalars.count {
      let scalar = scalars[index]
      if let end = colourSequenceEnd(scalars, from: index) {
        shown.append(contentsOf: scalars[index..<end])
        index = end
        continue
      }
      if isControl(scalar) {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        shown.append(
          contentsOf: (scalar.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}").unicodeScalars)
      } else {
        shown.append(scalar)
      }
      index += 1
    }
    return String(shown)
  }

  private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
    (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
  }

  /// The end of a colour sequence (ESC `[`, digits and `;`, `m`) starting at `start`, or nil.
  private static func colourSequenceEnd(_ scalars: [Unicode.Scalar], from start: Int) -> Int? {
    guard scalars[start] == "\u{1B}", start + 1 < scalars.count, scalars[start + 1] == "[" else { return nil }
    var index = start + 2
    while index < scalars.count, scalars[index] == ";" || ("0"..."9").contains(scalars[index]) { index += 1 }
    return index < scalars.count && scalars[index] == "m" ? index + 1 : nil
  }

  /// Writes `text` to standard error with no newline (progress lines redraw in place).
  ///
  /// Errors are ignored: a closed pipe (`spindle ... 2>&1 | head`) must not stop the batch. SIGPIPE is ignored
  /// process-wide by `main`, so such a write fails with EPIPE instead of killing the process.
  static func rawError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        offset += written
      }
    }
  }

  /// Prints to standard output and flushes, so lines interleave correctly with stderr.
  static func out(_ text: String) {
    print(text)
    fflush(nil)
  }

  /// The terminal width, or 80 when it cannot be told.
  static var width: Int {
    var size = winsize()
    if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 20 { return Int(size.ws_col) }
    return 80
  }
}

/// Human formatting helpers shared by the commands.
enum Format {
  static func seconds(_ value: Double) -> String {
    if value < 1 { return String(format: "%.0f ms", value * 1000) }
    if value < 90 { return String(format: "%.2f s", value) }
    let minutes = Int(value) / 60
    return "\(minutes)m\(String(format: "%02d", Int(value) % 60))s"
  }

  static func megapixels(_ pixels: Int) -> String { String(format: "%.1f MP", Double(pixels) / 1e6) }

  static func bytes(_ count: Int) -> String {
    let units = ["B", "KB", "MB", "GB"]
    var value = Double(count)
    var unit = 0
    while value >= 1000, unit < units.count - 1 {
      value /= 1000
      unit += 1
    }
    return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
  }
}
