import Dispatch
import Foundation
import TiltShift

/// Tilt-shift on a batch of large photos: TiltShift's stages one by one, the whole job, and the same
/// job done by libvips and ImageMagick on the same files in the same run (when they are installed).
package let tiltShiftBenchmarkSuite = BenchmarkSuite(
  name: "tiltshift",
  summary: "decode → tilt-shift → encode on 8 × 12 MP JPEGs, against libvips and ImageMagick"
) { options in
  try TiltShiftBenchmark(options: options).run()
}

/// The work behind ``tiltShiftBenchmarkSuite``.
struct TiltShiftBenchmark {
  let options: BenchmarkOptions
  let imageCount: Int
  let width: Int
  let height: Int
  let runs: Int
  let bands = TiltShiftFilter.defaultBandCount
  let parameters = TiltShiftParameters.standard
  let quality = 90

  init(options: BenchmarkOptions) {
    self.options = options
    imageCount = options.quick ? 2 : 8
    (width, height) = options.quick ? (2000, 1500) : (4000, 3000)
    runs = max(1, min(options.runs, options.quick ? 3 : 5))
  }

  var megapixels: Double { Double(width * height) / 1e6 }

  func run() throws -> BenchmarkReport {
    var report = BenchmarkReport(suite: "tiltshift")
    let folder = try makeFolder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let inputs = try (0..<imageCount).map { index in
      let path = folder + "/photo-\(index).jpg"
      let image = PhotoGenerator(width: width, height: height, seed: UInt32(index + 1)).make()
      try ImageFile.writeAtomically(ImageEncoder(format: .jpeg, jpegQuality: quality).encode(image), to: path)
      return path
    }
    let batch = "\(imageCount) × \(String(format: "%.0f", megapixels)) MP"
    func add(_ scenario: String, _ results: [(String, Measured)], items: Int) {
      for (index, (contender, measured)) in results.enumerated() {
        let rate = Double(items) * megapixels / measured.wall.median
        report.results.append(
          BenchmarkResult(
            scenario: scenario, contender: contender, sample: measured.wall, items: items, isBaseline: index == 0,
            note: index == 0
              ? String(format: "%.1f MP/s, cpu %.2f s", rate, measured.cpu)
              : String(format: "%.1f MP/s, cpu %.2f s (%.2fx)", rate, measured.cpu, measured.cpuRatio)))
      }
    }

    // Stages, one image at a time.
    let decoder = ImageDecoder()
    let encoder = ImageEncoder(format: .jpeg, jpegQuality: quality)
    let files = try inputs.map { try ImageFile.read($0) }
    add(
      "decode \(batch)",
      try interleaved([
        ("libjpeg-turbo (TiltShift)", .inProcess, { for bytes in files { _ = try decoder.decode(bytes) } })
      ]),
      items: imageCount)
    let images = try files.map { try decoder.decode($0) }
    let filter = TiltShiftFilter(parameters: parameters)
    add(
      "filter \(batch)",
      try interleaved([
        ("TiltShift, 1 band", .inProcess, { for image in images { _ = filter.apply(to: image, bands: 1) } }),
        (
          "TiltShift, \(bands) bands", .inProcess, { for image in images { _ = filter.apply(to: image, bands: bands) } }
        ),
      ]),
      items: imageCount)
    let filtered = images.map { filter.apply(to: $0) }
    add(
      "encode \(batch)",
      try interleaved([
        ("libjpeg-turbo (TiltShift)", .inProcess, { for image in filtered { _ = try encoder.encode(image) } })
      ]),
      items: imageCount)

    // The whole job, file in → file out, against the peers on the same files.
    let outputs = folder + "/out"
    try FileManager.default.createDirectory(atPath: outputs, withIntermediateDirectories: true)
    // Every in-process contender decodes (and filters) into buffers its earlier images left, as
    // `TiltShiftBatch` does, so that the rows compare schedules and not fresh pages: one pool per run.
    func pool() -> PixelBufferPool { PixelBufferPool(maxBuffers: 2 * bands + 2, maxBytes: .max) }
    @Sendable func decode(_ index: Int, _ buffers: PixelBufferPool?) throws -> Image {
      var warnings: [String] = []
      return try decoder.decode(try ImageFile.read(inputs[index]), warnings: &warnings, reusing: buffers)
    }
    @Sendable func job(_ index: Int, bands: Int, _ buffers: PixelBufferPool? = nil) throws {
      // In place over the decoded pixels, as the batch filters.
      let filtered = filter.apply(consuming: try decode(index, buffers), bands: bands, scratchFrom: buffers)
      try ImageFile.writeAtomically(try encoder.encode(filtered), to: outputs + "/photo-\(index).jpg")
      buffers?.giveBack((consume filtered).pixels)
    }
    let mask = folder + "/mask.png"
    try ImageFile.writeAtomically(
      ImageEncoder(format: .png).encode(Self.maskImage(width, height, parameters)), to: mask)
    let peers = PeerTools()
    report.notes.append(contentsOf: peers.notes)
    let script = folder + "/tiltshift.py"
    try Data(Self.pyvipsScript.utf8).write(to: URL(fileURLWithPath: script))
    func pyvips(_ python: String, _ indices: Range<Int>) throws {
      var arguments = [script, "\(parameters.radius)", "\(quality)", mask]
      for index in indices { arguments += [inputs[index], outputs + "/pyvips-\(index).jpg"] }
      try Self.runTool(python, arguments)
    }
    func vipsCLI(_ vips: String, _ indices: Range<Int>) throws {
      for index in indices {
        try vipsJob(vips, inputs[index], mask, outputs + "/vips-\(index).jpg", folder + "/blur-\(index).v")
      }
    }

    // The floor: the same files through the same libjpeg-turbo, decoded and encoded again with no filter,
    // as many at once as there are cores (the codecs are single-threaded, so this is their best schedule),
    // decoding into reused buffers like the contenders.
    @Sendable func codecOnly(_ index: Int, _ buffers: PixelBufferPool) throws {
      let decoded = try decode(index, buffers)
      try ImageFile.writeAtomically(try encoder.encode(decoded), to: outputs + "/floor-\(index).jpg")
      buffers.giveBack((consume decoded).pixels)
    }
    var whole: [(String, Contender.Kind, () throws -> Void)] = [
      (
        "floor: libjpeg-turbo decode + encode only, \(bands) at once", .inProcess,
        {
          let buffers = pool()
          try Self.concurrently(inputs.count, width: bands) { try codecOnly($0, buffers) }
        }
      ),
      (
        "TiltShift, images in turn, \(bands) bands", .inProcess,
        {
          let buffers = pool()
          for index in inputs.indices { try job(index, bands: bands, buffers) }
        }
      ),
      (
        "TiltShift, \(bands) images at once, 1 band", .inProcess,
        {
          let buffers = pool()
          try Self.concurrently(inputs.count, width: bands) { try job($0, bands: 1, buffers) }
        }
      ),
      (
        "TiltShift, serial (1 band, images in turn)", .inProcess,
        {
          let buffers = pool()
          for index in inputs.indices { try job(index, bands: 1, buffers) }
        }
      ),
      (
        "TiltShiftBatch on WorkQueue (spindle tiltshift)", .inProcess,
        {
          let items = inputs.indices.map { BatchItem(input: inputs[$0], output: outputs + "/batch-\($0).jpg") }
          var configuration = BatchConfiguration(filter: filter, jpegQuality: quality)
          configuration.replaceExisting = true
          let summary = TiltShiftBatch(items: items, configuration: configuration).runAndWait()
          guard summary.progress.succeeded == items.count else {
            throw BenchmarkToolError(description: "TiltShiftBatch: \(summary.progress.failed) files failed")
          }
        }
      ),
    ]
    if let python = peers.pyvips {
      whole.append(
        (
          "libvips \(peers.vipsVersion) (pyvips: gaussblur + ifthenelse blend)", .external,
          { try pyvips(python, inputs.indices) }
        ))
    } else if let vips = peers.vips {
      whole.append(
        (
          "libvips \(peers.vipsVersion) (CLI: gaussblur + ifthenelse --blend)", .external,
          { try vipsCLI(vips, inputs.indices) }
        ))
    }
    add("whole job \(batch)", try interleaved(whole), items: imageCount)

    // One image, with the slow peers: ImageMagick takes many seconds per image.
    var one: [(String, Contender.Kind, () throws -> Void)] = [
      ("TiltShift, \(bands) bands", .inProcess, { try job(0, bands: bands) })
    ]
    if let python = peers.pyvips { one.append(("libvips (pyvips)", .external, { try pyvips(python, 0..<1) })) }
    if let vips = peers.vips { one.append(("libvips (CLI, 2 commands)", .external, { try vipsCLI(vips, 0..<1) })) }
    if let convert = peers.convert {
      let arguments = [
        inputs[0], "(", "+clone", "-blur", "0x\(parameters.radius)", ")", mask, "-composite", "-quality", "\(quality)",
        outputs + "/magick-0.jpg",
      ]
      one.append(
        (
          "ImageMagick \(peers.convertVersion) (convert -blur -composite)", .external,
          { try Self.runTool(convert, arguments) }
        ))
    }
    if one.count > 1 {
      add("one \(String(format: "%.0f", megapixels)) MP image", try interleaved(one, runs: min(runs, 3)), items: 1)
    }
    report.notes.append(
      "radius \(parameters.radius) (box width \(parameters.boxWidth)), band \(parameters.clearBand), JPEG quality "
        + "\(quality); \(ProcessInfo.processInfo.activeProcessorCount) cores; photos made procedurally; filter kernels: "
        + "\(FilterKernelVariant.current)")
    report.notes.append(
      "contenders run interleaved (one run of each in turn) so load changes hit all alike; cpu = median CPU "
        + "seconds per run (user + system, children's for external tools), steadier than wall time on a busy machine; "
        + "(N.NNx) = median over rounds of its CPU seconds over the baseline's in the same round")
    return report
  }

