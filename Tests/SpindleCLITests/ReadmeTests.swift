import Foundation
import Testing

/// Every Swift example in README.md is the code of a test: it appears verbatim between `// README: <name>` and
/// `// END README` in a test file, where it compiles and its results are checked; and every such marked region is
/// in the README.
@Suite struct ReadmeTests {
  static let root = LayeringTests.root

  /// The README's ```swift blocks, without their `import` lines.
  static func readmeExamples() throws -> [String] {
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    var examples: [String] = []
    var current: [Substring]? = nil
    for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
      if current == nil {
        if line == "```swift" { current = [] }
      } else if line == "```" {
        let body = (current ?? []).filter { !$0.hasPrefix("import ") }.drop { $0.isEmpty }
        examples.append(body.joined(separator: "\n"))
        current = nil
      } else {
        current?.append(line)
      }
    }
    return examples
  }

  /// The marked regions of the test files, de-indented.
  static func testedExamples() throws -> [String: String] {
    var regions: [String: String] = [:]
    let tests = root.appendingPathComponent("Tests")
    guard let enumerator = FileManager.default.enumerator(atPath: tests.path) else { return regions }
    for case let relative as String in enumerator where relative.hasSuffix(".swift") {
      let text = try String(contentsOf: tests.appendingPathComponent(relative), encoding: .utf8)
      var current: [Substring]? = nil
      var name = ""
      for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        let trimmed = line.drop { $0 == " " }
        if trimmed.hasPrefix("// README: ") {
          name = "\(relative): \(trimmed.dropFirst("// README: ".count))"
          current = []
        } else if trimmed == "// END README", let lines = current {
          let indent = lines.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
          regions[name] = lines.map { $0.dropFirst(min(indent, $0.count)) }.joined(separator: "\n")
          current = nil
        } else {
          current?.append(line)
        }
      }
    }
    return regions
  }

  @Test func everyReadmeExampleIsATest() throws {
    let examples = try Self.readmeExamples()
    let tested = try Self.testedExamples()
    #expect(examples.count >= 6, "one example per capability")
    for example in examples {
      #expect(tested.values.contains(example), "README example not found in any test:\n\(example)")
    }
    for (name, region) in tested {
      #expect(examples.contains(region), "\(name) is marked as a README example but the README differs")
    }
  }
}
