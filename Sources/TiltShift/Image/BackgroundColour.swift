/// The colour transparent pixels are composited on when written to a format without alpha (JPEG).
///
/// ```swift
/// let white = BackgroundColour.white
/// let brand = BackgroundColour(parsing: "#1e90ff")  // nil for anything not white, black or #rrggbb
/// ```
public struct BackgroundColour: Sendable, Equatable, CustomStringConvertible {
  /// Red, 0...255.
  public var red: UInt8
  /// Green, 0...255.
  public var green: UInt8
  /// Blue, 0...255.
  public var blue: UInt8

  /// Creates a colour.
  public init(red: UInt8, green: UInt8, blue: UInt8) {
    self.red = red
    self.green = green
    self.blue = blue
  }

  /// White, the default: a transparent logo on white looks like it does on a page.
  public static let white = BackgroundColour(red: 255, green: 255, blue: 255)
  /// Black.
  public static let black = BackgroundColour(red: 0, green: 0, blue: 0)

  /// Parses `white`, `black` or `#rrggbb` (any case); nil otherwise.
  public init?(parsing text: String) {
    switch text.lowercased() {
    case "white": self = .white
    case "black": self = .black
    default:
      let digits = Array(text.utf8)
      guard digits.count == 7, digits[0] == UInt8(ascii: "#"), let value = UInt32(String(text.dropFirst()), radix: 16)
      else { return nil }
      self.init(red: UInt8(value >> 16 & 0xFF), green: UInt8(value >> 8 & 0xFF), blue: UInt8(value & 0xFF))
    }
  }

  /// Whether red, green and blue are equal (the colour is a gray level).
  public var isGray: Bool { red == green && green == blue }

  /// `#rrggbb`.
  public var description: String {
    let digits = Array("0123456789abcdef")
    return "#" + String([red, green, blue].flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
  }
}
