import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import TiltShift

@Suite(.offThePool) struct TiltShiftBatchTests {
  /// A fresh folder; each test removes it (`defer`) when it is done.
  static func folder() throws -> String {
    try makeTemporaryFolder("spindle-batch").path
  }

  /// `count` small JPEGs in a fresh folder, and an output path for each.
  static func items(_ count: Int, in folder: String, width: Int = 64, height: Int = 48) throws -> [BatchItem] {
    try items(sizes: Array(repeating: (width, height), count: count), in: folder)
  }

  /// One sample JPEG of each size in `folder` (`in-0.jpg`, …), and an output path for each (`out-0.jpg`, …).
  static func items(sizes: [(width: Int, height: Int)], in folder: String) throws -> [BatchItem] {
    try sizes.enumerated().map { index, size in
      let input = folder + "/in-\(index).jpg"
      let photo = SamplePhoto(seed: UInt64(index)).render(width: size.width, height: size.height)
      try ImageFile.writeAtomically(ImageEncoder(format: .jpeg).encode(photo), to: input)
      return BatchItem(input: input, output: folder + "/out-\(index).jpg")
    }
  }

  @Test func everyFileEndsAndABadOneNeverStopsTheOthers() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    var items = try Self.items(6, in: folder)
    try Data("not an image".utf8).write(to: URL(fileURLWithPath: items[2].input))
    items[4].input = folder + "/missing.jpg"
    let reported = Locked<[String]>([])
    let summary = await TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 2)).run { report, _ in
      reported.withLock { $0.append(report.item.input) }
    }
    #expect(summary.progress.succeeded == 4)
    #expect(summary.progress.failed == 2)
    #expect(reported.withLock { $0.count } == 6, "onFileFinished once per file")
    #expect(summary.reports.map(\.item) == items, "reports in input order")
    if case .failed(let error) = summary.reports[2].outcome {
      #expect(error.kind == .notAnImage)
      #expect(error.description.contains("in-2.jpg"))
    } else {
      Issue.record("the text file must fail: \(summary.reports[2].outcome)")
    }
    for index in [0, 1, 3, 5] {
      let image = try ImageDecoder().decode(contentsOf: items[index].output)
      #expect(image.width == 64)
    }
    #expect(!FileManager.default.fileExists(atPath: items[2].output))
    #expect(ImageFile.temporaryFiles(in: folder).isEmpty)
  }

  @Test("a filter shares the bands with the batch's running bodies: alone it gets them all, never below 1")
  func filterBandsAreShared() {
    let bands = FilterBands(most: 4)
    #expect(bands.enter() == 4, "alone: every band")
    #expect(bands.enter() == 2, "two files: half each")
    #expect(bands.enter() == 1, "three files: 4 / 3")
    #expect(bands.enter() == 1)
    #expect(bands.enter() == 1, "five files: never 0")
    for _ in 0..<4 { bands.leave() }
    #expect(bands.enter() == 2, "back to two files")
    bands.leave()
    bands.leave()
    #expect(bands.enter() == 4, "alone again")
    bands.enterCodec()
    #expect(bands.enter() == 1, "next to a running filter and a running decode: 4 / 3")
    bands.leave()
    bands.leave()
    #expect(bands.enter() == 2, "next to the filter only")
    #expect(FilterBands(most: 0).enter() == 1, "at least one band")
  }

  @Test("shared bands change nothing in the output: jobs 3 × up to 4 bands writes what a serial batch writes")
  func sharedBandsKeepTheOutput() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(6, in: folder, width: 200, height: 150)
    let serialItems = items.map { BatchItem(input: $0.input, output: $0.output + ".serial.jpg") }
    let serial = await TiltShiftBatch(items: serialItems, configuration: .serial()).run()
    let shared = await TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 3, bandsPerImage: 4)).run()
    #expect(serial.progress.succeeded == 6 && shared.progress.succeeded == 6)
    for (a, b) in zip(items, serialItems) {
      #expect(FileManager.default.contents(atPath: a.output) == FileManager.default.contents(atPath: b.output))
    }
  }

  @Test func decodedImagesInMemoryNeverExceedTheWindow() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(12, in: folder)
    for window in [1, 3] {
      let configuration = BatchConfiguration(jobs: 2, maxImagesInMemory: window, replaceExisting: true)
      let summary = await TiltShiftBatch(items: items, configuration: configuration).run()
      #expect(summary.progress.succeeded == 12)
      #expect(summary.progress.peakInFlight <= window, "window \(window): peak \(summary.progress.peakInFlight)")
      #expect(summary.progress.peakInFlight >= 1)
    }
  }

  /// The batch's decodes, filters and encodes share one queue `jobs` wide: never more bodies at once than jobs, even
  /// with room for several files in flight (with a queue per stage, a 2-job batch ran a decode, a filter and an
  /// encode at once).
  @Test func neverMoreBodiesAtOnceThanJobs() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(12, in: folder, width: 320, height: 240)
    for jobs in [1, 2] {
      let trace = WorkTrace()
      var configuration = BatchConfiguration(jobs: jobs, bandsPerImage: 1, maxImagesInMemory: 4, replaceExisting: true)
      configuration.trace = trace
      let summary = await TiltShiftBatch(items: items, configuration: configuration).run()
      #expect(summary.progress.succeeded == 12)
      let bodies = trace.items.filter(\.ran)
      #expect(bodies.count == 3 * 12)
      // The most bodies running at one instant: +1 at each start, -1 at each end (ends first at a tie).
      let edges = bodies.flatMap { [($0.start, 1), ($0.end, -1)] }.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
      var running = 0
      var peak = 0
      for (_, step) in edges {
        running += step
        peak = max(peak, running)
      }
      #expect(peak == jobs, "jobs \(jobs): \(peak) bodies ran at once")
    }
  }

  @Test func cancellingLeavesOnlyCompleteOutputsAndReportsTheRest() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(30, in: folder)
    let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 1, maxImagesInMemory: 1))
    let summary = await batch.run { _, progress in
      if progress.completed == 3 { batch.cancel() }
    }
    #expect(summary.wasCancelled)
    #expect(summary.progress.completed == 30, "every file is accounted for")
    #expect(summary.progress.cancelled > 0)
    #expect(summary.progress.succeeded >= 3)
    for report in summary.reports {
      let exists = FileManager.default.fileExists(atPath: report.item.output)
      #expect(exists == report.succeeded, "\(report.item.output): written if and only if it succeeded")
      if exists { _ = try ImageDecoder().decode(contentsOf: report.item.output) }
    }
    #expect(ImageFile.temporaryFiles(in: folder).isEmpty)
  }

  /// A callback that captures its batch (to cancel it, the usual reason) must not keep the batch alive once it
  /// ended: it did, for the life of the process, with its queue, engine and buffers (found by LeakSanitizer).
  @Test(arguments: [false, true])
  func aBatchWhoseCallbackCapturesItIsFreedOnceItEnded(cancels: Bool) async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(6, in: folder)
    weak var released: TiltShiftBatch?
    weak var releasedQueue: WorkQueue?
    do {
      let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 1, maxImagesInMemory: 1))
      released = batch
      releasedQueue = batch.queue
      let watching = Task { for await _ in batch.workProgressUpdates {} }
      let summary = await batch.run { _, progress in
        if cancels && progress.completed == 2 { batch.cancel() }
      }
      #expect(summary.wasCancelled == cancels)
      await watching.value
    }
    // The last references go with the batch's own queues' blocks, which may still be on their way out.
    #expect(await eventually { released == nil }, "the batch is freed once it ended")
    #expect(await eventually { releasedQueue == nil }, "and so is its queue")
  }

  @Test func aBatchRunsOnceAndASecondRunReturnsTheSameSummary() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let batch = TiltShiftBatch(items: try Self.items(3, in: folder))
    let first = await batch.run()
    let second = await batch.run()
    #expect(first.progress.succeeded == 3)
    #expect(second.progress.succeeded == 3)
    #expect(second.reports.map(\.item) == first.reports.map(\.item))
  }

  @Test func anEmptyBatchEndsAtOnce() async {
    let summary = await TiltShiftBatch(items: []).run()
    #expect(summary.reports.isEmpty)
    #expect(summary.progress.completed == 0)
  }

  @Test func eventsStreamEveryFileThenTheSummary() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(4, in: folder)
    var finished: [String] = []
    var summary: BatchSummary?
    for await event in TiltShiftBatch(items: items).events() {
      #expect(summary == nil, "nothing comes after the summary")
      switch event {
      case .fileFinished(let report, let progress):
        finished.append(report.item.input)
        #expect(progress.completed == finished.count)
      case .finished(let last):
        summary = last
      }
    }
    #expect(finished.sorted() == items.map(\.input).sorted())
    #expect(summary?.progress.succeeded == 4)
  }

  @Test func leavingTheEventLoopEarlyCancelsTheBatch() async throws {
    let folder = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let items = try Self.items(20, in: folder)
    // The second file is a pipe that gives its bytes only once the loop is left, so the batch cannot end first,
    // however long a starved cooperative pool keeps this task from the first event. (It could: the batch ended, the
    // stream finished, and leaving the loop had nothing left to cancel.) The test holds the pipe open for writing,
    // so the batch's open does not block; one file at a time (jobs 1, window 1), the first file still ends.
    let photo = try ImageFile.read(items[1].input)
    try FileManager.default.removeItem(atPath: items[1].input)
    try #require(mkfifo(items[1].input, 0o600) == 0, "mkfifo: \(String(cString: strerror(errno)))")
    let writer = open(items[1].input, O_RDWR | O_CLOEXEC)
    try #require(writer >= 0, "open: \(String(cString: strerror(errno)))")
    let batch = TiltShiftBatch(items: items, configuration: BatchConfiguration(jobs: 1, maxImagesInMemory: 1))
    for await event in batch.events() {
      if case .fileFinished = event { break }
    }
    // Whatever reads the name from now on finds a plain file; a reader already in the pipe gets the bytes and its end.
    try ImageFile.writeAtomically(photo, to: items[1].input, replacingExisting: true)
    let written = photo.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
    close(writer)
    #expect(written == photo.count)
    let summary = await batch.run()
    #expect(summary.wasCancelled, "leaving the loop cancels the batch")
    // The batch does not wait for its consumer, so how many files were done by then depends on timing; every
    // file either was written whole or was cancelled, never half-written.
    #expect(summary.progress.succeeded + summary.progress.cancelled == 20)
    for report in summary.reports {
      #expect(FileManager.default.fileExists(atPath: report.item.output) == report.succeeded)
    }
    #expect(ImageFile.temporaryFiles(in: folder).isEmpty)
  }
}
