/// What a shell may offer when completing an option's value.
enum CompletionKind: Sendable, Equatable {
  case none
  case file
  case directory
  case choices([String])
}

/// One option as help, parsing and completion see it, whatever the type of its value.
///
/// The typed declaration is ``Option``; a command's ``OptionGroup`` holds them, and everything the command
/// accepts, prints in `--help` or offers for completion is read from those declarations.
protocol OptionDeclaration: Sendable {
  /// The long name, without dashes: `jobs` for `--jobs`.
  var name: String { get }
  var short: Character? { get }
  /// The placeholder shown for the value (`n` in `--jobs <n>`); nil for a flag, which takes no value.
  var valueName: String? { get }
  var help: String { get }
  /// The default as `--help` shows it, or nil to show none.
  var defaultDescription: String? { get }
  /// Whether leaving the option out is a usage error.
  var isRequired: Bool { get }
  var completion: CompletionKind { get }
  /// The accepted values (`one of jpeg, png`), named in errors as "--x expects …".
  var expectation: String { get }
  /// Whether `raw` is a value this option accepts.
  func accepts(_ raw: String) -> Bool
}

extension OptionDeclaration {
  var isFlag: Bool { valueName == nil }
}

/// A typed option, declared once: its name, short name, help, value type, default and allowed values.
///
/// The same declaration drives `--help`, parsing, the "did you mean" suggestions and the completion scripts, so
/// adding an option to a command is one `let` in the command's ``OptionGroup``:
///
/// ```swift
/// struct Options: OptionGroup {
///   let jobs = Option<Int>.integer("jobs", short: "j", help: "Files processed at once.", default: 4, range: 1...256)
///   let quiet = Option<Bool>.flag("quiet", short: "q", help: "Print only errors and the summary.")
/// }
/// // in the command: let jobs = arguments[\.jobs]
/// ```
struct Option<Value: Sendable>: OptionDeclaration {
  let name: String
  let short: Character?
  let valueName: String?
  let help: String
  let defaultDescription: String?
  let isRequired: Bool
  let completion: CompletionKind
  let expectation: String
  /// Turns a raw value into the typed one, or nil when it is not acceptable.
  let convert: @Sendable (String) -> Value?
  /// The value when the option is not given.
  let defaultValue: @Sendable () -> Value

  /// Declares an option from its parts; the static factories below cover the usual types.
  init(
    name: String,
    short: Character? = nil,
    valueName: String?,
    help: String,
    defaultDescription: String? = nil,
    isRequired: Bool = false,
    completion: CompletionKind = .none,
    expectation: String,
    convert: @escaping @Sendable (String) -> Value?,
    default defaultValue: @escaping @Sendable () -> Value
  ) {
    self.name = name
    self.short = short
    self.valueName = valueName
    self.help = help
    self.defaultDescription = defaultDescription
    self.isRequired = isRequired
    self.completion = completion
    self.expectation = expectation
    self.convert = convert
    self.defaultValue = defaultValue
  }

  func accepts(_ raw: String) -> Bool { convert(raw) != nil }

  /// A value-taking option read with `parse`, e.g. `--size WxH` or `--shard K/N`.
  static func custom(
    _ name: String,
    short: Character? = nil,
    valueName: String,
    help: String,
    default defaultValue: @autoclosure @escaping @Sendable () -> Value,
    defaultDescription: String?,
    expectation: String,
    completion: CompletionKind = .none,
    parse: @escaping @Sendable (String) -> Value?
  ) -> Option {
    Option(
      name: name, short: short, valueName: valueName, help: help, defaultDescription: defaultDescription,
      completion: completion, expectation: expectation, convert: parse, default: defaultValue)
  }
}

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

/// A command's options: a struct whose stored properties are ``Option`` declarations, in the order `--help`
/// lists them.
///
/// The parser finds them by reflection, as swift-argument-parser finds its property wrappers, so a new option
/// is one `let`.
protocol OptionGroup: Sendable {
  init()
}

extension OptionGroup {
  /// The declared options, in declaration order.
  var declarations: [any OptionDeclaration] {
    Mirror(reflecting: self).children.compactMap { $0.value as? any OptionDeclaration }
  }
}

/// A command without options (besides `--help`).
struct NoOptions: OptionGroup {}
