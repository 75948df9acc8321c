/// A counting limit on executions in flight, with FIFO waiters that can leave when cancelled.
///
/// `acquire` takes a slot or waits for one in arrival order; `release` hands the slot straight to the
/// oldest waiter (so a newcomer cannot overtake it). A cancellable waiter that is cancelled leaves the
/// line and gets `false`.
final class InFlightLimit: Sendable {
  private struct State {
    var inFlight = 0
    var nextID: UInt64 = 0
    var order: [UInt64] = []
    var orderHead = 0
    var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]

    mutating func popOldest() -> CheckedContinuation<Bool, Never>? {
      while orderHead < order.count {
        let id = order[orderHead]
        orderHead += 1
        if let waiter = waiters.removeValue(forKey: id) {
          compact()
          return waiter
        }
      }
      compact()
      return nil
    }

    mutating func compact() {
      if orderHead == order.count {
        order.removeAll(keepingCapacity: true)
        orderHead = 0
      } else if orderHead > 64 && orderHead * 2 > order.count {
        order.removeFirst(orderHead)
        orderHead = 0
      }
    }
  }

  /// The most executions that may run at once.
  let limit: Int
  private let state = TSanVisibleMutex(State())

  init(limit: Int) {
    self.limit = limit
  }

  /// Executions holding a slot now.
  var inFlight: Int { state.withLock { $0.inFlight } }

  /// Callers waiting for a slot now.
  var waiting: Int { state.withLock { $0.waiters.count } }

  /// Takes a slot, waiting in FIFO order; never gives up, even if the task is cancelled.
  func acquire() async {
    if tryAcquire() { return }
    _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      let acquired = state.withLock { state -> Bool in
        if state.inFlight < limit {
          state.inFlight += 1
          return true
        }
        state.nextID += 1
        state.order.append(state.nextID)
        state.waiters[state.nextID] = continuation
        return false
      }
      if acquired { continuation.resume(returning: true) }
    }
  }

  /// Takes a slot, waiting in FIFO order; returns false without a slot if the task is or gets cancelled.
  func acquireUnlessCancelled() async -> Bool {
    if Task.isCancelled { return false }
    if tryAcquire() { return true }
    let id = state.withLock { state -> UInt64 in
      state.nextID += 1
      return state.nextID
    }
    return await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        // The cancellation flag is set before the handler runs, so either we see it here or the
        // handler finds the waiter registered below.
        let outcome = state.withLock { state -> Bool? in
          if Task.isCancelled { return false }
          if state.inFlight < limit {
            state.inFlight += 1
            return true
          }
          state.order.append(id)
          state.waiters[id] = continuation
          return nil
        }
        if let outcome { continuation.resume(returning: outcome) }
      }
    } onCancel: {
      let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
      waiter?.resume(returning: false)
    }
  }

  /// Gives a slot back, or hands it to the oldest waiter.
  func release() {
    let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
      if let waiter = state.popOldest() { return waiter }
      precondition(state.inFlight > 0, "InFlightLimit released more often than acquired")
      state.inFlight -= 1
      return nil
    }
    next?.resume(returning: true)
  }

  private func tryAcquire() -> Bool {
    state.withLock { state in
      guard state.inFlight < limit, state.waiters.isEmpty else { return false }
      state.inFlight += 1
      return true
    }
  }
}
