import Foundation
import SpindleTestSupport
import Testing

@testable import TiltShift

/// JPEG's size limit: libjpeg writes at most 65,500 pixels a side, and said only "cannot encode a 70000x8 image
/// with 1 channels as JPEG" after the whole filter had run (helper-47's adversarial run).
@Suite(.offThePool) struct FormatSizeLimitTests {
  /// A 65,501 × 2 gray image: one pixel wider than libjpeg takes, and small (131 KB).
  static let wide = Image(width: 65_501, height: 2, layout: .gray, pixels: [UInt8](repeating: 128, count: 131_002))

  @Test func theEncoderRefusesAJPEGWiderThanLibjpegTakesAndSaysPNGHasNoLimit() throws {
    #expect(ImageFormat.jpeg.maxDimension == 65_500 && ImageFormat.png.maxDimension == nil)
    do {
      _ = try ImageEncoder(format: .jpeg).encode(Self.wide)
      Issue.record("a 65501-pixel-wide JPEG was encoded")
    } catch {
      guard case .tooLargeForFormat(65_501, 2, 65_500, .jpeg) = error.kind else {
        Issue.record("\(error)")
        return
      }
      #expect(error.description.contains("PNG has no such limit"), "\(error)")
    }
    #expect(try ImageEncoder(format: .png).encode(Self.wide).count > 0)
    #expect(try ImageEncoder(format: .jpeg).encode(Image(width: 65_500, height: 1, layout: .gray)).count > 0)
  }

  @Test func aBatchWithoutAMemoryBudgetRefusesItAfterDecodingBeforeTheFilter() async throws {
    let folder = try makeTemporaryFolder("spindle-format-limit").path
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let input = folder + "/wide.png"
    try ImageFile.writeAtomically(try ImageEncoder(format: .png).encode(Self.wide), to: input)
    let item = BatchItem(input: input, output: folder + "/wide-out.jpg")
    let configuration = BatchConfiguration(outputFormat: .jpeg, jobs: 1, bandsPerImage: 1, memoryBudget: nil)

    let summary = await TiltShiftBatch(items: [item], configuration: configuration).run { _, _ in }

    let report = try #require(summary.reports.first)
    guard case .failed(let error) = report.outcome, case .tooLargeForFormat = error.kind else {
      Issue.record("\(report.outcome)")
      return
    }
    #expect(error.path == input)
    // The filter stage never ran: its time was never recorded.
    #expect(report.timings.filter == 0)
    #expect(!FileManager.default.fileExists(atPath: item.output))
  }
}
