import Foundation
import Spindle
import SpindleTestSupport
import Testing
import TiltShift

// The SVG timeline rasterised by librsvg (`rsvg-convert`), decoded with TiltShift's PNG decoder, and checked
// pixel by pixel against the geometry the SVG declares. Lives here because this target can decode PNG.

/// `rsvg-convert`, if installed.
private let rsvgConvert = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first {
  FileManager.default.isExecutableFile(atPath: $0)
}

/// Rasterises `svg` with rsvg-convert into a PNG file in `folder`; returns the decoded image.
private func rasterise(_ svg: String, named name: String, in folder: URL) throws -> Image {
  let svgPath = folder.appendingPathComponent("\(name).svg")
  let pngPath = folder.appendingPathComponent("\(name).png")
  try Data(svg.utf8).write(to: svgPath)
  let process = Process()
  process.executableURL = URL(fileURLWithPath: rsvgConvert!)
  process.arguments = ["--format=png", "--output=\(pngPath.path)", svgPath.path]
  let errors = Pipe()
  process.standardError = errors
  try process.run()
  let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  process.waitUntilExit()
  #expect(process.terminationStatus == 0, "rsvg-convert failed: \(message)")
  #expect(message.isEmpty, "rsvg-convert warned: \(message)")
  return try ImageDecoder().decode(contentsOf: pngPath.path)
}

/// The RGB of pixel (x, y).
private func rgb(_ image: Image, _ x: Int, _ y: Int) -> (Int, Int, Int) {
  let pixel = image[x, y]
  let base = pixel.startIndex
  return (Int(pixel[base]), Int(pixel[base + 1]), Int(pixel[base + 2]))
}

private func hex(_ text: String) -> (Int, Int, Int) {
  let value = Int(text.dropFirst(), radix: 16)!
  return (value >> 16, (value >> 8) & 0xFF, value & 0xFF)
}

private func close(_ a: (Int, Int, Int), _ b: (Int, Int, Int), within tolerance: Int = 6) -> Bool {
  abs(a.0 - b.0) <= tolerance && abs(a.1 - b.1) <= tolerance && abs(a.2 - b.2) <= tolerance
}

/// The attributes of the `<rect ...>` whose tooltip starts with `title`.
private func barAttributes(in svg: String, titled title: String) -> [String: Double]? {
  guard let titleRange = svg.range(of: "><title>\(title)") else { return nil }
  let head = svg[..<titleRange.lowerBound]
  guard let open = head.range(of: "<rect ", options: .backwards) else { return nil }
  var attributes: [String: Double] = [:]
  for part in head[open.upperBound...].split(separator: " ") {
    let pair = part.split(separator: "=", maxSplits: 1)
    guard pair.count == 2 else { continue }
    attributes[String(pair[0])] = Double(pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
  }
  return attributes
}

private func events(count: Int, threads: Int, micros: Int64) -> [WorkTraceEvent] {
  (0..<count).map { index in
    let slot = Int64(index / threads)
    let start = Duration.microseconds(slot * micros + 2_000)
    let stage = ["decode", "filter", "encode"][index % 3]
    return WorkTraceEvent(
      id: index + 1, name: "\(stage) photo-\(index).jpg", queue: "pipeline", thread: UInt64(index % threads + 1),
      enqueued: .zero, start: start, end: start + .microseconds(micros * 9 / 10), outcome: .finished)
  }
}

@Suite("Timeline rasterised by librsvg", .offThePool)
struct TimelineRasterTests {
  @Test("rsvg-convert draws the bars where the SVG says, in their stage colours, on a white page")
  func rasterisesFewItems() throws {
    guard rsvgConvert != nil else {
      print("skipped: rsvg-convert is not installed (apt-get install librsvg2-bin) — SVG checked as XML only")
      return
    }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spindle-raster-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let svg = WorkTimeline(events: events(count: 9, threads: 3, micros: 30_000), title: "Nine photos", width: 900).svg()
    let image = try rasterise(svg, named: "few", in: folder)
    #expect(image.width == 900)
    #expect(svg.contains("height=\"\(image.height)\""))
    #expect(close(rgb(image, 2, image.height - 2), (255, 255, 255)))
    for (index, color) in [(0, "#4e79a7"), (1, "#f28e2b"), (2, "#59a14f"), (4, "#f28e2b")] {
      let stage = ["decode", "filter", "encode"][index % 3]
      let bar = try #require(barAttributes(in: svg, titled: "\(stage) photo-\(index).jpg"))
      // Sample inside the bar, away from its label (near the right end, low in the bar).
      let x = Int(bar["x"]! + bar["width"]! - 3)
      let y = Int(bar["y"]! + bar["height"]! - 2)
      #expect(close(rgb(image, x, y), hex(color)), "bar \(index) at (\(x), \(y)) is \(rgb(image, x, y))")
    }
    try keepForInspection(folder, "few")
  }

  @Test("rsvg-convert draws 30,000 aggregated items: busy lanes are filled with stage colours")
  func rasterisesThousands() throws {
    guard rsvgConvert != nil else {
      print("skipped: rsvg-convert is not installed (apt-get install librsvg2-bin) — SVG checked as XML only")
      return
    }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spindle-raster-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let svg = WorkTimeline(events: events(count: 30_000, threads: 4, micros: 40), title: "30,000 items").svg()
    let image = try rasterise(svg, named: "many", in: folder)
    #expect(image.width == 1200)
    // The middle of the last lane's plot is covered by the three stage colours (each lane cycles through them),
    // not by the lane's grey background.
    let laneBottom = image.height - 14 - 2 - 2
    let palette = ["#4e79a7", "#f28e2b", "#59a14f"].map(hex)
    var coloured = 0
    for x in stride(from: 300, to: 1100, by: 10) {
      let pixel = rgb(image, x, laneBottom - 3)
      if palette.contains(where: { close($0, pixel, within: 40) }) { coloured += 1 }
    }
    #expect(coloured >= 70, "only \(coloured) of 80 samples show a stage colour")
    try keepForInspection(folder, "many")
  }

  /// With SPINDLE_KEEP_PICTURES=<dir>, keeps the SVG and PNG to look at.
  private func keepForInspection(_ folder: URL, _ name: String) throws {
    guard let keep = ProcessInfo.processInfo.environment["SPINDLE_KEEP_PICTURES"] else { return }
    for ext in ["svg", "png"] {
      let target = URL(fileURLWithPath: keep).appendingPathComponent("\(name).\(ext)")
      try? FileManager.default.removeItem(at: target)
      try FileManager.default.copyItem(at: folder.appendingPathComponent("\(name).\(ext)"), to: target)
    }
  }
}