  /// A measured contender: wall-time statistics and the median CPU seconds per run.
  struct Measured {
    var wall: Sample
    var cpu: Double
    /// The median over rounds of this contender's CPU seconds divided by the first contender's in the same round.
    var cpuRatio: Double
  }

  enum Contender {
    /// Where a contender's CPU time is counted.
    enum Kind {
      case inProcess
      case external
    }
  }

  /// Runs every contender once per round, `runs` rounds after one warm-up round, and returns each one's timings.
  private func interleaved(
    _ contenders: [(String, Contender.Kind, () throws -> Void)], runs: Int? = nil
  ) throws -> [(String, Measured)] {
    let rounds = runs ?? self.runs
    var walls = Array(repeating: [Double](), count: contenders.count)
    var cpus = Array(repeating: [Double](), count: contenders.count)
    let clock = ContinuousClock()
    for round in -1..<rounds {
      for (index, contender) in contenders.enumerated() {
        let cpuStart = Self.cpuSeconds(contender.1)
        let start = clock.now
        try contender.2()
        let wall = (clock.now - start).secondsValue
        let cpu = Self.cpuSeconds(contender.1) - cpuStart
        if round >= 0 {
          walls[index].append(wall)
          cpus[index].append(cpu)
        }
      }
    }
    return contenders.indices.map { index in
      let ratios = zip(cpus[index], cpus[0]).map { $1 > 0 ? $0 / $1 : 0 }
      return (
        contenders[index].0,
        Measured(wall: Sample(walls[index]), cpu: Sample(cpus[index]).median, cpuRatio: Sample(ratios).median)
      )
    }
  }

