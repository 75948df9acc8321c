import Dispatch

extension IdentifiableDispatchQueue {
  /// Stops the process unless the calling code runs on this queue (in every build configuration).
  ///
  /// The message names the expected queue, the current one and the chain of blocked `sync` callers, e.g.
  /// `expected to run on queue 'com.app.db' but running on 'com.app.ui'`. Uses ``isCurrent``.
  ///
  /// ```swift
  /// func fillCache(_ object: Record) {
  ///   commandQueue.preconditionCurrent()
  ///   // ...
  /// }
  /// ```
  public func preconditionCurrent(
    _ message: @autoclosure () -> String = "",
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    guard !isCurrent else { return }
    // fatalError, unlike preconditionFailure, prints the message in -O builds too.
    fatalError(notCurrentMessage(message()), file: file, line: line)
  }

  /// Stops a debug build unless the calling code runs on this queue; does nothing in release builds.
  ///
  /// Same message as ``preconditionCurrent(_:file:line:)``.
  public func assertCurrent(
    _ message: @autoclosure () -> String = "",
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    assert(isCurrent, notCurrentMessage(message()), file: file, line: line)
  }

  /// The failure message of the queue assertions.
  func notCurrentMessage(_ detail: String) -> String {
    var text = "expected to run on queue '\(label)' but running on '\(Self.currentLabel)'"
    let chain = Self.currentSyncChain
    if chain.count > 1 { text += " (sync chain: \(chain.map { "'\($0)'" }.joined(separator: " → ")))" }
    if !detail.isEmpty { text += ": \(detail)" }
    return text
  }

  /// The label of the dispatch queue running the calling code, for debugging; works on any queue.
  ///
  /// Identifiable or not, the innermost queue's label is returned (a block of a queue that targets another reports its
  /// own label). On a thread that runs no queue block libdispatch reports a root queue, e.g.
  /// `com.apple.root.default-qos.overcommit`; on the main thread outside any block, `com.apple.main-thread`.
  ///
  /// ```swift
  /// print("saving on \(IDQ.currentLabel)")
  /// ```
  public static var currentLabel: String {
    if let label = CurrentQueueLabel.read() { return label }
    return QueueIdentity.nearest?.label ?? "unknown queue"
  }

  /// The labels of the identifiable queues held by the calling code, outermost blocked `sync` caller first and the
  /// current queue last; empty outside any identifiable queue.
  ///
  /// Inside `a.sync { b.sync { ... } }` this is `["a", "b"]`. Useful in logs when several queues call each other.
  public static var currentSyncChain: [String] {
    SyncChain.labels(from: SyncChain.top, current: QueueIdentity.nearest?.label)
  }
}

/// Reads the current queue's label through libdispatch's `dispatch_queue_get_label(NULL)`.
///
/// The C function is not visible through the `Dispatch` overlay, and the core target does not import libdispatch's C
/// module, so the symbol is looked up once with `Platform.lookUpFunction` (`dlsym`); nil is returned when it cannot be found (for example in a
/// statically linked executable), and callers fall back to the nearest identifiable queue's label.
private enum CurrentQueueLabel {
  typealias GetLabel = @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?

  static let function = Platform.lookUpFunction("dispatch_queue_get_label", as: GetLabel.self)

  static func read() -> String? {
    guard let function, let label = function(nil) else { return nil }
    return String(cString: label)
  }
}
