/// An SVG picture of recorded work: one lane per thread with a bar per item, and each queue's waiting items.
///
/// - **Lanes.** Each thread that ran a body gets a lane; each body is a bar from its start to its end, coloured by
///   its stage (the first word of its name: `"decode a.jpg"` → `decode`; by queue when names have no common
///   words), red if it failed, grey if it was cancelled. Bars wide enough carry their name.
/// - **Waiting.** Above the lanes, each queue has a strip showing how many of its items were waiting: for their
///   dependencies (grey), or ready and waiting for a free slot (amber). With few items, a thin line in the lane
///   also runs from the moment each item was added to the moment it started. Items that ended without running
///   are marked ✕ on their queue's strip.
/// - **Thousands of items.** Bars thinner than two pixels are not drawn one by one: each two-pixel column of a
///   lane shows the share of its time the thread was busy, per stage.
///
/// The SVG uses plain shapes, presentation attributes and common fonts, so browsers and librsvg (`rsvg-convert`)
/// draw it the same. Hovering a bar in a browser shows its details.
///
/// ```swift
/// let svg = WorkTimeline(trace: trace, title: "Tilt-shift, 4 threads").svg()
/// try WorkTimeline(trace: trace).write(toFile: "timeline.svg")
/// ```
public struct WorkTimeline: Sendable {
  /// The heading drawn at the top.
  public var title: String
  /// The items to draw (completed or not).
  public var events: [WorkTraceEvent]
  /// The width of the picture in pixels (at least 480).
  public var width: Int

  /// Creates a timeline of `events`, for example a trace's ``WorkTrace/items``.
  public init(events: [WorkTraceEvent], title: String = "Work timeline", width: Int = 1200) {
    self.title = title
    self.events = events
    self.width = max(480, width)
  }

  /// Creates a timeline of everything `trace` recorded so far.
  public init(trace: WorkTrace, title: String = "Work timeline", width: Int = 1200) {
    self.init(events: trace.items, title: title, width: width)
  }

  /// Writes ``svg()`` to the file at `path`, replacing it atomically.
  ///
  /// - Throws: ``WorkTraceError`` naming the path and the system's reason when the file cannot be written.
  public func write(toFile path: String) throws(WorkTraceError) {
    try writeTextAtomically(svg(), to: path)
  }

  /// The timeline as a standalone SVG document.
  public func svg() -> String {
    TimelineRenderer(events: events, title: title, width: width).render()
  }
}

extension WorkTrace {
  /// Writes an SVG timeline of everything recorded so far (see ``WorkTimeline``) to `path`, atomically.
  ///
  /// ```swift
  /// try trace.writeTimeline(toFile: "run.svg", title: "Nightly import")
  /// ```
  ///
  /// - Throws: ``WorkTraceError`` naming the path and the system's reason when the file cannot be written.
  public func writeTimeline(toFile path: String, title: String = "Work timeline") throws(WorkTraceError) {
    try WorkTimeline(trace: self, title: title).write(toFile: path)
  }
}

// MARK: - Rendering

/// Draws one timeline; all geometry in pixels, all times in seconds from the first item's addition.
private struct TimelineRenderer {
  static let font = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
  static let palette: [(fill: String, text: String)] = [
    ("#4e79a7", "#ffffff"), ("#f28e2b", "#1a1a1a"), ("#59a14f", "#ffffff"), ("#b07aa1", "#ffffff"),
    ("#76b7b2", "#1a1a1a"), ("#edc948", "#1a1a1a"), ("#9c755f", "#ffffff"), ("#ff9da7", "#1a1a1a"),
  ]
  static let failedFill = "#e15759"
  static let cancelledFill = "#bab0ac"
  static let blockedFill = "#d9d9d9"
  static let readyFill = "#f5b041"
  /// Bars narrower than this are aggregated into columns of this width.
  static let thinBar = 2.0
  /// Per-item wait lines are drawn up to this many bodies.
  static let maxWaitLines = 150
  /// Up to this many bodies, each is drawn as its own bar (at least 1.5 px wide).
  static let maxSeparateBars = 400

  let events: [WorkTraceEvent]
  let title: String
  let width: Double
  let left = 176.0
  let right = 24.0
  var plotWidth: Double { width - left - right }

