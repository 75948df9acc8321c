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
