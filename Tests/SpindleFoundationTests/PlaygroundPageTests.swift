import Dispatch
import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import SpindleFoundation

/// The playground's `TiltShiftOperation`, typed: its input comes from a provider or is set directly.
// The superclasses' locks protect all state; `delay` is immutable and `runs` is atomic.
final class TiltShiftOperation: TransformOperation<Image, Image>, @unchecked Sendable {
  let delay: Double
  let runs = Counter()
  /// Slices of the slow work done (five for a run that is never cancelled).
  let slices = Counter()

  init(delay: Double = 0.15) {
    self.delay = delay
    super.init()
  }

  override func transform(_ input: Image) throws -> Image {
    runs.increment()
    // Slow work in slices, checking cancellation between them (the playground's filter did not).
    for _ in 0..<5 {
      if isCancelled { throw OperationError.cancelled(operation: misuseName) }
      Thread.sleep(forTimeInterval: delay / 5)
      slices.increment()
    }
    return blur(input)
  }
}

/// The playground's `ImageLoadOperation`: finishes from the network simulator's callback thread.
// The superclasses' locks protect all state; `imageName` and `delay` are immutable.
final class ImageLoadOperation: ResultOperation<Image>, @unchecked Sendable {
  let imageName: String
  let delay: Double

  init(imageName: String, delay: Double = 0.02) {
    self.imageName = imageName
    self.delay = delay
    super.init()
  }

  override func main() {
    simulateNetworkImageLoadAsync(named: imageName, delay: delay) { image in
      self.finish(returning: image)
    }
  }
}

/// Page "NSOperation": an operation run by hand with `start()`.
@Suite struct NSOperationPageTests {
  @Test func blockOperationKeepsItsTypedResult() {
    let image = makeImage(named: "dark_road_small")
    let operation = ResultBlockOperation { blur(image) }
    operation.start()
    #expect(operation.isFinished)
    #expect(operation.output == blur(image))
  }

  @Test func subclassWithInputSetDirectlyRunsOnStart() {
    let image = makeImage(named: "dark_road_small")
    let operation = TiltShiftOperation(delay: 0.01)
    operation.input = image
    operation.start()
    #expect(operation.state == .finished)
    #expect(operation.output == blur(image))
  }

  @Test func thrownErrorBecomesTheResult() {
    struct Broken: Error {}
    let operation = ResultBlockOperation<Int> { throw Broken() }
    operation.start()
    #expect(operation.isFinished)
    #expect(throws: Broken.self) { try operation.result?.get() }
    #expect(operation.output == nil)
  }
}

/// Page "NSOperationQueue": the same filter over four images, serial and two at a time.
@Suite struct NSOperationQueuePageTests {
  let imageNames = ["dark_road_small", "train_day", "train_dusk", "train_night"]

  /// Runs the four filters on a queue of the given width; returns how many ran at once at the most.
  ///
  /// No clock: with room for two, each filter waits (bounded) until a second one is running too, so a queue that
  /// honours width 2 reaches a peak of exactly 2, and a serial queue never passes 1.
  func peakConcurrency(width: Int) throws -> Int {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = width
    let concurrency = Counter()
    let arrived = Counter()
    let operations = imageNames.map { name in
      let image = makeImage(named: name)
      return ResultBlockOperation {
        concurrency.tracking {
          arrived.increment()
          if width > 1 { _ = eventually(within: 60) { arrived.value >= 2 } }
          return blur(image)
        }
      }
    }
    queue.addOperations(operations, waitUntilFinished: false)
    try #require(drain(queue))
    #expect(operations.map(\.output) == imageNames.map { blur(makeImage(named: $0)) })
    return concurrency.peakConcurrency
  }

  @Test func widthTwoRunsTwoAtOnceAndWidthOneRunsOne() throws {
    #expect(try peakConcurrency(width: 1) == 1)
    #expect(try peakConcurrency(width: 2) == 2)
  }
}

/// Page "NSOperation Async": operations that finish after `main()` returns, from another thread.
@Suite struct NSOperationAsyncPageTests {
  @Test func finishesLateFromAnotherThreadAndStaysExecutingUntilThen() throws {
    let gate = Gate()
    let mainThreadFinished = Locked<Bool?>(nil)
    let operation = ProbeOperation { op in
      DispatchQueue.global().async {
        gate.wait()
        mainThreadFinished.withLock { $0 = Thread.isMainThread }
        op.finish()
      }
    }
    let queue = OperationQueue()
    queue.addOperation(operation)
    #expect(eventually { operation.isExecuting })
    Thread.sleep(forTimeInterval: 0.05)
    #expect(operation.isExecuting && !operation.isFinished, "main() returned but the work is not over")
    gate.open()
    try #require(drain(queue))
    #expect(operation.state == .finished)
    #expect(!operation.isExecuting)
    #expect(mainThreadFinished.withLock { $0 } == false)
    #expect(operation.log.all.isEmpty)
  }

