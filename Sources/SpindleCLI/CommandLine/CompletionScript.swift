/// What a shell may offer when completing an option's value.
enum CompletionKind: Sendable, Equatable {
  case none
  case file
  case directory
  case choices([String])
}

/// A shell `spindle --generate-completion-script` writes for.
enum CompletionShell: String, CaseIterable, Sendable {
  case bash
  case zsh
  case fish
}

/// A shell completion script made from the commands' specs: the same declarations as help and parsing.
///
/// Install with, e.g., `spindle --generate-completion-script bash > /etc/bash_completion.d/spindle`,
/// `spindle --generate-completion-script zsh > ~/.zfunc/_spindle`, or
/// `spindle --generate-completion-script fish > ~/.config/fish/completions/spindle.fish`.
struct CompletionScript {
  var shell: CompletionShell
  var root: CommandSpec
  var subcommands: [CommandSpec]

  var text: String {
    switch shell {
    case .bash: bash
    case .zsh: zsh
    case .fish: fish
    }
  }

  /// `demo` for `spindle demo`.
  private func word(_ spec: CommandSpec) -> String {
    String(spec.name.split(separator: " ").last ?? "")
  }

  private static func optionWords(_ spec: CommandSpec) -> [String] {
    spec.allOptions.flatMap { option in ["--\(option.name)"] + (option.short.map { ["-\($0)"] } ?? []) }
  }

  // MARK: bash

  private func bashReply(_ kind: CompletionKind) -> String {
    switch kind {
    case .none: "COMPREPLY=()"
    case .file: "COMPREPLY=( $(compgen -f -- \"$cur\") )"
    case .directory: "COMPREPLY=( $(compgen -d -- \"$cur\") )"
    case .choices(let choices): "COMPREPLY=( $(compgen -W \"\(choices.joined(separator: " "))\" -- \"$cur\") )"
    }
  }

  private func bashCases(_ spec: CommandSpec, indent: String) -> String {
    var text = "\(indent)case \"$prev\" in\n"
    for option in spec.allOptions where !option.isFlag {
      let patterns = (option.short.map { ["-\($0)"] } ?? []) + ["--\(option.name)"]
      text += "\(indent)  \(patterns.joined(separator: "|"))) \(bashReply(option.completion)); return ;;\n"
    }
    text += "\(indent)esac\n"
    let options = Self.optionWords(spec).joined(separator: " ")
    text += "\(indent)if [[ \"$cur\" == -* ]]; then\n"
    text += "\(indent)  COMPREPLY=( $(compgen -W \"\(options)\" -- \"$cur\") )\n"
    text += "\(indent)else\n"
    text += "\(indent)  \(bashReply(spec.positionals.first?.completion ?? .none))\n"
    text += "\(indent)fi\n"
    return text
  }

  private var bash: String {
    let names = subcommands.map(word).joined(separator: " ")
    var text = """
      # bash completion for spindle, made by `spindle --generate-completion-script bash`.
      _spindle() {
        local cur="${COMP_WORDS[COMP_CWORD]}"
        local prev="${COMP_WORDS[COMP_CWORD-1]}"
        if [[ $COMP_CWORD -eq 1 ]]; then
          COMPREPLY=( $(compgen -W "\(names) help \(Self.optionWords(root).joined(separator: " "))" -- "$cur") )
          return
        fi
        case "${COMP_WORDS[1]}" in

      """
    for spec in subcommands {
      text += "    \(word(spec)))\n"
      text += bashCases(spec, indent: "      ")
      text += "      ;;\n"
    }
    text += """
          help) COMPREPLY=( $(compgen -W "\(names)" -- "$cur") ) ;;
          --generate-completion-script) COMPREPLY=( $(compgen -W "bash zsh fish" -- "$cur") ) ;;
          *) COMPREPLY=() ;;
        esac
      }
      complete -o filenames -F _spindle spindle

      """
    return text
  }

  // MARK: zsh

  private static func zshEscape(_ text: String) -> String {
    var escaped = ""
    for character in text {
      switch character {
      case "'": escaped += "'\\''"
      case "[", "]", ":", "\\": escaped += "\\\(character)"
      default: escaped.append(character)
      }
    }
    return escaped
  }