  init(events: [WorkTraceEvent], title: String, width: Int) {
    self.events = events
    self.title = title
    self.width = Double(width)
  }

  /// Roughly how wide `text` is at `size` px in the fonts above (DejaVu Sans is among the widest).
  static func textWidth(_ text: String, size: Double) -> Double {
    Double(text.count) * size * 0.62
  }

  /// `text` cut with an ellipsis to fit `room` pixels at `size`, or nil if not even three characters fit.
  static func fitted(_ text: String, room: Double, size: Double) -> String? {
    let fitting = Int(room / (size * 0.62))
    if text.count <= fitting { return text }
    guard fitting >= 4 else { return nil }
    return String(text.prefix(fitting - 1)) + "…"
  }

  static func number(_ value: Double) -> String { decimalText(value, places: 1) }

  func render() -> String {
    guard !events.isEmpty else { return emptyDocument() }
    let origin = events.map(\.enqueued).min()!
    let finish = events.map(\.end).max()!
    let span = max(secondsValue(finish - origin), 1e-6)
    func seconds(_ time: Duration) -> Double { secondsValue(time - origin) }
    func x(_ time: Double) -> Double { left + time / span * plotWidth }

    // Colours: by stage (first word of the name) when that gives a few groups, else by queue.
    let ran = events.filter(\.ran)
    let stageKey: (WorkTraceEvent) -> String = { event in
      String(event.name.split(separator: " ", maxSplits: 1).first ?? Substring(event.name))
    }
    var keyOf = stageKey
    var stages = distinct(ran.map(stageKey))
    if stages.count > Self.palette.count {
      let queues = distinct(ran.map(\.queue))
      if queues.count <= Self.palette.count {
        keyOf = { $0.queue }
        stages = queues
      }
    }
    if stages.count > Self.palette.count {
      var counts: [String: Int] = [:]
      for event in ran { counts[keyOf(event), default: 0] += 1 }
      let kept = Set(stages.sorted { counts[$0]! > counts[$1]! }.prefix(Self.palette.count - 1))
      stages = stages.filter { kept.contains($0) } + ["other"]
      let inner = keyOf
      keyOf = { kept.contains(inner($0)) ? inner($0) : "other" }
    }
    var colorIndex: [String: Int] = [:]
    for (index, stage) in stages.enumerated() { colorIndex[stage] = index }

    // Threads, in the order they first ran a body.
    var threadIndex: [UInt64: Int] = [:]
    for event in ran.sorted(by: { $0.start < $1.start }) where threadIndex[event.thread] == nil {
      threadIndex[event.thread] = threadIndex.count
    }
    let profile = WaitingProfile(events)
    let drawWaitLines = ran.count <= Self.maxWaitLines
    // With few bodies every one is drawn, however short; with many, thin ones become busy-share columns.
    let aggregate = ran.count > Self.maxSeparateBars

    // Legend entries.
    var legend: [(kind: LegendKind, label: String)] = stages.map { (.swatch(Self.palette[colorIndex[$0]!].fill), $0) }
    if events.contains(where: { $0.ran && $0.outcome == .failed }) {
      legend.append((.swatch(Self.failedFill), "failed"))
    }
    if events.contains(where: { $0.ran && $0.outcome == .cancelled }) {
      legend.append((.swatch(Self.cancelledFill), "cancelled while running"))
    }
    legend.append((.swatch(Self.blockedFill), "waiting for dependencies"))
    legend.append((.swatch(Self.readyFill), "ready, waiting for a slot"))
    if drawWaitLines { legend.append((.waitLine, "added → started")) }
    if events.contains(where: { !$0.ran && $0.isComplete }) { legend.append((.cross, "ended without running")) }

    // Layout.
    var legendRows: [[(kind: LegendKind, label: String, x: Double)]] = [[]]
    var cursor = 16.0
    for entry in legend {
      let entryWidth = 18 + Self.textWidth(entry.label, size: 11) + 16
      if cursor + entryWidth > width - 16, !legendRows[legendRows.count - 1].isEmpty {
        legendRows.append([])
        cursor = 16
      }
      legendRows[legendRows.count - 1].append((entry.kind, entry.label, cursor))
      cursor += entryWidth
    }
    let legendTop = 62.0
    let axisY = legendTop + Double(legendRows.count) * 18 + 22
    let stripHeight = 34.0
    let stripGap = 6.0
    let stripsTop = axisY + 8
    let laneHeight = 26.0
    let laneGap = 2.0
    let lanesTop = stripsTop + Double(profile.queues.count) * (stripHeight + stripGap) + 6
    let lanesBottom = lanesTop + Double(threadIndex.count) * (laneHeight + laneGap)
    let bottomAxis = threadIndex.count > 12
    let height = lanesBottom + (bottomAxis ? 34 : 14)

    var out = ""
    out.reserveCapacity(4096 + events.count * 160)
    out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
    out += "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"\(Self.font)\" font-size=\"11\">\n"
    out += "<title>\(xmlEscaped(title))</title>\n"
    out += "<rect x=\"0\" y=\"0\" width=\"\(Int(width))\" height=\"\(Int(height))\" fill=\"#ffffff\"/>\n"

    // Heading.
    let busy = ran.reduce(0.0) { $0 + secondsValue($1.duration) }
    let waits = ran.map { secondsValue($0.waited) }.sorted()
    var summary = "\(groupedText(events.count)) item\(events.count == 1 ? "" : "s") · \(profile.queues.count) "
    summary += "queue\(profile.queues.count == 1 ? "" : "s") · \(threadIndex.count) thread"
    summary += threadIndex.count == 1 ? "" : "s"
    summary += " · \(durationText(.nanoseconds(Int64(span * 1e9)))) from first added to last ended"
    if !threadIndex.isEmpty {
      summary += " · on average \(decimalText(busy / span, places: 1)) bodies running"
    }
    if !waits.isEmpty {
      summary += " · median wait \(durationText(.nanoseconds(Int64(waits[waits.count / 2] * 1e9))))"
    }
    out +=
      "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"#1a1a1a\">\(xmlEscaped(title))</text>\n"
    out += "<text x=\"16\" y=\"46\" font-size=\"12\" fill=\"#555555\">\(xmlEscaped(summary))</text>\n"

    // Legend.
    for (row, entries) in legendRows.enumerated() {
      let y = legendTop + Double(row) * 18
      for entry in entries {
        switch entry.kind {
        case .swatch(let fill):
          out += "<rect x=\"\(Self.number(entry.x))\" y=\"\(Self.number(y))\" width=\"12\" height=\"12\" "
          out += "fill=\"\(fill)\" stroke=\"#666666\" stroke-width=\"0.5\"/>\n"
        case .waitLine:
          out += waitLine(from: entry.x, to: entry.x + 12, y: y + 6, color: "#555555")
        case .cross:
          out += cross(x: entry.x + 6, y: y + 6, color: Self.failedFill)
        }
        out += "<text x=\"\(Self.number(entry.x + 18))\" y=\"\(Self.number(y + 10))\" fill=\"#333333\">"
        out += "\(xmlEscaped(entry.label))</text>\n"
      }
    }

    // Time axis: gridlines through every row, labels above (and below, for tall charts).
    let ticks = Self.ticks(span: span, target: max(2, Int(plotWidth / 110)))
    out += "<g stroke=\"#e6e6e6\" stroke-width=\"1\">\n"
    for tick in ticks.values {
      let tx = Self.number(x(tick))
      out += "<line x1=\"\(tx)\" y1=\"\(Self.number(axisY))\" x2=\"\(tx)\" y2=\"\(Self.number(lanesBottom))\"/>\n"
    }
    out += "</g>\n"
    out += "<line x1=\"\(Self.number(left))\" y1=\"\(Self.number(axisY))\" x2=\"\(Self.number(left + plotWidth))\" "
    out += "y2=\"\(Self.number(axisY))\" stroke=\"#888888\" stroke-width=\"1\"/>\n"
    out += "<g fill=\"#555555\" text-anchor=\"middle\">\n"
    for tick in ticks.values {
      let label = ticks.label(tick)
      out += "<text x=\"\(Self.number(x(tick)))\" y=\"\(Self.number(axisY - 6))\">\(label)</text>\n"
      if bottomAxis {
        out += "<text x=\"\(Self.number(x(tick)))\" y=\"\(Self.number(lanesBottom + 16))\">\(label)</text>\n"
      }
    }
    out += "</g>\n"

    // Waiting strips, one per queue.
    for (index, queue) in profile.queues.enumerated() {
      let top = stripsTop + Double(index) * (stripHeight + stripGap)
      let peak = queue.steps.map { $0.blocked + $0.ready }.max() ?? 0
      out += "<rect x=\"\(Self.number(left))\" y=\"\(Self.number(top))\" width=\"\(Self.number(plotWidth))\" "
      out += "height=\"\(Self.number(stripHeight))\" fill=\"#fafafa\" stroke=\"#dddddd\" stroke-width=\"0.5\"/>\n"
      let name = Self.fitted(queue.name, room: left - 20, size: 11) ?? ""
      out += "<text x=\"\(Self.number(left - 8))\" y=\"\(Self.number(top + 14))\" text-anchor=\"end\" "
      out += "font-weight=\"bold\" fill=\"#333333\">\(xmlEscaped(name))</text>\n"
      out += "<text x=\"\(Self.number(left - 8))\" y=\"\(Self.number(top + 28))\" text-anchor=\"end\" font-size=\"10\" "
      out += "fill=\"#777777\">waiting, peak \(groupedText(peak))</text>\n"
      if peak > 0 {
        let columns = waitingColumns(queue.steps, origin: origin, span: span)
        let scale = (stripHeight - 4) / Double(peak)
        let bottom = top + stripHeight
        out += area(columns.map { Double($0.total) * scale }, bottom: bottom, fill: Self.blockedFill)
        out += area(columns.map { Double($0.ready) * scale }, bottom: bottom, fill: Self.readyFill)
      }
      // Items of this queue that ended without running, one mark per three-pixel column.
      var marked = Set<Int>()
      for event in events where event.queue == queue.name && !event.ran && event.isComplete {
        let mx = x(seconds(event.end))
        guard marked.insert(Int(mx / 3)).inserted else { continue }
        let color = event.outcome == .failed ? Self.failedFill : "#8c8178"
        out += cross(x: mx, y: top + 8, color: color)
      }
    }

    // Lanes.
    var laneItems = Array(repeating: 0, count: threadIndex.count)
    var laneBusy = Array(repeating: 0.0, count: threadIndex.count)
    for event in ran {
      laneItems[threadIndex[event.thread]!] += 1
      laneBusy[threadIndex[event.thread]!] += secondsValue(event.duration)
    }
    for lane in 0..<threadIndex.count {
      let top = lanesTop + Double(lane) * (laneHeight + laneGap)
      out += "<rect x=\"\(Self.number(left))\" y=\"\(Self.number(top))\" width=\"\(Self.number(plotWidth))\" "
      out += "height=\"\(Self.number(laneHeight))\" fill=\"\(lane % 2 == 0 ? "#f4f4f4" : "#fbfbfb")\"/>\n"
      out += "<text x=\"\(Self.number(left - 8))\" y=\"\(Self.number(top + 12))\" text-anchor=\"end\" "
      out += "fill=\"#333333\">thread \(lane + 1)</text>\n"
      let share = Int((100 * laneBusy[lane] / span).rounded())
      out += "<text x=\"\(Self.number(left - 8))\" y=\"\(Self.number(top + 23))\" text-anchor=\"end\" font-size=\"9\" "
      out +=
        "fill=\"#777777\">\(groupedText(laneItems[lane])) item\(laneItems[lane] == 1 ? "" : "s"), \(share)% busy</text>\n"
    }
    let columnCount = Int((plotWidth / Self.thinBar).rounded(.up)) + 1
    let columnSeconds = span * Self.thinBar / plotWidth
    // Busy seconds of thin bars per lane, column and stage (allocated when the first thin bar appears).
    var thin: [Double] = []
    var thinLanes = Set<Int>()
    for event in ran {
      let lane = threadIndex[event.thread]!
      let top = lanesTop + Double(lane) * (laneHeight + laneGap)
      let start = seconds(event.start)
      let end = max(start, seconds(event.end))
      let x0 = x(start)
      var barWidth = x(end) - x0
      let color = colorIndex[keyOf(event)] ?? 0
      if drawWaitLines, event.start > event.enqueued {
        out += waitLine(from: x(seconds(event.enqueued)), to: x0, y: top + 3, color: Self.palette[color].fill)
      }
      if barWidth < Self.thinBar, !aggregate {
        barWidth = Self.thinBar * 0.75
      } else if barWidth < Self.thinBar {
        if thin.isEmpty { thin = Array(repeating: 0, count: threadIndex.count * columnCount * stages.count) }
        thinLanes.insert(lane)
        var column = max(0, min(columnCount - 1, Int(start / columnSeconds)))
        var from = start
        repeat {
          let to = min(end, Double(column + 1) * columnSeconds)
          thin[(lane * columnCount + column) * stages.count + color] += max(0, to - from)
          from = to
          column += 1
        } while from < end && column < columnCount
        continue
      }
      let fill: String
      let textColor: String
      switch event.outcome {
      case .failed: (fill, textColor) = (Self.failedFill, "#ffffff")
      case .cancelled: (fill, textColor) = (Self.cancelledFill, "#1a1a1a")
      default: (fill, textColor) = Self.palette[color]
      }
      let barTop = top + 6
      let barHeight = laneHeight - 8
      out += "<rect x=\"\(Self.number(x0))\" y=\"\(Self.number(barTop))\" width=\"\(Self.number(barWidth))\" "
      out += "height=\"\(Self.number(barHeight))\" fill=\"\(fill)\""
      if event.outcome == .running { out += " fill-opacity=\"0.55\"" }
      if barWidth >= 4 { out += " stroke=\"#ffffff\" stroke-width=\"0.75\"" }
      out += "><title>\(xmlEscaped(tooltip(event)))</title></rect>\n"
      if barWidth >= 24, let label = Self.fitted(event.name, room: barWidth - 6, size: 10) {
        out += "<text x=\"\(Self.number(x0 + 3))\" y=\"\(Self.number(barTop + 12.5))\" font-size=\"10\" "
        out += "fill=\"\(textColor)\">\(xmlEscaped(label))</text>\n"
      }
    }
    // Aggregated columns: the busy share of each stage, stacked from the bottom of the bar.
    let barHeight = laneHeight - 8
    for lane in thinLanes.sorted() {
      let barBottom = lanesTop + Double(lane) * (laneHeight + laneGap) + laneHeight - 2
      // (y, height) of each stage's segment in each column, in half pixels.
      var segments = Array(repeating: (y: 0.0, height: 0.0), count: columnCount * stages.count)
      for column in 0..<columnCount {
        var stacked = 0.0
        for stage in 0..<stages.count {
          let busy = thin[(lane * columnCount + column) * stages.count + stage]
          let height = min(barHeight - stacked, (busy / columnSeconds * barHeight * 2).rounded() / 2)
          stacked += height
          segments[column * stages.count + stage] = (barBottom - stacked, height)
        }
      }
      for stage in 0..<stages.count {
        var column = 0
        while column < columnCount {
          let segment = segments[column * stages.count + stage]
          var next = column + 1
          while next < columnCount, segments[next * stages.count + stage] == segment { next += 1 }
          if segment.height > 0 {
            out += "<rect x=\"\(Self.number(left + Double(column) * Self.thinBar))\" y=\"\(Self.number(segment.y))\" "
            out += "width=\"\(Self.number(Double(next - column) * Self.thinBar))\" "
            out += "height=\"\(Self.number(segment.height))\" fill=\"\(Self.palette[stage].fill)\"/>\n"
          }
          column = next
        }
      }
    }
    out += "</svg>\n"
    return out
  }

