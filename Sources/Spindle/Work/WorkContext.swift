/// What a running body can learn about its own work item: its name and whether it was cancelled.
///
/// Read ``current`` from inside a body (synchronous, `async` or callback) of a ``WorkQueue``; outside a
/// body it is `nil`. Long synchronous bodies should poll ``isCancelled`` or call ``checkCancellation()``,
/// because cancelling running work only asks it to stop. `async` bodies can also rely on Task
/// cancellation (`Task.isCancelled`, `try Task.checkCancellation()`), which ``AnyWork/cancel()`` triggers.
///
/// ```swift
/// let scan = queue.add(name: "scan") {
///   var found = 0
///   for file in files {
///     try WorkContext.current?.checkCancellation()   // throws CancellationError: the work ends cancelled
///     found += try count(file)
///   }
///   return found
/// }
/// ```
public struct WorkContext: Sendable {
  let work: AnyWork

  /// The name of the queue running the body.
  ///
  /// Read when the context is made (``current``), so a context a body keeps names its queue for good. A task that a
  /// callback or `async` body started, asking for ``current`` only after the work completed, gets an empty name: the
  /// work no longer refers to its queue then (keeping the name in every item cost each one 16 bytes, and binding it to
  /// such tasks cost every callback body about 4 % more instructions).
  public let queueName: String

  /// The context of the body running on this thread or task, or `nil` outside a body.
  public static var current: WorkContext? {
    currentWork.map { work in WorkContext(work: work, queueName: work.queueName) }
  }

  /// The name of the running work item.
  public var name: String? { work.name }

  /// The priority of the running work item.
  public var priority: WorkPriority { work.priority }

  /// Whether the work was cancelled (directly or through ``WorkQueue/cancelAll()``) while its body runs.
  public var isCancelled: Bool { work.isCancellationRequested }

  /// Throws `CancellationError` if the work was cancelled; a body that lets it escape ends as cancelled.
  public func checkCancellation() throws {
    if isCancelled { throw CancellationError() }
  }

  /// Calls `handler` once if the work is cancelled while its body runs (at once if it already was).
  ///
  /// Use it to interrupt something the body blocks on, instead of polling ``isCancelled``:
  ///
  /// ```swift
  /// queue.add {
  ///   let download = Download(url)
  ///   WorkContext.current?.onCancel { download.abort() }
  ///   return try download.run()
  /// }
  /// ```
  public func onCancel(_ handler: @escaping @Sendable () -> Void) {
    work.onCancel(handler)
  }

  // MARK: - Binding

  /// The work item whose `async` body runs in this task, or whose callback body started it (its asynchronous half).
  /// One reference: a task-local value that carried the queue's name too cost every callback body about 150
  /// instructions (its push and pop go through the value's type).
  @TaskLocal static var taskWork: AnyWork?

  /// The work item whose body runs on this thread or task.
  static var currentWork: AnyWork? {
    if let work = taskWork { return work }
    guard let pointer = threadWork.value else { return nil }
    return Unmanaged<AnyWork>.fromOpaque(pointer).takeUnretainedValue()
  }

  /// Marks `work` as running on the thread whose cell of ``threadWork`` is `cell`; returns what to restore afterwards.
  @inline(__always)
  static func bind(_ work: AnyWork, cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> UnsafeMutableRawPointer? {
    let saved = cell.pointee
    cell.pointee = Unmanaged.passUnretained(work).toOpaque()
    return saved
  }

  @inline(__always)
  static func restore(_ saved: UnsafeMutableRawPointer?, cell: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
    cell.pointee = saved
  }
}

/// The thread-specific cell that holds the work item whose synchronous or callback body runs on a thread.
///
/// A worker finds its thread's cell once and binds each item with a plain store (two `pthread_setspecific` calls per
/// item were about 70 instructions of a chained item's 2,500 on its worker, under callgrind). A global, initialized
/// lazily (each read is a `swift_once` call): every ``WorkEngine`` keeps a copy in `workCell`.
let threadWork = ThreadLocalCell()
