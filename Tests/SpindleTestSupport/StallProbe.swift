import Dispatch
import Foundation
import Spindle

/// Watches, from a thread of its own, whether the executors every test relies on still run what is given to them,
/// and says on standard error which one stopped when one does.
///
/// A whole test process has stalled in CI: every test still running suspended, no thread busy, nothing queued on
/// the executors Spindle owns. Such a stall shows only which tests hung, not which wake-up never came. Every second
/// the probe hands four small jobs to four different paths and notes when each runs:
///
/// - `task`: a detached task on the global concurrent executor;
/// - `sleep`: a detached task that sleeps 10 ms (the global executor's timers);
/// - `dispatch`: a block on Dispatch's default global queue;
/// - `dispatchAfter`: the same block 10 ms later (Dispatch's timers).
///
/// When a job has waited more than ``reportAfter`` seconds, the probe prints one `STALL PROBE` line naming every
/// late path and how long it has waited, then the process's threads with their names and scheduler states; it
/// prints again when the late paths recover. It never changes what the tests do beyond these four jobs a second.
package enum StallProbe {
  /// How long a job may wait before the probe reports it: longer than any pause a loaded 2-core machine gives a
  /// runnable job, far shorter than the watchdog's quiet limit.
  /// `SPINDLE_STALL_PROBE_AFTER` (seconds) overrides it.
  static let reportAfter: Double =
    ProcessInfo.processInfo.environment["SPINDLE_STALL_PROBE_AFTER"].flatMap(Double.init)
    ?? 15 * hangBoundScaleWithoutProbe

  /// Starts the probe once per process; later calls do nothing. Set `SPINDLE_STALL_PROBE=0` to leave it off.
  package static func start() { _ = started }

  private static let started: Bool = {
    guard ProcessInfo.processInfo.environment["SPINDLE_STALL_PROBE"] != "0" else { return false }
    let state = Locked(ProbeState())
    let thread = Thread { run(state) }
    thread.name = "stall-probe"
    thread.start()
    return true
  }()

  private static func now() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
  }

  private static func run(_ state: Locked<ProbeState>) {
    var traced = false
    while true {
      Thread.sleep(forTimeInterval: 1)
      let time = now()
      let (send, late, recovered) = state.withLock { probe in probe.tick(at: time, reportAfter: reportAfter) }
      for path in send { post(path, to: state) }
      if !late.isEmpty {
        let paths = late.map { "\($0.path.rawValue) \(Int($0.waited)) s" }.joined(separator: ", ")
        report("STALL PROBE: jobs not run: \(paths)\n\(threadList())")
        if !traced {
          traced = true
          backtraces()
        }
      }
      if !recovered.isEmpty {
        let paths = recovered.map { "\($0.path.rawValue) after \(Int($0.waited)) s" }.joined(separator: ", ")
        report("STALL PROBE: recovered: \(paths)")
      }
    }
  }

  private static func post(_ path: ProbePath, to state: Locked<ProbeState>) {
    let ran: @Sendable () -> Void = {
      let time = now()
      state.withLock { $0.ran(path, at: time) }
    }
    switch path {
    case .task:
      Task.detached { ran() }
    case .sleep:
      Task.detached {
        try? await Task.sleep(for: .milliseconds(10))
        ran()
      }
    case .dispatch:
      DispatchQueue.global().async { ran() }
    case .dispatchAfter:
      DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { ran() }
    }
  }

  private static func report(_ text: String) {
    Platform.writeToStandardError(text + "\n")
  }

  /// With `SPINDLE_STALL_PROBE_GDB=FILE`, the first report also writes a backtrace of every thread to FILE (gdb
  /// attaches to the process for a moment), to see what the threads that hold the cores are doing.
  private static func backtraces() {
    guard let file = ProcessInfo.processInfo.environment["SPINDLE_STALL_PROBE_GDB"], !file.isEmpty,
      FileManager.default.createFile(atPath: file, contents: nil),
      let output = FileHandle(forWritingAtPath: file)
    else { return }
    let gdb = Process()
    gdb.executableURL = URL(fileURLWithPath: "/usr/bin/gdb")
    gdb.arguments = ["-p", "\(getpid())", "-batch", "-ex", "thread apply all bt 48"]
    gdb.standardOutput = output
    gdb.standardError = output
    do {
      try gdb.run()
      gdb.waitUntilExit()
    } catch {
      report("STALL PROBE: gdb did not start: \(error)")
    }
    try? output.close()
  }

  /// Every thread of the process: id, name and state (`R` running, `S` sleeping, `D` in the kernel), from /proc.
  private static func threadList() -> String {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    var counts: [String: Int] = [:]
    for tid in tasks.sorted(by: { (Int($0) ?? 0) < (Int($1) ?? 0) }) {
      let stat = (try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8)) ?? ""
      guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
      let name = String(stat[stat.index(after: open)..<close])
      let state = stat[stat.index(close, offsetBy: 2)...].prefix(1)
      counts["\(name) \(state)", default: 0] += 1
    }
    let summary = counts.sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }.joined(separator: ", ")
    return "STALL PROBE: \(tasks.count) threads: \(summary)"
  }
}

/// The four paths the probe feeds.
enum ProbePath: String, CaseIterable, Sendable {
  case task, sleep, dispatch, dispatchAfter
}

/// What the probe has sent and seen; only touched under its lock.
struct ProbeState: Sendable {
  /// A path and how long its job waited.
  typealias Wait = (path: ProbePath, waited: Double)

  /// When each path's outstanding job was sent; absent when none is outstanding.
  var sent: [ProbePath: Double] = [:]
  /// The paths already reported late (reported once until they recover).
  var reported: Set<ProbePath> = []
  /// Late paths whose job has since run, with how long it took, to report as recovered.
  var recovered: [Wait] = []

  mutating func ran(_ path: ProbePath, at time: Double) {
    guard let start = sent.removeValue(forKey: path) else { return }
    if reported.remove(path) != nil { recovered.append((path, time - start)) }
  }

  /// Paths to send a job to now (those with none outstanding), paths newly late, paths recovered since last tick.
  mutating func tick(at time: Double, reportAfter: Double) -> (send: [ProbePath], late: [Wait], recovered: [Wait]) {
    var send: [ProbePath] = []
    var late: [Wait] = []
    for path in ProbePath.allCases {
      if let start = sent[path] {
        if time - start > reportAfter, !reported.contains(path) {
          reported.insert(path)
          late.append((path, time - start))
        }
      } else {
        sent[path] = time
        send.append(path)
      }
    }
    let done = recovered
    recovered = []
    return (send, late, done)
  }
}