  enum LegendKind {
    case swatch(String)
    case waitLine
    case cross
  }

  func tooltip(_ event: WorkTraceEvent) -> String {
    var text =
      "\(event.name) (#\(event.id), \(event.queue)): \(event.outcome.label), ran \(durationText(event.duration))"
    text += ", waited \(durationText(event.waited))"
    if !event.dependencies.isEmpty {
      text += ", after #" + event.dependencies.map(String.init).joined(separator: ", #")
    }
    return text
  }

  func waitLine(from x0: Double, to x1: Double, y: Double, color: String) -> String {
    var out = "<line x1=\"\(Self.number(x0))\" y1=\"\(Self.number(y))\" x2=\"\(Self.number(x1))\" "
    out += "y2=\"\(Self.number(y))\" stroke=\"\(color)\" stroke-width=\"1.5\" stroke-opacity=\"0.8\"/>\n"
    out += "<line x1=\"\(Self.number(x0))\" y1=\"\(Self.number(y - 3))\" x2=\"\(Self.number(x0))\" "
    out += "y2=\"\(Self.number(y + 3))\" stroke=\"\(color)\" stroke-width=\"1.5\"/>\n"
    return out
  }

  func cross(x: Double, y: Double, color: String) -> String {
    let a = Self.number(x - 3.5)
    let b = Self.number(x + 3.5)
    let c = Self.number(y - 3.5)
    let d = Self.number(y + 3.5)
    return
      "<path d=\"M\(a) \(c)L\(b) \(d)M\(a) \(d)L\(b) \(c)\" stroke=\"\(color)\" stroke-width=\"1.8\" fill=\"none\"/>\n"
  }

