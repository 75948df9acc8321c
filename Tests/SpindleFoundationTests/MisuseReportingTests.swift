import Foundation
import Spindle
import Testing

@testable import SpindleFoundation

/// SpindleFoundation reports through the package's one misuse handler unless an operation class overrides the hook.
@Suite struct FoundationMisuseReportingTests {
  @Test func asyncOperationMisuseReachesTheOneHandlerWithItsTypedDetail() async {
    await #expect(processExitsWith: .success) {
      let received = Locked<[MisuseReport]>([])
      MisuseReporting.handler = { report in received.withLock { $0.append(report) } }
      let operation = TwiceFinishingOperation()
      operation.start()
      operation.start()  // a second start: reported, ignored
      let reports = received.withLock { $0 }
      precondition(reports.count == 2, "finish twice and start twice: \(reports.map(\.message))")
      let details = reports.compactMap { $0.detail as? AsyncOperation.Misuse }
      precondition(details.map(\.kind) == [.finishedTwice, .startedTwice])
      precondition(reports[0].message == details[0].description)
      precondition(reports[0].message.hasPrefix("SpindleFoundation: programmer error"))
      precondition(operation.isFinished)
    }
  }
}

/// Calls `finish()` twice from `main()`, and does not override `reportMisuse(_:)`.
// The superclass's locks protect the state; the subclass adds none.
final class TwiceFinishingOperation: AsyncOperation, @unchecked Sendable {
  override func main() {
    finish()
    finish()
  }
}