  private func zshAction(_ kind: CompletionKind) -> String {
    switch kind {
    case .none: " "
    case .file: "_files"
    case .directory: "_files -/"
    case .choices(let choices): "(\(choices.joined(separator: " ")))"
    }
  }

  private func zshArguments(_ spec: CommandSpec) -> [String] {
    var lines: [String] = []
    for option in spec.allOptions {
      let help = Self.zshEscape(option.help)
      var value = ""
      if let valueName = option.valueName {
        value = ":\(Self.zshEscape(valueName)):\(zshAction(option.completion))"
      }
      if let short = option.short {
        lines.append("'(-\(short) --\(option.name))'{-\(short),--\(option.name)}'[\(help)]\(value)'")
      } else {
        lines.append("'--\(option.name)[\(help)]\(value)'")
      }
    }
    for positional in spec.positionals {
      let star = positional.repeating ? "*" : ""
      let help = Self.zshEscape(positional.help)
      lines.append("'\(star):\(help):\(zshAction(positional.completion))'")
    }
    return lines
  }

  private var zsh: String {
    var text = """
      #compdef spindle
      # zsh completion for spindle, made by `spindle --generate-completion-script zsh`.
      _spindle() {
        local -a subcommands
        subcommands=(

      """
    for spec in subcommands {
      text += "    '\(word(spec)):\(Self.zshEscape(spec.abstract))'\n"
    }
    text += """
        )
        if (( CURRENT == 2 )); then
          _describe -t subcommands 'spindle subcommand' subcommands
          _arguments \(zshArguments(root).filter { $0.hasPrefix("'-") }.joined(separator: " "))
          return
        fi
        local subcommand=$words[2]
        words=(${words[2,-1]})
        (( CURRENT-- ))
        case $subcommand in

      """
    for spec in subcommands {
      text += "    \(word(spec)))\n"
      text += "      _arguments -s \\\n"
      text += zshArguments(spec).map { "        \($0)" }.joined(separator: " \\\n") + "\n"
      text += "      ;;\n"
    }
    text += """
        esac
      }
      _spindle "$@"

      """
    return text
  }

  // MARK: fish

  private static func fishQuote(_ text: String) -> String {
    "'" + text.replacingAll("\\", with: "\\\\").replacingAll("'", with: "\\'") + "'"
  }

  private func fishValue(_ kind: CompletionKind) -> String {
    switch kind {
    case .none: " -x"
    case .file: " -r -F"
    case .directory: " -x -a '(__fish_complete_directories)'"
    case .choices(let choices): " -x -a \(Self.fishQuote(choices.joined(separator: " ")))"
    }
  }

  private func fishOption(_ option: any OptionDeclaration, condition: String) -> String {
    var line = "complete -c spindle -n \(Self.fishQuote(condition))"
    if let short = option.short { line += " -s \(short)" }
    line += " -l \(option.name)"
    if !option.isFlag { line += fishValue(option.completion) }
    return line + " -d \(Self.fishQuote(option.help))\n"
  }

  private var fish: String {
    let names = subcommands.map(word).joined(separator: " ")
    var text = "# fish completion for spindle, made by `spindle --generate-completion-script fish`.\n"
    text += "complete -c spindle -f\n"
    for spec in subcommands {
      text +=
        "complete -c spindle -n '__fish_use_subcommand' -a \(word(spec)) -d \(Self.fishQuote(spec.abstract))\n"
    }
    for option in root.allOptions {
      text += fishOption(option, condition: "__fish_use_subcommand")
    }
    for spec in subcommands {
      let condition = "__fish_seen_subcommand_from \(word(spec))"
      for option in spec.allOptions {
        text += fishOption(option, condition: condition)
      }
      if let positional = spec.positionals.first, positional.completion != .none {
        let value: String
        switch positional.completion {
        case .choices(let choices): value = " -a \(Self.fishQuote(choices.joined(separator: " ")))"
        case .directory: value = " -a '(__fish_complete_directories)'"
        default: value = " -F"
        }
        text += "complete -c spindle -n \(Self.fishQuote(condition))\(value)\n"
      }
    }
    text += "# subcommands: \(names)\n"
    return text
  }
}

extension String {
  /// Every occurrence of `target` replaced by `replacement` (no Foundation needed).
  fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
    var result = ""
    for character in self {
      if character == target { result += replacement } else { result.append(character) }
    }
    return result
  }
}
