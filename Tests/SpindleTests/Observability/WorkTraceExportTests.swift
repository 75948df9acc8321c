import Foundation
import SpindleTestSupport
import Testing

@testable import Spindle

/// Runs `tool arguments...` with `input` on stdin; nil when the tool is not installed.
func runTool(_ tool: String, _ arguments: [String], input: Data = Data()) throws -> (status: Int32, output: Data)? {
  let candidates = ["/usr/bin/\(tool)", "/usr/local/bin/\(tool)", "/bin/\(tool)"]
  guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
  let process = Process()
  process.executableURL = URL(fileURLWithPath: path)
  process.arguments = arguments
  let stdin = Pipe()
  let stdout = Pipe()
  process.standardInput = stdin
  process.standardOutput = stdout
  process.standardError = FileHandle.nullDevice
  try process.run()
  let writer = Thread {
    stdin.fileHandleForWriting.write(input)
    try? stdin.fileHandleForWriting.close()
  }
  writer.start()
  let output = stdout.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  return (process.terminationStatus, output)
}

/// `count` synthetic items on `threads` threads, back to back, each `micros` long, in three stages.
func syntheticEvents(count: Int, threads: Int, micros: Int64) -> [WorkTraceEvent] {
  (0..<count).map { index in
    let lane = index % threads
    let slot = Int64(index / threads)
    let start = Duration.microseconds(slot * micros)
    let stage = ["decode", "filter", "encode"][index % 3]
    return WorkTraceEvent(
      id: index + 1, name: "\(stage) photo-\(index).jpg", queue: stage == "filter" ? "filter" : "codec",
      thread: UInt64(lane + 100), enqueued: .zero, start: start, end: start + .microseconds(micros),
      outcome: index % 97 == 5 ? .failed : .finished,
      dependencies: index >= threads ? [index + 1 - threads] : [])
  }
}

@Suite("WorkTrace exports")
struct WorkTraceExportTests {
  @Test("Chrome trace JSON parses: one slice per body, flow arrows per edge, thread names, waiting counters")
  func chromeTrace() async throws {
    let (trace, byName) = try await recordedPipeline()
    let json = trace.chromeTraceJSON()
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    let events = try #require(object["traceEvents"] as? [[String: Any]])
    let slices = events.filter { $0["ph"] as? String == "X" }
    let instants = events.filter { $0["ph"] as? String == "i" }
    #expect(slices.count == trace.items.filter(\.ran).count)
    #expect(instants.count == trace.items.filter { !$0.ran }.count)
    let decode = try #require(slices.first { $0["name"] as? String == "decode 2" })
    let args = try #require(decode["args"] as? [String: Any])
    #expect(args["id"] as? Int == byName["decode 2"]!.id)
    #expect(args["queue"] as? String == "codec")
    #expect(args["attempts"] as? Int == 1)
    #expect((decode["dur"] as? Double ?? 0) >= 3000)
    let blurArgs = try #require(slices.first { $0["name"] as? String == "filter 2" }?["args"] as? [String: Any])
    #expect(blurArgs["dependencies"] as? [Int] == [byName["decode 2"]!.id])
    // The waiting counter is the event's wait (added → started), and it covers the dependency's run: the filter
    // could not start before its decode ended. (Not "at least the decode's 3 ms": the decode may start before the
    // filter is added, on a loaded machine well before.)
    let blurEvent = byName["filter 2"]!
    let decodeEvent = byName["decode 2"]!
    func micros(_ duration: Duration) -> Double {
      Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }
    let waited = blurArgs["waited_us"] as? Double ?? -1
    #expect(abs(waited - micros(blurEvent.waited)) < 0.01, "waited_us \(waited), the event's \(blurEvent.waited)")
    #expect(waited >= micros(decodeEvent.end - max(blurEvent.enqueued, decodeEvent.start)) - 0.01)
    #expect(waited > 0)
    // Flow arrows: a start and a finish per edge between bodies that ran (3 × 2 edges), on the right threads.
    let starts = events.filter { $0["ph"] as? String == "s" }
    let finishes = events.filter { $0["ph"] as? String == "f" }
    #expect(starts.count == 6 && finishes.count == 6)
    #expect(Set(starts.compactMap { $0["id"] as? Int }) == Set(finishes.compactMap { $0["id"] as? Int }))
    for finish in finishes { #expect(finish["bp"] as? String == "e") }
    let threadNames = events.filter { $0["name"] as? String == "thread_name" }
    let usedThreads = Set(slices.compactMap { $0["tid"] as? Int })
    #expect(Set(threadNames.compactMap { $0["tid"] as? Int }).isSuperset(of: usedThreads))
    // Each flow binds inside the slice on its thread: its timestamp lies within a slice of that thread.
    for flow in starts + finishes {
      let tid = flow["tid"] as? Int
      let ts = flow["ts"] as? Double ?? -1
      #expect(
        slices.contains {
          $0["tid"] as? Int == tid && ($0["ts"] as! Double) <= ts
            && ts <= ($0["ts"] as! Double) + ($0["dur"] as! Double)
        })
    }
    let counters = events.filter { $0["ph"] as? String == "C" }
    #expect(Set(counters.compactMap { $0["name"] as? String }) == ["waiting · codec", "waiting · filter"])
    // Every item leaves the waiting count: each queue's counter ends at zero.
    for name in ["waiting · codec", "waiting · filter"] {
      let last = try #require(counters.last { $0["name"] as? String == name }?["args"] as? [String: Int])
      #expect(last.values.reduce(0, +) == 0)
    }
  }

