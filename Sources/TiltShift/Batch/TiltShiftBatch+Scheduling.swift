import Dispatch
import Spindle

extension TiltShiftBatch {
  /// Adds pipelines while fewer than `maxImagesInMemory` are in flight and their estimated memory fits the
  /// budget; once cancelled, reports the rest as such; resumes the waiters when every file has ended.
  /// Runs on `bookkeeping` only.
  func startMore() {
    dispatchPrecondition(condition: .onQueue(bookkeeping))
    let (onFileFinished, start) = state.withLock { ($0.onFileFinished, $0.start) }
    while true {
      enum Step {
        /// Start file `index`; `room` is what the memory budget leaves beside the files in flight (nil: no budget).
        case start(Int, room: Int?)
        case refuse(FileReport, BatchProgress)
        case cancelRest(Range<Int>, BatchProgress)
        case finish([@Sendable () -> Void])
        case wait
      }
      // The next file's memory cost, from its header (file I/O, so outside the lock; once per file).
      if configuration.memoryBudget != nil {
        let next = state.withLock { state in
          state.next < items.count && !state.cancelled && state.headCost?.index != state.next ? state.next : nil
        }
        if let next {
          let cost = MemoryEstimate(item: items[next], configuration: configuration)
          state.withLock { $0.headCost = (next, cost.bytes, cost.info) }
        }
      }
      let step: Step = state.withLock { state in
        guard state.started, !state.finished else { return .wait }
        if state.cancelled, state.next < items.count {
          let rest = state.next..<items.count
          state.next = items.count
          for index in rest {
            state.reports[index] = FileReport(item: items[index], outcome: .cancelled, timings: StageTimings())
          }
          state.progress.cancelled += rest.count
          itemCounts.withLock { $0.skippedFiles += rest.count }
          state.progress.elapsed = (ContinuousClock.now - start).secondsValue
          return .cancelRest(rest, state.progress)
        }
        if let budget = configuration.memoryBudget, state.next < items.count, let head = state.headCost,
          head.index == state.next
        {
          let item = items[state.next]
          var refusal: ImageError?
          if let info = head.info {
            // Too large for its output format (JPEG's 65,535 pixels a side): refuse now, before reading its pixels.
            do throws(ImageError) {
              try (item.format ?? configuration.outputFormat ?? info.format).checkFits(
                width: info.width, height: info.height)
            } catch {
              refusal = error.naming(item.input)
            }
            if refusal == nil, head.bytes > budget {
              // Never fits, even alone: refuse now, before reading its pixels.
              refusal = ImageError(
                .exceedsMemoryBudget(width: info.width, height: info.height, bytes: head.bytes, budget: budget),
                path: item.input)
            }
          }
          if let error = refusal {
            let report = FileReport(item: items[state.next], outcome: .failed(error), timings: StageTimings())
            state.reports[state.next] = report
            state.next += 1
            state.progress.failed += 1
            itemCounts.withLock { $0.skippedFiles += 1 }
            state.progress.elapsed = (ContinuousClock.now - start).secondsValue
            return .refuse(report, state.progress)
          }
          if state.inFlight > 0 && state.bytesInFlight + head.bytes > budget { return .wait }
        }
        if state.next < items.count, state.inFlight < configuration.maxImagesInMemory {
          let cost = state.headCost.map { $0.index == state.next ? $0.bytes : 0 } ?? 0
          state.costs[state.next] = cost
          state.bytesInFlight += cost
          state.progress.peakBytesInFlight = Swift.max(state.progress.peakBytesInFlight, state.bytesInFlight)
          state.inFlight += 1
          state.progress.peakInFlight = Swift.max(state.progress.peakInFlight, state.inFlight)
          state.next += 1
          return .start(state.next - 1, room: configuration.memoryBudget.map { $0 - state.bytesInFlight })
        }
        guard state.inFlight == 0, state.next == items.count else { return .wait }
        state.finished = true
        // The caller's callback is not needed any more: released now, so that one that captures the batch (to
        // cancel it, say) does not keep the batch, its queue and its buffers alive for the life of the process.
        state.onFileFinished = { _, _ in }
        defer { state.waiters = [] }
        return .finish(state.waiters)
      }
      switch step {
      case .start(let index, let room):
        // The buffers the pool holds count against the budget too: it keeps no more than the files in flight leave.
        if let room { buffers.trim(toBytes: room) }
        startPipeline(index) { [self] report in
          bookkeeping.async { [self] in
            let progress = state.withLock { state in
              state.inFlight -= 1
              state.bytesInFlight -= state.costs.removeValue(forKey: index) ?? 0
              state.reports[index] = report
              state.totals = state.totals + report.timings
              switch report.outcome {
              case .succeeded(let width, let height, let read, let written):
                state.progress.succeeded += 1
                state.progress.pixels += width * height
                state.progress.bytesRead += read
                state.progress.bytesWritten += written
              case .failed: state.progress.failed += 1
              case .cancelled: state.progress.cancelled += 1
              }
              state.progress.elapsed = (ContinuousClock.now - start).secondsValue
              return state.progress
            }
            onFileFinished(report, progress)
            startMore()
          }
        }
      case .refuse(let report, let progress):
        onFileFinished(report, progress)
      case .cancelRest(let rest, let progress):
        for index in rest {
          onFileFinished(FileReport(item: items[index], outcome: .cancelled, timings: StageTimings()), progress)
        }
      case .finish(let waiters):
        buffers.close()
        publishToWatchers()
        for waiter in waiters { waiter() }
        return
      case .wait:
        return
      }
    }
  }
}
