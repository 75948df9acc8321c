import Dispatch

/// A `SerialExecutor` that runs an actor's jobs on a serial ``IdentifiableDispatchQueue``.
///
/// An actor returns the executor's ``asUnownedSerialExecutor()`` from `unownedExecutor`; its methods then run as
/// blocks of the queue, so plain queue code and the actor share one serial context. Because the executor implements
/// ``checkIsolated()``, `assumeIsolated` and `preconditionIsolated` work from plain code running on the queue
/// (a block submitted with `queue.async`, a `sync`, or a queue that targets it).
///
/// ```swift
/// actor Database {
///   let executor = QueueExecutor(label: "com.app.db")
///   nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
///   var rows: [String] = []
/// }
///
/// let db = Database()
/// db.executor.queue.async {
///   db.assumeIsolated { $0.rows.append("from plain queue code") }
/// }
/// ```
public final class QueueExecutor: SerialExecutor {
  /// The serial queue the jobs run on.
  public let queue: IdentifiableDispatchQueue

  /// Creates an executor on `queue`, which must be serial.
  ///
  /// - Precondition: `queue` is not concurrent; an actor's jobs must never run in parallel, so a concurrent queue
  ///   stops the process with a message naming it.
  public init(queue: IdentifiableDispatchQueue) {
    guard !queue.isConcurrent else {
      fatalError(
        "QueueExecutor needs a serial queue, but '\(queue.label)' is concurrent: an actor's jobs must run one at a time"
      )
    }
    self.queue = queue
  }

  /// Creates an executor on a new serial queue with the given label, quality of service and target.
  public convenience init(label: String, qos: DispatchQoS = .unspecified, target: DispatchQueue? = nil) {
    self.init(queue: IdentifiableDispatchQueue(label: label, qos: qos, target: target))
  }

  /// Runs `job` asynchronously on the queue.
  public func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    let executor = asUnownedSerialExecutor()
    queue.queue.async {
      job.runSynchronously(on: executor)
    }
  }

  /// Stops the process unless the calling code runs on the queue; called by `assumeIsolated` and
  /// `preconditionIsolated` when they are used outside a task of this executor.
  public func checkIsolated() {
    queue.preconditionCurrent("not isolated to the actor running on QueueExecutor")
  }
}