  @Test func imageLoadOperationProducesTheImage() throws {
    let load = ImageLoadOperation(imageName: "train_dusk.jpg")
    let queue = OperationQueue()
    queue.addOperation(load)
    try #require(drain(queue))
    #expect(load.output == makeImage(named: "train_dusk.jpg"))
  }

  @Test func bodyThatFinishesSynchronouslyEndsFinished() throws {
    // The playground's start() set Executing after main(), leaving this operation executing forever.
    let operation = ProbeOperation { $0.finish() }
    operation.start()
    #expect(operation.state == .finished)
    #expect(!operation.isExecuting)
    let queued = ProbeOperation { $0.finish() }
    let queue = OperationQueue()
    queue.addOperation(queued)
    try #require(drain(queue))
    #expect(queued.state == .finished)
  }

  @Test func cancelWhileRunningDoesNotFinishUntilTheBodyDoes() throws {
    let started = Gate()
    let proceed = Gate()
    let sawCancellation = Locked<Bool?>(nil)
    let operation = ProbeOperation { op in
      DispatchQueue.global().async {
        started.open()
        proceed.wait()
        sawCancellation.withLock { $0 = op.isCancelled }
        op.finish()
      }
    }
    let queue = OperationQueue()
    queue.addOperation(operation)
    try #require(started.wait())
    let cancelledHandlerRan = Counter()
    operation.onCancel { cancelledHandlerRan.increment() }
    operation.cancel()
    #expect(operation.isCancelled)
    #expect(operation.isExecuting && !operation.isFinished, "cancel() must not finish a running body")
    #expect(cancelledHandlerRan.value == 1)
    proceed.open()
    try #require(drain(queue))
    #expect(operation.state == .finished)
    #expect(sawCancellation.withLock { $0 } == true)
    operation.onCancel { cancelledHandlerRan.increment() }
    #expect(cancelledHandlerRan.value == 2, "a handler added after cancel runs at once")
    operation.cancel()
    #expect(cancelledHandlerRan.value == 2, "handlers run once")
  }

  @Test func cancelledBeforeStartFinishesWithoutRunningMain() throws {
    let queue = OperationQueue()
    queue.isSuspended = true
    let operation = ProbeOperation()
    queue.addOperation(operation)
    operation.cancel()
    queue.isSuspended = false
    try #require(drain(queue))
    #expect(operation.isFinished)
    #expect(operation.isCancelled)
    #expect(operation.mainRuns.value == 0)
    #expect(operation.log.all.isEmpty)
  }

  @Test func secondFinishIsReportedAndChangesNothing() throws {
    let operation = ProbeOperation { op in
      op.finish()
      op.finish()
    }
    let completions = Counter()
    operation.completionBlock = { completions.increment() }
    let queue = OperationQueue()
    queue.addOperation(operation)
    try #require(drain(queue))
    #expect(operation.state == .finished)
    #expect(eventually { completions.value == 1 })
    Thread.sleep(forTimeInterval: 0.02)
    #expect(completions.value == 1, "the queue saw one finish")
    let misuses = operation.log.all
    try #require(misuses.count == 1)
    #expect(misuses[0].kind == .finishedTwice)
    #expect(misuses[0].firstFinish?.file == #fileID)
    #expect(misuses[0].location != misuses[0].firstFinish, "both call sites are named")
    #expect(misuses[0].description.contains("already finished"))
  }

  @Test func finishBeforeStartAndSecondStartAreReported() {
    let operation = ProbeOperation()
    operation.finish()
    #expect(operation.state == .ready)
    operation.start()
    #expect(operation.state == .finished)
    operation.start()
    #expect(operation.log.all.map(\.kind) == [.finishedBeforeStart, .startedTwice])
    #expect(operation.mainRuns.value == 1)
  }

  @Test func defaultReportWritesOneLineToStandardErrorWithoutCrashing() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      // AsyncOperation's lock protects its state; this subclass adds none.
      final class Finishing: AsyncOperation, @unchecked Sendable {
        override func main() {
          finish()
          finish()
        }
      }
      let twice = Finishing()
      twice.name = "twice"
      twice.start()
      exit(twice.isFinished ? 0 : 1)
    }
    let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(stderr.contains("programmer error: finish() called on Finishing 'twice'"))
    #expect(stderr.contains("first finish() at SpindleFoundationTests/PlaygroundPageTests.swift:"))
  }

  @Test func asyncBlockOperationWrapsACallbackAPI() throws {
    let load = AsyncBlockOperation<Image> { finish in
      simulateNetworkImageLoadAsync(named: "train_night") { image in finish(image) }
    }
    let signal = AsyncBlockOperation<Void> { finish in
      DispatchQueue.global().async { finish() }
    }
    struct Offline: Error {}
    let failing = AsyncBlockOperation<Image> { finish in
      DispatchQueue.global().async { finish.fail(Offline()) }
    }
    let queue = OperationQueue()
    queue.addOperations([load, signal, failing], waitUntilFinished: false)
    try #require(drain(queue))
    #expect(load.output == makeImage(named: "train_night"))
    #expect(signal.output != nil)
    #expect(throws: Offline.self) { try failing.result?.get() }
  }
}
