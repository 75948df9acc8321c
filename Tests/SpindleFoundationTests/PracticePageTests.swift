import Dispatch
import Foundation
import Spindle
import SpindleTestSupport
import Testing

@testable import SpindleFoundation

/// The playground's `ImageProvider`: load → tilt-shift → output on its own queue, cancellable.
final class ImageProvider: Sendable {
  let queue: UncheckedBox<OperationQueue>
  let load: ImageLoadOperation
  let filter: TiltShiftOperation
  let output: TransformOperation<Image, Void>

  init(
    imageName: String, loadDelay: Double = 0.02, filterDelay: Double = 0.05,
    completion: @escaping @Sendable (Image) -> Void
  ) {
    load = ImageLoadOperation(imageName: imageName, delay: loadDelay)
    filter = TiltShiftOperation(delay: filterDelay)
    output = TransformOperation { image in completion(image) }
    load |> filter |> output
    let queue = OperationQueue()
    queue.addOperations([load, filter, output], waitUntilFinished: false)
    self.queue = UncheckedBox(queue)
  }

  func cancel() { queue.value.cancelAllOperations() }
}

/// Page "NSOperation in Practice": many providers, some cancelled mid-way (scrolled off screen).
@Suite struct NSOperationInPracticePageTests {
  @Test func providersDeliverUnlessCancelled() throws {
    let names = ["dark_road_small.jpg", "train_day.jpg", "train_dusk.jpg", "train_night.jpg"]
    let delivered = Locked<[String: Image]>([:])
    var providers: [(String, ImageProvider)] = []
    // Every third provider is cancelled while its load is in flight: at once, with a load slow enough that nothing
    // (a loaded machine, ThreadSanitizer) can let it finish first. Cancelling after all 16 were made let the first
    // one deliver before its cancel on a slow run.
    let cancelled = Set((0..<16).filter { $0 % 3 == 0 })
    for index in 0..<16 {
      let key = "\(index):\(names[index % names.count])"
      let provider = ImageProvider(
        imageName: names[index % names.count], loadDelay: cancelled.contains(index) ? 1 : 0.02
      ) { image in
        delivered.withLock { $0[key] = image }
      }
      if cancelled.contains(index) { provider.cancel() }
      providers.append((key, provider))
    }
    for (_, provider) in providers { try #require(drain(provider.queue.value)) }
    let results = delivered.withLock { $0 }
    for (index, (key, provider)) in providers.enumerated() {
      if cancelled.contains(index) {
        #expect(results[key] == nil, "cancelled provider \(key) must not deliver")
        #expect(provider.output.isCancelled && provider.output.isFinished)
      } else {
        #expect(results[key] == blur(makeImage(named: String(key.split(separator: ":")[1]))))
      }
    }
  }

  @Test func cancellingMidFilterStopsTheRestOfThePipeline() throws {
    let delivered = Counter()
    let provider = ImageProvider(imageName: "train_day.jpg", filterDelay: 5) { _ in delivered.increment() }
    #expect(eventually { provider.filter.isExecuting })
    provider.cancel()
    // The filter polls cancellation between its five slices of 1 s: it stops after the slice it was in, not at
    // the end (counted, not timed: a loaded machine can take seconds to drain the queue).
    try #require(drain(provider.queue.value, within: 60))
    #expect(provider.filter.slices.value < 5, "the filter ran all \(provider.filter.slices.value) slices")
    #expect(provider.load.output != nil, "the load had finished")
    #expect(provider.filter.output == nil)
    #expect(provider.output.isCancelled)
    #expect(delivered.value == 0)
  }
}

/// swift-corelibs-foundation keeps an unowned pointer from a dependency to its dependents: a dependent
/// cancelled (so finished at once) and freed before its dependency finishes used to crash the process.
@Suite struct CancelledDependentLifetimeTests {
  @Test func cancelledDependentFreedBeforeItsDependencyFinishesDoesNotCrash() throws {
    let gate = Gate()
    let load = AsyncBlockOperation<Image> { finish in
      DispatchQueue.global().async {
        gate.wait()
        finish(makeImage(named: "slow"))
      }
    }
    let queue = OperationQueue()
    weak var weakFilter: TiltShiftOperation?
    weak var weakOutput: TransformOperation<Image, Int>?
    do {
      let filter = TiltShiftOperation(delay: 0.01)
      let output = TransformOperation { (image: Image) in image.count }
      load |> filter |> output
      queue.addOperations([load, filter, output], waitUntilFinished: false)
      // The playground's ImageProvider.cancel(): the dependents finish at once, the load keeps running.
      filter.cancel()
      output.cancel()
      try #require(wait(for: filter) && wait(for: output))
      #expect(filter.isCancelled && output.isCancelled)
      #expect(filter.runs.value == 0)
      weakFilter = filter
      weakOutput = output
    }
    // Give the queue time to drop its references, so the dependents are really freed (when nothing else
    // holds them) before the load finishes.
    _ = eventually(within: 2) { weakFilter == nil && weakOutput == nil }
    gate.open()
    try #require(drain(queue))
    #expect(load.output == makeImage(named: "slow"))
  }
}
