import Foundation
import Testing
import TiltShift

/// The README's TiltShift example, verbatim between the markers, and what it must produce.
@Suite struct ReadmeExampleTests {
  @Test func tiltShiftABatch() async throws {
    // README: tilt-shift
    let photo = SamplePhoto(seed: 1).render(width: 320, height: 200)  // or ImageDecoder().decode(contentsOf:)
    let miniature = TiltShiftFilter().apply(to: photo, bands: 2)  // the band stays sharp, the rest blurs
    let bytes = try ImageEncoder(format: .jpeg, jpegQuality: 90).encode(miniature)
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    try ImageFile.writeAtomically(bytes, to: folder + "/in.jpg")
    let batch = TiltShiftBatch(
      items: [BatchItem(input: folder + "/in.jpg", output: folder + "/out.png")],
      configuration: BatchConfiguration(jobs: 2)
    )
    let summary = await batch.run()  // decode → filter → encode → atomic write, as Work items on a WorkQueue
    // END README
    defer { try? FileManager.default.removeItem(atPath: folder) }
    #expect(summary.progress.succeeded == 1)
    let written = try ImageDecoder().decode(contentsOf: folder + "/out.png")
    #expect(written.width == 320 && written.height == 200)
  }
}
