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
