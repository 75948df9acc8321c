extension WorkTrace {
  /// The dependency graph as Graphviz DOT: one box per item, labelled with its name, state and duration, coloured
  /// by state (its queue is the tooltip); an arrow from each dependency to the item that waited for it.
  ///
  /// Render it with `dot -Tsvg graph.dot -o graph.svg`.
  ///
  /// ```swift
  /// print(trace.graphDOT())
  /// // digraph "work" { ... n1 [label="load\nfinished · 1.20 ms" ...]; n1 -> n2; ... }
  /// ```
  public func graphDOT(title: String = "work") -> String {
    Self.graphDOT(items, title: title)
  }

  /// The dependency graph as Mermaid flowchart text (GitHub renders it inside a `mermaid` code block).
  ///
  /// Nodes carry the item's name, state and duration, and a class per state that colours them.
  ///
  /// ```swift
  /// print(trace.graphMermaid())
  /// // flowchart LR
  /// //   n1["load<br/>finished · 1.20 ms"]:::finished
  /// //   n1 --> n2
  /// ```
  public func graphMermaid() -> String {
    Self.graphMermaid(items)
  }

  /// Writes the dependency graph to `path`: Mermaid if the name ends in `.mmd` or `.mermaid`, DOT otherwise.
  ///
  /// - Throws: ``WorkTraceError`` naming the path and the system's reason when the file cannot be written.
  public func writeGraph(toFile path: String) throws(WorkTraceError) {
    let mermaid = path.hasSuffix(".mmd") || path.hasSuffix(".mermaid")
    try writeTextAtomically(mermaid ? graphMermaid() : graphDOT(), to: path)
  }

  /// The label of a node: name, then state and how long it ran (or waited, if it never ran).
  static func nodeDetail(_ event: WorkTraceEvent) -> String {
    switch event.outcome {
    case .pending, .ready: "\(event.outcome.label) · waiting \(durationText(event.waited))"
    case .running: "running · \(durationText(event.duration))"
    case .finished, .failed, .cancelled:
      event.ran ? "\(event.outcome.label) · \(durationText(event.duration))" : "\(event.outcome.label) · did not run"
    }
  }

  static func stateColors(_ state: WorkState) -> (fill: String, stroke: String) {
    switch state {
    case .pending: ("#eeeeee", "#9e9e9e")
    case .ready: ("#fff3c4", "#d4a017")
    case .running: ("#d6e6f5", "#4e79a7")
    case .finished: ("#dcefd8", "#59a14f")
    case .failed: ("#f9d3d3", "#e15759")
    case .cancelled: ("#e4e0dc", "#8c8178")
    }
  }

  static func graphDOT(_ events: [WorkTraceEvent], title: String) -> String {
    var lines = [
      "digraph \(dotString(title)) {",
      "  rankdir=LR;",
      "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
      "  edge [color=\"#777777\"];",
    ]
    for event in events {
      let colors = stateColors(event.outcome)
      let label = dotString(event.name + "\n" + nodeDetail(event))
      lines.append(
        "  n\(event.id) [label=\(label), tooltip=\(dotString("queue " + event.queue)), fillcolor=\"\(colors.fill)\", "
          + "color=\"\(colors.stroke)\"];")
    }
    let known = Set(events.map(\.id))
    for event in events {
      for dependency in event.dependencies where known.contains(dependency) {
        lines.append("  n\(dependency) -> n\(event.id);")
      }
    }
    lines.append("}")
    return lines.joined(separator: "\n") + "\n"
  }

  static func graphMermaid(_ events: [WorkTraceEvent]) -> String {
    var lines = ["flowchart LR"]
    for event in events {
      lines.append(
        "  n\(event.id)[\"\(mermaidText(event.name))<br/>\(mermaidText(nodeDetail(event)))\"]:::\(event.outcome.label)")
    }
    let known = Set(events.map(\.id))
    for event in events {
      for dependency in event.dependencies where known.contains(dependency) {
        lines.append("  n\(dependency) --> n\(event.id)")
      }
    }
    for state in [WorkState.pending, .ready, .running, .finished, .failed, .cancelled] {
      let colors = stateColors(state)
      lines.append("  classDef \(state.label) fill:\(colors.fill),stroke:\(colors.stroke),color:#222222")
    }
    return lines.joined(separator: "\n") + "\n"
  }
}

/// `text` as a DOT quoted string; a newline becomes a centred line break (`\n`).
private func dotString(_ text: String) -> String {
  var result = "\""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": result += "\\\""
    case "\\": result += "\\\\"
    case "\n": result += "\\n"
    case "\r", "\t": result += " "
    case _ where scalar.value < 0x20: continue
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result + "\""
}

/// `text` for a quoted Mermaid label: quotes, markup and `#` become Mermaid entity codes.
private func mermaidText(_ text: String) -> String {
  var result = ""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": result += "#quot;"
    case "#": result += "#35;"
    case "<": result += "#lt;"
    case ">": result += "#gt;"
    case "&": result += "#amp;"
    case "\n", "\r", "\t": result += " "
    case _ where scalar.value < 0x20: continue
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result
}
