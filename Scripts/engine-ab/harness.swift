// The workloads of `Scripts/bench-engine-ab.sh`: the engine benchmark's rows at width 2, each timed from the first
// `add` to the moment the last item has run (graph build + run), plus two halves of a chain that tell the adding
// thread's share from the worker's.
//
// Usage: harness <independent|callback|chain|fanin|dag|chain-add|chain-run> <count> <reps>
// Prints "<median> <min>": nanoseconds per item over the repetitions.
//
// Every wait is a statement of its own: under `-Ounchecked` a `precondition`'s condition is not evaluated, and a
// scratch harness that waited inside one timed only the adding of its chain and fan-in rows for several sessions.
import Dispatch
import Spindle

#if canImport(Glibc)
  import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[2]), count >= 2, let reps = Int(arguments[3]), reps >= 1 else {
  print("usage: harness <independent|callback|chain|fanin|dag|chain-add|chain-run> <count ≥ 2> <reps ≥ 1>")
  exit(2)
}
let mode = arguments[1]

/// The engine benchmark's random DAG: up to 4 edges per node, half to the 64 nodes before it, half anywhere earlier.
/// The same SplitMix64 steps as `SpindleBenchmarks`' generator, which a package outside Spindle cannot import.
func randomGraph(_ count: Int) -> [[Int]] {
  var state: UInt64 = 0x9E37_79B9_7F4A_7C15
  func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
  var graph: [[Int]] = []
  for node in 0..<count {
    var edges: [Int] = []
    if node > 0 {
      for edge in 0..<Int(next() % 5) {
        let source = edge % 2 == 0 ? node - 1 - Int(next() % UInt64(min(node, 64))) : Int(next() % UInt64(node))
        if !edges.contains(source) { edges.append(source) }
      }
    }
    graph.append(edges)
  }
  return graph
}

let graph = mode == "dag" ? randomGraph(count) : []

func nanoseconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
}

/// One repetition: the time that counts, in nanoseconds.
func once() -> Double {
  let queue = WorkQueue(name: "engine-ab", maxConcurrent: 2)
  let start = ContinuousClock.now
  switch mode {
  case "independent":
    for _ in 0..<count { queue.add {} }
    queue.waitUntilAllFinished()
  case "callback":
    // Callback bodies that call `finish` at once (issue 11: within 1.5x of sync bodies, the independent row).
    for _ in 0..<count { queue.addCallback { (finish: WorkFinish<Void>) in finish(()) } }
    queue.waitUntilAllFinished()
  case "chain", "chain-add", "chain-run":
    if mode != "chain" { queue.suspend() }
    var last = queue.add { 0 }
    for _ in 1..<count { last = queue.add(after: last) { $0 + 1 } }
    let added = ContinuousClock.now
    if mode != "chain" { queue.resume() }
    let value = try! last.wait()
    guard value == count - 1 else { fatalError("the chain computed \(value)") }
    if mode == "chain-add" { return nanoseconds(added - start) }
    if mode == "chain-run" { return nanoseconds(ContinuousClock.now - added) }
  case "fanin":
    var sources: [AnyWork] = []
    sources.reserveCapacity(count)
    for _ in 0..<count { sources.append(queue.add {}) }
    let sink = queue.add(dependencies: sources) { 1 }
    let value = try! sink.wait()
    guard value == 1 else { fatalError("fan-in did not run its sink") }
  case "dag":
    var works: [AnyWork] = []
    works.reserveCapacity(count)
    for edges in graph { works.append(queue.add(dependencies: edges.map { works[$0] }) {}) }
    queue.waitUntilAllFinished()
  default:
    print("unknown workload \(mode)")
    exit(2)
  }
  return nanoseconds(ContinuousClock.now - start)
}

var times = (0..<reps).map { _ in once() / Double(count) }
times.sort()
print(Int(times[times.count / 2]), Int(times[0]))
