import Foundation
import Testing

@Suite struct BenchCommandTests {
  @Test func listNamesTheEngineSuiteBesideTheOthers() async throws {
    let result = try await CLI.run(["bench", "--list"])
    #expect(result.status == 0, "\(result.stderr)")
    for suite in ["executors", "workqueue", "engine"] {
      #expect(result.stdout.contains("\(suite): "), "suite \(suite) listed: \(result.stdout)")
    }
  }

  @Test func anUnknownSuiteIsBadUsageNamingTheSuites() async throws {
    let result = try await CLI.run(["bench", "engines"])
    #expect(result.status == 2)
    #expect(result.stderr.contains("no benchmark suite 'engines'"), "\(result.stderr)")
    #expect(result.stderr.contains("engine"), "the known suites are named: \(result.stderr)")
  }
}