  /// User + system CPU seconds of this process, or of its finished children.
  private static func cpuSeconds(_ kind: Contender.Kind) -> Double {
    var usage = rusage()
    #if os(Linux)
      getrusage(kind == .inProcess ? RUSAGE_SELF.rawValue : RUSAGE_CHILDREN.rawValue, &usage)
    #else
      getrusage(kind == .inProcess ? RUSAGE_SELF : RUSAGE_CHILDREN, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
  }

  /// The libvips job in one Python process: load, Gaussian blur, blend through the mask, save.
  static let pyvipsScript = """
    import sys
    import pyvips
    sigma, quality, mask_path = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    mask = pyvips.Image.new_from_file(mask_path)
    pairs = sys.argv[4:]
    for source, target in zip(pairs[0::2], pairs[1::2]):
        image = pyvips.Image.new_from_file(source, access="sequential")
        blurred = image.gaussblur(sigma)
        mask.ifthenelse(blurred, image, blend=True).write_to_file(target, Q=quality)
    """

  /// The libvips job for one file: Gaussian blur to a temporary `.v` file, then a mask blend.
  private func vipsJob(_ vips: String, _ input: String, _ mask: String, _ output: String, _ blur: String) throws {
    try Self.runTool(vips, ["gaussblur", input, blur, "\(parameters.radius)"])
    try Self.runTool(vips, ["ifthenelse", mask, blur, input, output + "[Q=\(quality)]", "--blend"])
    try? FileManager.default.removeItem(atPath: blur)
  }

  private func makeFolder() throws -> String {
    let path = NSTemporaryDirectory() + "/spindle-tiltshift-bench-\(getpid())"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  /// The filter's mask as a gray image (white = blurred), for the peers' blend.
  static func maskImage(_ width: Int, _ height: Int, _ parameters: TiltShiftParameters) -> Image {
    // A flat white image filtered through a black one would be circular; build it from the parameters.
    let b0 = parameters.clearBand.lowerBound
    let b1 = parameters.clearBand.upperBound
    let mid = (b0 + b1) / 2
    let inner = parameters.innerIntensity
    var pixels = [UInt8](repeating: 0, count: width * height)
    for y in 0..<height {
      let t = (Double(y) + 0.5) / Double(height)
      let level: Double
      switch t {
      case ...b0: level = 1 + (inner - 1) * t / max(b0, 1e-9)
      case ...mid: level = inner - inner * (t - b0) / max(mid - b0, 1e-9)
      case ...b1: level = inner * (t - mid) / max(b1 - mid, 1e-9)
      default: level = inner + (1 - inner) * (t - b1) / max(1 - b1, 1e-9)
      }
      let value = UInt8((level * 255).rounded())
      for x in 0..<width { pixels[y * width + x] = value }
    }
    return Image(width: width, height: height, layout: .gray, pixels: pixels)
  }

  /// Runs `body(0..<count)` with at most `width` at once.
  static func concurrently(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let failures = Failures()
    let next = Counter()
    DispatchQueue.concurrentPerform(iterations: min(width, count)) { _ in
      while case let index = next.take(), index < count {
        do { try body(index) } catch { failures.record(error) }
      }
    }
    if let error = failures.first { throw error }
  }

  static func runTool(_ tool: String, _ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let text = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw BenchmarkToolError(
        description: "\(tool) \(arguments.joined(separator: " ")): \(String(decoding: text, as: UTF8.self))")
    }
  }
}

struct BenchmarkToolError: Error, CustomStringConvertible {
  var description: String
}

/// A shared index for `concurrently`.
// Safety: every access holds `lock`.
private final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var value = 0
  func take() -> Int {
    lock.lock()
    defer { lock.unlock() }
    value += 1
    return value - 1
  }
}

