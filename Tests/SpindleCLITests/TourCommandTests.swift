import Foundation
import Testing

@Suite struct TourCommandTests {
  @Test func listNamesEveryPlaygroundPage() async throws {
    let result = try await CLI.run(["tour", "--list"])
    #expect(result.status == 0)
    for page in ["work", "queue", "async", "dependencies", "pipeline", "gcd", "groups", "barrier"] {
      #expect(result.stdout.contains(page), "page \(page) listed")
    }
  }

  @Test func everyPageRuns() async throws {
    let result = try await CLI.run(["tour"], timeout: 120)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.stdout.contains("4 cancelled, 5 cancelled, 6 cancelled"), "the pipeline page cancels images 4–6")
    #expect(result.stdout.contains("Isolated: 0 of 1000 reads saw a torn name"))
    #expect(result.stdout.contains("next read sees: ") && result.stdout.contains(" Frost"))
    #expect(result.stdout.contains("no deadlock"))
  }

  @Test func unknownPageIsBadUsage() async throws {
    let result = try await CLI.run(["tour", "nope"])
    #expect(result.status == 2)
    #expect(result.stderr.contains("no tour page 'nope'"))
  }
}