  /// The most waiting items in each pixel column (peaks are never hidden by averaging).
  func waitingColumns(_ steps: [WaitingProfile.Step], origin: Duration, span: Double) -> [(total: Int, ready: Int)] {
    let count = Int(plotWidth.rounded(.up))
    var columns = Array(repeating: (total: 0, ready: 0), count: count)
    var index = 0
    var current = (total: 0, ready: 0)
    for column in 0..<count {
      var peak = current
      let columnEnd = Double(column + 1) / Double(count) * span
      while index < steps.count, secondsValue(steps[index].time - origin) < columnEnd {
        current = (steps[index].blocked + steps[index].ready, steps[index].ready)
        peak = (max(peak.total, current.total), max(peak.ready, current.ready))
        index += 1
      }
      columns[column] = peak
    }
    return columns
  }

  /// A filled step area of `heights` (one per pixel column) standing on `bottom`.
  func area(_ heights: [Double], bottom: Double, fill: String) -> String {
    guard heights.contains(where: { $0 > 0 }) else { return "" }
    var path = "M\(Self.number(left)) \(Self.number(bottom))"
    var previous = 0.0
    for (column, height) in heights.enumerated() where height != previous {
      let cx = Self.number(left + Double(column))
      path += "L\(cx) \(Self.number(bottom - previous))L\(cx) \(Self.number(bottom - height))"
      previous = height
    }
    path += "L\(Self.number(left + Double(heights.count))) \(Self.number(bottom - previous))"
    path += "L\(Self.number(left + Double(heights.count))) \(Self.number(bottom))Z"
    return "<path d=\"\(path)\" fill=\"\(fill)\"/>\n"
  }