/// The first error of `concurrently`.
// Safety: every access holds `lock`.
private final class Failures: @unchecked Sendable {
  private let lock = NSLock()
  private var errors: [any Error] = []
  func record(_ error: any Error) {
    lock.lock()
    errors.append(error)
    lock.unlock()
  }
  var first: (any Error)? {
    lock.lock()
    defer { lock.unlock() }
    return errors.first
  }
}

/// Finds `vips` and a real ImageMagick `convert` (not a stand-in earlier on the PATH).
struct PeerTools {
  var vips: String?
  var vipsVersion = ""
  var convert: String?
  var convertVersion = ""
  /// A Python that can `import pyvips`.
  var pyvips: String?
  var notes: [String] = []

  init() {
    let environment = ProcessInfo.processInfo.environment
    let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init) + ["/usr/bin"]
    for folder in path where vips == nil {
      let candidate = folder + "/vips"
      if let version = Self.version(candidate, ["--version"]), version.hasPrefix("vips") {
        vips = candidate
        vipsVersion = String(version.split(separator: " ").first?.dropFirst(5) ?? "")
      }
    }
    for folder in path where convert == nil {
      for name in ["magick", "convert"] where convert == nil {
        let candidate = folder + "/" + name
        if let version = Self.version(candidate, ["-version"]), version.contains("ImageMagick") {
          convert = candidate
          convertVersion = version.split(separator: " ").dropFirst(2).first.map(String.init) ?? ""
        }
      }
    }
    for folder in path where pyvips == nil {
      let candidate = folder + "/python3"
      if Self.version(candidate, ["-c", "import pyvips; print(pyvips.__version__)"]) != nil { pyvips = candidate }
    }
    if vips != nil && pyvips == nil {
      notes.append("libvips measured through its CLI (2 commands and a temporary .v file per image): no pyvips")
    }
    if vips == nil { notes.append("libvips skipped: no `vips` command (apt-get install libvips-tools)") }
    if convert == nil { notes.append("ImageMagick skipped: no real `convert` command (apt-get install imagemagick)") }
  }

  private static func version(_ tool: String, _ arguments: [String]) -> String? {
    guard FileManager.default.isExecutableFile(atPath: tool) else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init)
  }
}

