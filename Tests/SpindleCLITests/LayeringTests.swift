import Foundation
import Testing

/// The dependency arrows, checked in Package.swift and in the sources' imports:
/// core ← SpindleFoundation, core ← TiltShift ← SpindleCLI ← spindle, and SpindleBenchmarks ← SpindleCLI's bench
/// command only.
@Suite struct LayeringTests {
  static let root = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

  /// Each target of Package.swift and the targets it depends on.
  static func declaredDependencies() throws -> [String: Set<String>] {
    let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
    let pattern = try NSRegularExpression(
      pattern: #"\.(?:target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?"#)
    var result: [String: Set<String>] = [:]
    let range = NSRange(manifest.startIndex..., in: manifest)
    for match in pattern.matches(in: manifest, range: range) {
      guard let name = Range(match.range(at: 1), in: manifest).map({ String(manifest[$0]) }) else { continue }
      var dependencies: Set<String> = []
      if let list = Range(match.range(at: 2), in: manifest) {
        for part in manifest[list].split(separator: ",") {
          let word = part.trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: "\"")))
          if !word.isEmpty { dependencies.insert(word) }
        }
      }
      result[name] = dependencies
    }
    return result
  }

  /// The modules each Swift file under `Sources/<target>` imports, by file path relative to the target.
  static func imports(of target: String) throws -> [String: Set<String>] {
    let folder = root.appendingPathComponent("Sources/\(target)")
    var result: [String: Set<String>] = [:]
    guard let enumerator = FileManager.default.enumerator(atPath: folder.path) else { return result }
    for case let relative as String in enumerator where relative.hasSuffix(".swift") {
      let text = try String(contentsOf: folder.appendingPathComponent(relative), encoding: .utf8)
      var modules: Set<String> = []
      for line in text.split(separator: "\n") {
        let words = line.split(separator: " ")
        guard let index = words.firstIndex(of: "import"), index + 1 < words.count else { continue }
        // `import X`, `@testable import X`, `@_exported import X`, `internal import X`; not `import struct X.Y`.
        guard words[..<index].allSatisfy({ $0.hasPrefix("@") || ["internal", "public", "package"].contains($0) })
        else { continue }
        modules.insert(String(words[index + 1].split(separator: ".").first ?? ""))
      }
      result[relative] = modules
    }
    return result
  }

  static let packageModules: Set<String> = [
    "Spindle", "SpindleFoundation", "TiltShift", "CJPEG", "CPNG", "CFilterKernels", "CSignals", "SpindleBenchmarks",
    "SpindleCLI", "spindle", "SpindleTestSupport",
  ]

  @Test func packageSwiftDeclaresExactlyTheArrows() throws {
    let declared = try Self.declaredDependencies()
    let expected: [String: Set<String>] = [
      "Spindle": [],
      "SpindleFoundation": ["Spindle"],
      "TiltShift": ["Spindle", "CJPEG", "CPNG", "CFilterKernels"],
      "SpindleBenchmarks": ["Spindle", "SpindleFoundation", "TiltShift"],
      "SpindleCLI": ["Spindle", "TiltShift", "SpindleBenchmarks", "CSignals"],
      "spindle": ["SpindleCLI"],
      // The tests' helpers may use the core: the offThePool trait runs suites on a BlockingExecutor.
      "SpindleTestSupport": ["Spindle"],
    ]
    for (target, dependencies) in expected {
      #expect(declared[target] == dependencies, "\(target) depends on \(declared[target].map { $0.sorted() } ?? [])")
    }
    for (target, dependencies) in declared where target.hasSuffix("Tests") {
      #expect(!dependencies.contains("SpindleBenchmarks"), "\(target) must not depend on the benchmarks")
    }
  }

  @Test func sourcesImportOnlyWhatTheirLayerAllows() throws {
    let allowed: [String: Set<String>] = [
      "Spindle": [],
      "SpindleFoundation": ["Spindle"],
      "TiltShift": ["Spindle", "CJPEG", "CPNG", "CFilterKernels"],
      "SpindleBenchmarks": ["Spindle", "SpindleFoundation", "TiltShift"],
      "SpindleCLI": ["Spindle", "TiltShift"],
      "spindle": ["SpindleCLI"],
    ]
    for (target, modules) in allowed {
      let files = try Self.imports(of: target)
      #expect(!files.isEmpty, "\(target) has sources")
      for (file, imported) in files {
        var permitted = modules
        if target == "SpindleCLI" && file == "Commands/BenchCommand.swift" { permitted.insert("SpindleBenchmarks") }
        // The signal handler's C side is the watcher's alone.
        if target == "SpindleCLI" && file == "CommandLine/SignalWatcher.swift" { permitted.insert("CSignals") }
        let forbidden = imported.intersection(Self.packageModules).subtracting(permitted).subtracting([target])
        #expect(forbidden.isEmpty, "\(target)/\(file) imports \(forbidden.sorted())")
      }
    }
  }

  @Test func theCoreNeverImportsFoundation() throws {
    for (file, imported) in try Self.imports(of: "Spindle") {
      #expect(imported.isDisjoint(with: ["Foundation", "FoundationEssentials"]), "Spindle/\(file) imports Foundation")
    }
  }

  @Test func onlyTheBenchCommandImportsTheBenchmarks() throws {
    let importers = try Self.imports(of: "SpindleCLI").filter { $0.value.contains("SpindleBenchmarks") }.keys
    #expect(Array(importers) == ["Commands/BenchCommand.swift"])
  }
}