  @Test("DOT: Graphviz lays it out (or, without Graphviz, every edge joins declared nodes)")
  func graphvizDOT() async throws {
    let (trace, byName) = try await recordedPipeline()
    let dot = trace.graphDOT(title: "pipeline \"one\"")
    #expect(dot.hasPrefix("digraph \"pipeline \\\"one\\\"\" {"))
    let decode = byName["decode 1"]!
    let blur = byName["filter 1"]!
    #expect(dot.contains("n\(decode.id) -> n\(blur.id);"))
    #expect(dot.contains("label=\"decode 1\\nfinished · "))
    #expect(dot.contains("label=\"filter broken\\nfailed · did not run\""))
    let declared = Set(
      dot.split(separator: "\n").compactMap { line -> String? in
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("n"), trimmed.contains(" [label=") else { return nil }
        #expect(trimmed.contains("tooltip=\"queue codec\"") || trimmed.contains("tooltip=\"queue filter\""))
        return String(trimmed.prefix { $0 != " " })
      })
    #expect(declared.count == 14)
    let edges = dot.split(separator: "\n").filter { $0.contains(" -> ") }
    #expect(edges.count == 7)
    for edge in edges {
      let ends = edge.trimmingCharacters(in: .whitespaces).dropLast().components(separatedBy: " -> ")
      #expect(ends.count == 2 && declared.contains(ends[0]) && declared.contains(ends[1]))
    }
    if let (status, output) = try runTool("dot", ["-Tsvg"], input: Data(dot.utf8)) {
      #expect(status == 0)
      let svg = XMLShape(output)
      #expect(svg.error == nil)
      #expect(svg.elements.filter { $0.attributes["class"] == "node" }.count == 14)
      #expect(svg.elements.filter { $0.attributes["class"] == "edge" }.count == 7)
    } else {
      print("graphviz not installed: checked the DOT's structure only (apt-get install graphviz for the real parser)")
    }
  }

  @Test("Mermaid: a flowchart with a node per item, its state and duration, an arrow per edge, classes per state")
  func mermaid() async throws {
    let (trace, byName) = try await recordedPipeline()
    let text = trace.graphMermaid()
    let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
    #expect(lines.first == "flowchart LR")
    let nodes = lines.filter { $0.hasPrefix("n") && $0.contains("[\"") }
    #expect(nodes.count == 14)
    let decode = byName["decode 3"]!
    #expect(nodes.contains { $0.hasPrefix("n\(decode.id)[\"decode 3<br/>finished · ") && $0.hasSuffix(":::finished") })
    #expect(nodes.contains { $0.contains("filter cancelled<br/>cancelled · did not run") })
    #expect(lines.filter { $0.contains(" --> ") }.count == 7)
    #expect(lines.filter { $0.hasPrefix("classDef ") }.count == 6)
    // Quotes and markup in names cannot break out of the label.
    let odd = WorkTrace.graphMermaid([
      WorkTraceEvent(
        id: 1, name: "say \"hi\" <b>#1</b>", queue: "q", thread: 1, enqueued: .zero, start: .zero,
        end: .milliseconds(1), outcome: .finished)
    ])
    #expect(odd.contains("n1[\"say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt;<br/>finished · 1.00 ms\"]:::finished"))
  }