  /// Tick positions every 1, 2 or 5 × 10ⁿ seconds, about `target` of them, with labels in a unit that fits.
  static func ticks(span: Double, target: Int) -> (values: [Double], label: (Double) -> String) {
    let raw = span / Double(target)
    var magnitude = 1e-9
    while magnitude * 10 <= raw { magnitude *= 10 }
    let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? magnitude * 10
    var values: [Double] = []
    var index = 0
    while Double(index) * step <= span * 1.0001 {
      values.append(Double(index) * step)
      index += 1
    }
    let (unit, name): (Double, String) =
      step >= 1 ? (1, "s") : step >= 1e-3 ? (1e-3, "ms") : step >= 1e-6 ? (1e-6, "µs") : (1e-9, "ns")
    return (values, { value in decimalText(value / unit, places: 0) + " " + name })
  }

  func emptyDocument() -> String {
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      + "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"80\" "
      + "viewBox=\"0 0 \(Int(width)) 80\" font-family=\"\(Self.font)\" font-size=\"12\">\n"
      + "<rect x=\"0\" y=\"0\" width=\"\(Int(width))\" height=\"80\" fill=\"#ffffff\"/>\n"
      + "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"#1a1a1a\">\(xmlEscaped(title))</text>\n"
      + "<text x=\"16\" y=\"52\" fill=\"#555555\">No work was recorded.</text>\n</svg>\n"
  }
}

/// The distinct values of `values`, in order of first appearance.
private func distinct(_ values: [String]) -> [String] {
  var seen = Set<String>()
  return values.filter { seen.insert($0).inserted }
}
