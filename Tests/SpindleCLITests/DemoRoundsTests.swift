import Spindle
import Testing

@testable import SpindleCLI

/// How `spindle demo` picks the round it shows from several alternating rounds, and what its page says about it.
@Suite struct DemoRoundsTests {
  /// The middle speed-up of an odd count, the lower of the middle two of an even count: always a round that ran.
  @Test(arguments: [
    ([2.0], 2.0),
    ([3.0, 2.0], 2.0),
    ([2.0, 3.0, 1.5], 2.0),
    ([1.9, 1.7, 1.8, 2.5], 1.8),
    ([1.8, 1.8, 1.6], 1.8),
  ])
  func theShownRoundHasTheMedianSpeedUp(speedUps: [Double], expected: Double) {
    let picked = DemoCommand.medianRound(speedUps.indices.map { $0 }) { speedUps[$0] }
    #expect(speedUps[picked] == expected)
  }

  /// The page's speed-up is the shown round's serial ÷ concurrent time, so a reader who divides the two times shown
  /// gets the number printed beside them; with several rounds it says so and gives their range.
  @Test func thePageSpeedUpIsTheShownRoundsTimesAndNamesTheRounds() {
    var page = DemoPage(
      root: "/nonexistent", names: ["a.jpg"], cores: 2, jobs: 2, serial: (WorkTrace(), 0.12),
      concurrent: (WorkTrace(), 0.05), rounds: (count: 3, low: 1.75, high: 2.5), identical: true)
    let html = page.html()
    #expect(html.contains("Serial 0.12 s, concurrent 0.05 s:"), "\(html)")
    #expect(html.contains("2.40× faster"), "\(html)")
    #expect(html.contains("the median of 3 rounds, which ranged from 1.75× to 2.50×"), "\(html)")
    page.rounds = (count: 1, low: 2.4, high: 2.4)
    #expect(!page.html().contains("median of"), "one round: no note about rounds")
  }
}