  @Test("SVG timeline of a real run: valid XML, a bar per body, lanes, axis, legend, waiting strips")
  func timelineOfRealRun() async throws {
    let (trace, _) = try await recordedPipeline()
    let svg = WorkTimeline(trace: trace, title: "Pipeline <test> & co").svg()
    let shape = XMLShape(Data(svg.utf8))
    #expect(shape.error == nil)
    #expect(shape.elements.first?.name == "svg")
    let bars = shape.elements.filter { $0.name == "rect" && $0.attributes["fill"] != nil }
    let ran = trace.items.filter(\.ran)
    // Every body is a bar with a tooltip (none is thin enough to be aggregated at this scale).
    #expect(svg.components(separatedBy: "<title>").count - 1 == ran.count + 1)
    #expect(bars.count > ran.count)
    #expect(shape.text.contains("Pipeline <test> & co"))
    #expect(shape.text.contains("14 items · 2 queues"))
    for label in [
      "decode", "filter", "encode", "failed", "waiting for dependencies", "ready, waiting for a slot",
      "added → started", "ended without running", "thread 1", "codec", "filter", "waiting, peak",
    ] {
      #expect(shape.text.contains(label), "missing \(label)")
    }
    #expect(shape.text.contains(" ms"))
    // Lanes: one per thread that ran a body.
    let threads = Set(ran.map(\.thread)).count
    #expect(shape.text.contains("thread \(threads)"))
    #expect(!shape.text.contains("thread \(threads + 1)"))
  }

  @Test("SVG timeline of 20,000 items stays small and readable: thin bars are aggregated per column", .offThePool)
  func timelineOfThousands() throws {
    let events = syntheticEvents(count: 20_000, threads: 4, micros: 50)
    let svg = WorkTimeline(events: events, title: "20,000 items").svg()
    #expect(svg.utf8.count < 400_000, "the SVG grew with the item count: \(svg.utf8.count) bytes")
    let shape = XMLShape(Data(svg.utf8))
    #expect(shape.error == nil)
    // No per-item tooltips or wait lines: the columns carry the picture.
    #expect(!svg.contains("<title>decode"))
    #expect(!shape.text.contains("added → started"))
    #expect(shape.text.contains("5,000 items, 100% busy"))
    // Axis: the span is 250 ms; ticks are round numbers of milliseconds.
    #expect(shape.text.contains("0 ms") && shape.text.contains("100 ms") && shape.text.contains("200 ms"))
    // A few items are still drawn one by one, with labels that fit their bars.
    let few = WorkTimeline(events: syntheticEvents(count: 6, threads: 2, micros: 40_000), title: "six").svg()
    let fewShape = XMLShape(Data(few.utf8))
    #expect(fewShape.error == nil)
    #expect(fewShape.text.contains("decode photo-0.jpg"))
    #expect(few.components(separatedBy: "<title>").count - 1 == 7)
  }

  @Test("files are written whole, and a bad path throws an error naming it without leaving anything")
  func writesFiles() async throws {
    let (trace, _) = try await recordedPipeline()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spindle-export-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let json = folder.appendingPathComponent("t.json").path
    let svg = folder.appendingPathComponent("t.svg").path
    let dot = folder.appendingPathComponent("t.dot").path
    let mmd = folder.appendingPathComponent("t.mmd").path
    try trace.write(toFile: json)
    try trace.writeTimeline(toFile: svg, title: "t")
    try trace.writeGraph(toFile: dot)
    try trace.writeGraph(toFile: mmd)
    #expect(try String(contentsOfFile: json, encoding: .utf8).hasPrefix("{\"traceEvents\":["))
    #expect(try String(contentsOfFile: svg, encoding: .utf8).contains("<svg "))
    #expect(try String(contentsOfFile: dot, encoding: .utf8).hasPrefix("digraph"))
    #expect(try String(contentsOfFile: mmd, encoding: .utf8).hasPrefix("flowchart LR"))
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [
        "t.dot", "t.json", "t.mmd", "t.svg",
      ])
    let bad = folder.appendingPathComponent("missing/t.svg").path
    let error = #expect(throws: WorkTraceError.self) { try trace.writeTimeline(toFile: bad) }
    #expect(error?.description.contains(bad) == true)
    #expect(error?.description.contains("No such file") == true)
  }

  @Test("an empty trace still gives valid files")
  func emptyTrace() throws {
    let trace = WorkTrace()
    #expect(XMLShape(Data(WorkTimeline(trace: trace).svg().utf8)).error == nil)
    #expect(try JSONSerialization.jsonObject(with: Data(trace.chromeTraceJSON().utf8)) is [String: Any])
    #expect(
      trace.graphDOT() == "digraph \"work\" {\n  rankdir=LR;\n"
        + "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
        + "  edge [color=\"#777777\"];\n}\n")
  }
}
