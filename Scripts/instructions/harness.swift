// The workloads of `Scripts/bench-instructions.sh`: the engine benchmark's independent-items and chain rows (and
// the chain built with `dependencies:`), run once each so that callgrind can count their instructions.
//
// Usage: harness <independent|after|dependencies|fanin|callback|async|taskgroup> <count>
// A count of 0 runs the same code with no items: the script subtracts that run's instructions (process start,
// the queue, the waits) from the full run's to get the instructions per item.
import Dispatch
import Spindle

#if canImport(Glibc)
  import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), count >= 0 else {
  print("usage: harness <independent|after|dependencies|fanin|callback|async|taskgroup> <count>")
  exit(2)
}

let queue = WorkQueue(name: "instructions", maxConcurrent: 2)
switch arguments[1] {
case "independent":
  for _ in 0..<count { queue.add {} }
  queue.waitUntilAllFinished()
case "after":
  // The engine benchmark's chain row: typed values passed along.
  var last = queue.add { 0 }
  for _ in 0..<count { last = queue.add(after: last) { $0 + 1 } }
  guard try last.wait() == count else { fatalError("the chain computed a wrong value") }
case "dependencies":
  var previous: AnyWork = queue.add {}
  for _ in 0..<count { previous = queue.add(dependencies: [previous]) {} }
  queue.waitUntilAllFinished()
case "callback":
  // Callback bodies that call `finish` at once (issue 11: within 1.5x of sync bodies).
  for _ in 0..<count { queue.addCallback { (finish: WorkFinish<Void>) in finish(()) } }
  queue.waitUntilAllFinished()
case "async":
  // `async` bodies: each runs in a task of its own (issue 11: within 1.5x of a withTaskGroup child task).
  for _ in 0..<count { queue.add { () async in } }
  queue.waitUntilAllFinished()
case "taskgroup":
  // The peer of the async row: a child task per item in a task group.
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<count { group.addTask {} }
    }
    done.signal()
  }
  done.wait()
case "fanin":
  var items: [AnyWork] = []
  items.reserveCapacity(count)
  for _ in 0..<count { items.append(queue.add {}) }
  let last = queue.add(dependencies: items) { 1 }
  guard try last.wait() == 1 else { fatalError("fan-in did not run") }
default:
  print("harness: unknown workload '\(arguments[1])'")
  exit(2)
}
