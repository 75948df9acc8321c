import Foundation
import SpindleTestSupport
import Testing
import TiltShift

/// End-to-end: the pictures `spindle demo`, `tiltshift` and `tour` draw of their own runs.
@Suite(.serialized) struct ObservabilityCommandTests {
  @Test func demoWritesTimelinesAnIndexPageAndTheRequestedFiles() async throws {
    let root = try CLI.temporaryFolder()
    let output = root.appendingPathComponent("demo")
    let json = root.appendingPathComponent("run.json").path
    let svg = root.appendingPathComponent("run.svg").path
    let mermaid = root.appendingPathComponent("run.mmd").path
    let result = try await CLI.run([
      "demo", "--output", output.path, "--count", "2", "--size", "160x120", "--jobs", "2",
      "--trace", json, "--timeline", svg, "--graph", mermaid,
    ])
    #expect(result.status == 0, "\(result.stderr)")
    let index = output.appendingPathComponent("index.html").path
    #expect(result.stdout.contains(index))
    #expect(result.stdout.contains(output.appendingPathComponent("timeline-serial.svg").path))
    // Every relative link of the page resolves inside the folder, so it opens from disk.
    let html = try String(contentsOfFile: index, encoding: .utf8)
    let links = html.components(separatedBy: "src=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
    #expect(links.count == 2 + 2 * 2)
    for link in links {
      #expect(FileManager.default.fileExists(atPath: output.appendingPathComponent(String(link)).path), "\(link)")
    }
    #expect(html.contains("timeline-serial.svg") && html.contains("timeline-concurrent.svg"))
    for name in ["timeline-serial.svg", "timeline-concurrent.svg"] {
      let text = try String(contentsOfFile: output.appendingPathComponent(name).path, encoding: .utf8)
      #expect(text.contains("<svg ") && text.contains("6 items · 1 queue "), "\(name)")
    }
    // The requested files describe the concurrent run: 2 photos × decode, filter, encode.
    let trace = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json)))
    let events = try #require((trace as? [String: Any])?["traceEvents"] as? [[String: Any]])
    #expect(events.filter { $0["ph"] as? String == "X" }.count == 6)
    #expect(events.filter { $0["ph"] as? String == "s" }.count == 4)
    #expect(try String(contentsOfFile: svg, encoding: .utf8).contains("spindle demo, concurrent run: 2 photos"))
    let graph = try String(contentsOfFile: mermaid, encoding: .utf8)
    #expect(graph.hasPrefix("flowchart LR"))
    #expect(graph.components(separatedBy: " --> ").count - 1 == 4)
  }

  @Test func tiltshiftWritesItsTraceAndReportsAnUnwritableOneWithoutLosingOutputs() async throws {
    let root = try CLI.temporaryFolder()
    let photo = root.appendingPathComponent("photo.jpg")
    try TiltShiftCommandTests.writePhoto(photo, seed: 7)
    let out = root.appendingPathComponent("out")
    let dot = root.appendingPathComponent("graph.dot").path
    let good = try await CLI.run(["tiltshift", photo.path, "-o", out.path, "--graph", dot])
    #expect(good.status == 0, "\(good.stderr)")
    let text = try String(contentsOfFile: dot, encoding: .utf8)
    #expect(text.contains("decode photo.jpg") && text.contains(" -> "))

    let missing = root.appendingPathComponent("no/such/folder/t.svg").path
    let bad = try await CLI.run(["tiltshift", photo.path, "-o", out.path, "--overwrite", "--timeline", missing])
    #expect(bad.status == 1)
    #expect(bad.stderr.contains(missing))
    #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent("photo-tiltshift.jpg").path))

    let empty = try await CLI.run(["tiltshift", photo.path, "-o", out.path, "--trace="])
    #expect(empty.status == 2)
  }

  @Test func tourPipelineDrawsItsTimeline() async throws {
    let root = try CLI.temporaryFolder()
    let result = try await CLI.run(["tour", "pipeline", "--timeline", root.path])
    #expect(result.status == 0, "\(result.stderr)")
    let text = try String(contentsOfFile: root.appendingPathComponent("tour-pipeline.svg").path, encoding: .utf8)
    #expect(text.contains("18 items · 1 queue"))
    #expect(text.contains("ended without running"))
  }

  /// Every tour page that compares serial and concurrent work — on WorkQueue or on Dispatch — draws its timelines.
  @Test(arguments: [
    ("queue", ["tour-queue-width1.svg": "4 items · 1 queue", "tour-queue-width2.svg": "4 items · 1 queue"]),
    ("pipeline", ["tour-pipeline.svg": "18 items · 1 queue"]),
    ("gcd", ["tour-gcd-serial.svg": "4 items · 1 queue · 1 thread", "tour-gcd-concurrent.svg": "4 items · 1 queue"]),
    ("barrier", ["tour-barrier-unprotected.svg": "2,000 items · 1 queue", "tour-barrier-isolated.svg": "2,000 items"]),
  ])
  func tourPagesComparingSerialAndConcurrentWorkDrawTheirTimelines(page: String, files: [String: String])
    async throws
  {
    let root = try CLI.temporaryFolder()
    defer { try? FileManager.default.removeItem(at: root) }
    let result = try await CLI.run(["tour", page, "--timeline", root.path])
    #expect(result.status == 0, "\(result.stderr)")
    for (name, summary) in files {
      let path = root.appendingPathComponent(name).path
      #expect(result.stdout.contains("timeline: \(path)"), "the page says where: \(result.stdout)")
      let data = try Data(contentsOf: URL(fileURLWithPath: path))
      let svg = XMLShape(data)
      #expect(svg.error == nil, "\(name) is well-formed XML: \(String(describing: svg.error))")
      #expect(svg.names.first == "svg", "\(name)")
      #expect(svg.names.filter { $0 == "rect" }.count > 4, "\(name) has bars")
      #expect(String(decoding: data, as: UTF8.self).contains(summary), "\(name): \(summary)")
    }
  }
}
