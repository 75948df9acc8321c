import Spindle

/// An operation whose body is `async`: it runs as a `Task`, and cancelling the operation cancels the task.
///
/// Use it to put Swift-concurrency work into an existing `OperationQueue` graph. The body's return value
/// or thrown error becomes the result; the operation stays executing until the task ends. Cancelling the
/// operation while it runs calls `cancel()` on the task (so `Task.isCancelled` and `Task.checkCancellation()`
/// see it); the operation still finishes only when the body returns or throws. If the operation is
/// cancelled before it starts, the body never runs.
///
/// The task runs on Swift's cooperative thread pool: do not block that pool waiting for the operation
/// (for example `waitUntilFinished()` or `addOperations(_:waitUntilFinished: true)` from `async` code or
/// from a synchronous test run on the pool), or the task may never get a thread.
///
/// ```swift
/// let fetch = TaskOperation { try await fetchThumbnail(named: "train_day") }
/// let filter = TransformOperation { (image: Image) in tiltShift(image) }
/// fetch |> filter
/// ```
// `body` (a lock) protects the closure, taken once; `priority` is immutable; the superclasses protect the rest.
public final class TaskOperation<Output: Sendable>: ResultOperation<Output>, @unchecked Sendable {
  private let body: Locked<(@Sendable () async throws -> Output)?>
  private let priority: TaskPriority?

  /// Creates an operation that runs `body` in a new task of the given priority when started.
  public init(priority: TaskPriority? = nil, _ body: @escaping @Sendable () async throws -> Output) {
    self.body = Locked(body)
    self.priority = priority
    super.init()
  }

  /// Starts the task; the operation finishes when the task's body returns or throws.
  public override func main() {
    guard let work = body.withLock({ $0.take() }) else {
      finish(throwing: OperationError.transformNotImplemented(operation: misuseName))
      return
    }
    let task = Task(priority: priority) {
      do {
        finish(returning: try await work())
      } catch {
        finish(throwing: error)
      }
    }
    onCancel { task.cancel() }
  }
}