/// Procedural photo-like pictures: sky, hills, buildings with windows, texture; no plain noise.
struct PhotoGenerator {
  let width: Int
  let height: Int
  let seed: UInt32

  func make() -> Image {
    var pixels = [UInt8](repeating: 0, count: width * height * 3)
    var state = seed &* 2_654_435_761
    func random() -> Double {
      state = state &* 1_664_525 &+ 1_013_904_223
      return Double(state >> 8) / Double(1 << 24)
    }
    let w = Double(width)
    let h = Double(height)
    let horizon = h * (0.4 + 0.2 * random())
    let hills = (0..<4).map { _ in (amplitude: h * 0.05 * random(), frequency: 1 + 6 * random(), phase: 6.28 * random())
    }
    let buildings = (0..<12).map { _ -> (x0: Int, x1: Int, top: Int, color: (Double, Double, Double)) in
      let x0 = Int(random() * w)
      let x1 = min(width, x0 + Int(w * (0.03 + 0.08 * random())))
      let top = Int(horizon - h * (0.05 + 0.3 * random()))
      return (x0, x1, top, (80 + 120 * random(), 70 + 120 * random(), 60 + 120 * random()))
    }
    let sun = (x: w * random(), y: horizon * 0.4 * random(), r: h * 0.05)
    let tint = (random() * 40, random() * 40, random() * 40)
    var ground = [Int](repeating: 0, count: width)
    for x in 0..<width {
      var y = horizon
      for hill in hills { y += hill.amplitude * sin(Double(x) / w * hill.frequency * 6.28 + hill.phase) }
      ground[x] = Int(y)
    }
    pixels.withUnsafeMutableBufferPointer { buffer in
      for y in 0..<height {
        let fy = Double(y)
        for x in 0..<width {
          let fx = Double(x)
          var r: Double
          var g: Double
          var b: Double
          if y < ground[x] {
            let t = fy / horizon
            r = 90 + 120 * t + tint.0
            g = 140 + 80 * t + tint.1
            b = 230 - 20 * t
            let dx = fx - sun.x
            let dy = fy - sun.y
            let d2 = (dx * dx + dy * dy) / (sun.r * sun.r)
            if d2 < 4 {
              let glow = max(0, 1 - d2 / 4)
              r += 120 * glow
              g += 100 * glow
              b += 40 * glow
            }
          } else {
            let t = (fy - horizon) / (h - horizon)
            let grass = 0.5 + 0.5 * sin(fx * 0.21 + fy * 0.13) * sin(fy * 0.37)
            r = 50 + 60 * t + 20 * grass + tint.0
            g = 90 + 50 * t + 30 * grass + tint.1
            b = 40 + 20 * t + tint.2
          }
          buffer[(y * width + x) * 3] = UInt8(clamping: Int(r))
          buffer[(y * width + x) * 3 + 1] = UInt8(clamping: Int(g))
          buffer[(y * width + x) * 3 + 2] = UInt8(clamping: Int(b))
        }
      }
      for building in buildings where building.x0 < building.x1 {
        for y in max(0, building.top)..<height {
          guard y < ground[min(width - 1, building.x0)] + 40 else { break }
          for x in building.x0..<building.x1 {
            let window = (x - building.x0) % 24 < 12 && (y - building.top) % 30 < 16
            let shade = window ? 1.5 : 1.0 - 0.2 * Double((x - building.x0) * 4 / max(1, building.x1 - building.x0)) / 4
            let grain = Double((x &* 7 &+ y &* 13) % 9) - 4
            buffer[(y * width + x) * 3] = UInt8(clamping: Int(building.color.0 * shade + grain))
            buffer[(y * width + x) * 3 + 1] = UInt8(clamping: Int(building.color.1 * shade + grain))
            buffer[(y * width + x) * 3 + 2] = UInt8(clamping: Int(building.color.2 * shade + grain))
          }
        }
      }
    }
    return Image(width: width, height: height, layout: .rgb, pixels: pixels)
  }
}
