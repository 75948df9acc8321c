extension Option where Value == Bool {
  /// A flag: true when given, false otherwise; it takes no value.
  static func flag(_ name: String, short: Character? = nil, help: String) -> Option {
    Option(
      name: name, short: short, valueName: nil, help: help, expectation: "no value", convert: { _ in nil },
      default: { false })
  }
}

extension Option where Value == Int {
  /// A whole number within `range`.
  static func integer(
    _ name: String,
    short: Character? = nil,
    valueName: String = "n",
    help: String,
    default defaultValue: @autoclosure @escaping @Sendable () -> Int,
    defaultDescription: String? = nil,
    range: ClosedRange<Int>
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help,
      defaultDescription: defaultDescription ?? "\(defaultValue())",
      expectation: "a whole number from \(range.lowerBound) to \(range.upperBound)",
      convert: { raw in Int(raw).flatMap { range.contains($0) ? $0 : nil } },
      default: defaultValue)
  }
}

extension Option where Value == Int? {
  /// An optional whole number within `range`: nil when not given.
  static func integer(
    _ name: String,
    short: Character? = nil,
    valueName: String = "n",
    help: String,
    defaultDescription: String? = nil,
    range: ClosedRange<Int>
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help, defaultDescription: defaultDescription,
      expectation: "a whole number from \(range.lowerBound) to \(range.upperBound)",
      // Spelled out: a bare `nil` here would be a given-but-empty `.some(nil)`, accepted as "not given".
      convert: { raw -> Int?? in
        guard let value = Int(raw), range.contains(value) else { return .none }
        return .some(value)
      },
      default: { nil })
  }
}

extension Option where Value == Double {
  /// A finite number within `range`.
  static func number(
    _ name: String,
    short: Character? = nil,
    valueName: String = "x",
    help: String,
    default defaultValue: Double,
    range: ClosedRange<Double>
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help,
      defaultDescription: Self.describe(defaultValue),
      expectation: "a number from \(Self.describe(range.lowerBound)) to \(Self.describe(range.upperBound))",
      convert: { raw in Double(raw).flatMap { $0.isFinite && range.contains($0) ? $0 : nil } },
      default: { defaultValue })
  }

  private static func describe(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? "\(Int(value))" : "\(value)"
  }
}

extension Option where Value == String {
  /// One of `choices`.
  static func choice(
    _ name: String,
    short: Character? = nil,
    help: String,
    default defaultValue: String,
    defaultDescription: String? = nil,
    choices: [String]
  ) -> Option {
    Option(
      name: name, short: short, valueName: choices.joined(separator: "|"), help: help,
      defaultDescription: defaultDescription ?? defaultValue, completion: .choices(choices),
      expectation: "one of \(choices.joined(separator: ", "))",
      convert: { choices.contains($0) ? $0 : nil },
      default: { defaultValue })
  }

  /// Any text, with a default.
  static func text(
    _ name: String,
    short: Character? = nil,
    valueName: String = "text",
    help: String,
    default defaultValue: String,
    completion: CompletionKind = .none
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help, defaultDescription: defaultValue,
      completion: completion, expectation: "text", convert: { $0 }, default: { defaultValue })
  }
}

extension Option where Value == String? {
  /// Any text, nil when not given; with `required`, leaving it out (or giving it empty) is a usage error.
  static func text(
    _ name: String,
    short: Character? = nil,
    valueName: String = "text",
    help: String,
    required: Bool = false,
    defaultDescription: String? = nil,
    completion: CompletionKind = .none
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help, defaultDescription: defaultDescription,
      isRequired: required, completion: completion, expectation: required ? "a non-empty value" : "text",
      convert: { raw -> String?? in required && raw.isEmpty ? .none : .some(raw) }, default: { nil })
  }
}
