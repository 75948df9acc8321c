import Dispatch

/// Runs `body(0)`, …, `body(count - 1)`, concurrently when `count > 1`, and returns when all are done.
///
/// The single place where the filter fans out across cores, so the scheduler behind it can change
/// (Dispatch's `concurrentPerform` today) without touching the filter. `count == 1` runs inline.
func parallelBands(count: Int, _ body: @Sendable (Int) -> Void) {
  if count <= 1 {
    if count == 1 { body(0) }
    return
  }
  DispatchQueue.concurrentPerform(iterations: count, execute: body)
}

/// A pointer shared by the bands of one filter phase.
///
/// Bands read shared input and write disjoint rows or columns of the output, and the phase returns
/// only when every band is done, so no two threads touch the same bytes while one of them writes.
// Safety: disjoint writes per band; `parallelBands` joins all bands before the buffers are used again.
struct SharedPointer<Pointee>: @unchecked Sendable {
  let pointer: UnsafeMutablePointer<Pointee>
  init(_ pointer: UnsafeMutablePointer<Pointee>) { self.pointer = pointer }
}
