import Foundation
import SpindleTestSupport

/// Runs the built `spindle` binary and captures what it did.
struct CLIResult {
  var status: Int32
  var stdout: String
  var stderr: String
}

enum CLI {
  /// The `spindle` executable next to the test bundle in the build folder.
  static var binary: URL {
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = folder.appendingPathComponent("spindle")
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      folder.deleteLastPathComponent()
    }
    return Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("spindle")
  }

  /// Starts `spindle arguments...`; the caller may signal it before waiting.
  static func start(
    _ arguments: [String], environment: [String: String] = [:], in folder: URL? = nil
  ) throws -> (Process, Pipe, Pipe) {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    if let folder { process.currentDirectoryURL = folder }
    var env = ProcessInfo.processInfo.environment
    env["NO_COLOR"] = "1"
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    return (process, out, err)
  }

  /// Runs `spindle arguments...` to completion (killing it after `timeout` seconds).
  ///
  /// Suspends instead of blocking: the waiting happens on threads of its own, so that end-to-end tests, which
  /// take seconds, never hold one of Swift's few cooperative threads while other suites run in parallel.
  static func run(
    _ arguments: [String],
    environment: [String: String] = [:],
    in folder: URL? = nil,
    timeout: Double = 120
  ) async throws -> CLIResult {
    let (process, out, err) = try start(arguments, environment: environment, in: folder)
    return await wait(process, out, err, timeout: timeout)
  }

  /// Runs `script` with `sh -c`, `$0` being the `spindle` binary, in `folder`: for what Foundation's Process cannot
  /// do itself, such as arguments of raw bytes (Process passes UTF-8 text; the shell makes them with
  /// `$(printf '\377')`) or a working folder removed before the tool starts.
  static func runThroughShell(_ script: String, in folder: URL) async throws -> CLIResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script, binary.path]
    process.currentDirectoryURL = folder
    process.environment = ["NO_COLOR": "1", "PATH": "/usr/bin:/bin"]
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    return await wait(process, out, err)
  }

  /// Polls `condition` every 2 ms on a thread of its own until it holds or `process` ends (at most `seconds`);
  /// if it held while the process still ran, runs `action` on that thread at once (send a signal, remove a
  /// folder) and returns true.
  ///
  /// Never poll for a moment in a child's run from a task, nor act on it after an `await`: when every suite runs
  /// in parallel, the cooperative pool can be starved for seconds, and the child finishes unseen (two CI runs sent
  /// no signal to a demo that had ended meanwhile).
  @discardableResult
  static func waitWhileRunning(
    _ process: Process,
    within seconds: Double = 60,
    until condition: @escaping @Sendable () -> Bool,
    then action: @escaping @Sendable (Process) -> Void = { _ in }
  ) async -> Bool {
    await offPool {
      let deadline = Date().addingTimeInterval(seconds * hangBoundScale)
      while Date() < deadline, process.isRunning {
        if condition() {
          guard process.isRunning else { return false }
          action(process)
          return true
        }
        usleep(2_000)
      }
      return false
    }
  }

  /// Sends `signal` to `process` if it still runs; returns whether it was sent. For actions on a polling thread.
  @discardableResult
  static func signal(_ process: Process, _ signal: Int32) -> Bool {
    guard process.isRunning else { return false }
    kill(process.processIdentifier, signal)
    return true
  }

  /// Reads `pipe` up to its first newline, blocking (call it through `offPool`), at most `seconds`; nil if the
  /// pipe ends or the time passes first. It reads a byte at a time, so what follows the line stays in the pipe
  /// for ``wait(_:_:_:timeout:)``.
  static func readLine(from pipe: Pipe, within seconds: Double) -> String? {
    let descriptor = pipe.fileHandleForReading.fileDescriptor
    let deadline = Date().addingTimeInterval(seconds)
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while Date() < deadline {
      var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
      guard poll(&poller, 1, 100) >= 0 else { return nil }
      guard poller.revents != 0 else { continue }
      guard read(descriptor, &byte, 1) == 1 else { return nil }
      if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
      line.append(byte)
    }
    return nil
  }

  /// Waits for a started process (see ``start(_:environment:)``) without blocking a cooperative thread; after
  /// `timeout` seconds (times ``hangBoundScale``) the process is stopped.
  static func wait(_ process: Process, _ out: Pipe, _ err: Pipe, timeout: Double = 120) async -> CLIResult {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread {
        continuation.resume(returning: waitBlocking(process, out, err, timeout: timeout * hangBoundScale))
      }
    }
  }

  private static func waitBlocking(_ process: Process, _ out: Pipe, _ err: Pipe, timeout: Double) -> CLIResult {
    // Drain both pipes on threads of their own so a chatty child never blocks on a full pipe.
    let drained = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var stdoutData = Data()
    nonisolated(unsafe) var stderrData = Data()
    Thread.detachNewThread {
      stdoutData = out.fileHandleForReading.readDataToEndOfFile()
      drained.signal()
    }
    Thread.detachNewThread {
      stderrData = err.fileHandleForReading.readDataToEndOfFile()
      drained.signal()
    }
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning, Date() < deadline { usleep(10_000) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    drained.wait()
    drained.wait()
    return CLIResult(
      status: process.terminationStatus,
      stdout: String(decoding: stdoutData, as: UTF8.self),
      stderr: String(decoding: stderrData, as: UTF8.self)
    )
  }

  /// A fresh temporary folder for one test; the test removes it (`defer`) when it is done.
  static func temporaryFolder() throws -> URL {
    try makeTemporaryFolder("spindle-cli-tests")
  }
}
