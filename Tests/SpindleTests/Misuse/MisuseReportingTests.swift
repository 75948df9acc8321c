import Testing

@testable import Spindle

/// The package's one misuse handler. Each test installs handlers in a child process (an exit test), so the
/// process-wide handler of the other suites running in parallel is never swapped under them.
@Suite struct MisuseReportingTests {
  @Test func reportsGoToTheInstalledHandlerWithTheirDetail() async {
    await #expect(processExitsWith: .success) {
      let received = Locked<[MisuseReport]>([])
      MisuseReporting.handler = { report in received.withLock { $0.append(report) } }
      MisuseReporting.report(MisuseReport(message: "first", detail: 42))
      let reports = received.withLock { $0 }
      precondition(reports.count == 1 && reports[0].message == "first" && reports[0].description == "first")
      precondition(reports[0].detail as? Int == 42)
    }
  }

  @Test func workQueueHandlerIsAMessageOnlyAliasOfTheOneHandler() async {
    await #expect(processExitsWith: .success) {
      let messages = Locked<[String]>([])
      WorkQueue.misuseHandler = { message in messages.withLock { $0.append(message) } }
      // Reports from anywhere reach the alias's handler.
      MisuseReporting.report(MisuseReport(message: "from the core", detail: "typed"))
      reportMisuse("from the engine")
      precondition(messages.withLock { $0 } == ["from the core", "from the engine"])
      // Reading the alias forwards to whatever handler is installed now.
      let typed = Locked<[MisuseReport]>([])
      MisuseReporting.handler = { report in typed.withLock { $0.append(report) } }
      WorkQueue.misuseHandler("through the alias")
      precondition(typed.withLock { $0.map(\.message) } == ["through the alias"])
      precondition(messages.withLock { $0.count } == 2, "the replaced handler hears nothing more")
    }
  }

  @Test func defaultHandlerWritesOneLineToStandardError() async throws {
    let result = try await #require(
      processExitsWith: .success,
      observing: [\.standardErrorContent]
    ) {
      MisuseReporting.report(MisuseReport(message: "Spindle-misuse-probe: ignored"))
      MisuseReporting.handler = { _ in }
      MisuseReporting.report(MisuseReport(message: "silenced"))
      MisuseReporting.handler = MisuseReporting.standardError
      MisuseReporting.report(MisuseReport(message: "restored"))
    }
    let text = String(decoding: result.standardErrorContent, as: UTF8.self)
    #expect(text.contains("Spindle-misuse-probe: ignored\n"))
    #expect(!text.contains("silenced"))
    #expect(text.contains("restored\n"))
  }
}
