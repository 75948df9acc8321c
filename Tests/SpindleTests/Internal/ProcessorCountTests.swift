import Dispatch
import SpindleTestSupport
import Testing

@testable import Spindle

/// The processors a process can use (`Platform.availableProcessorCount`, behind `WorkQueue.activeProcessorCount`, a
/// queue's default width): the online ones, narrowed by the thread's CPU affinity and the control group's CPU quota.
@Suite("Platform: the processors this process can use")
struct ProcessorCountTests {
  @Test("a cgroup v2 cpu.max gives whole processors, rounded up; 'max' is no limit")
  func cgroupV2Quota() {
    #expect(Platform.processorQuota(cpuMax: "200000 100000\n") == 2)
    #expect(Platform.processorQuota(cpuMax: "150000 100000") == 2)
    #expect(Platform.processorQuota(cpuMax: "50000 100000\n") == 1)
    #expect(Platform.processorQuota(cpuMax: "1 100000") == 1)
    #expect(Platform.processorQuota(cpuMax: "max 100000\n") == nil)
    #expect(Platform.processorQuota(cpuMax: "") == nil)
    #expect(Platform.processorQuota(cpuMax: "garbage") == nil)
  }

  @Test("a cgroup v1 CFS quota and period give whole processors, rounded up; -1 is no limit")
  func cgroupV1Quota() {
    #expect(Platform.processorQuota(cfsQuota: "300000\n", cfsPeriod: "100000\n") == 3)
    #expect(Platform.processorQuota(cfsQuota: "250000", cfsPeriod: "100000") == 3)
    #expect(Platform.processorQuota(cfsQuota: "-1\n", cfsPeriod: "100000\n") == nil)
    #expect(Platform.processorQuota(cfsQuota: "100000", cfsPeriod: "0") == nil)
    #expect(Platform.processorQuota(cfsQuota: "x", cfsPeriod: "100000") == nil)
  }

  @Test("the group of the unified hierarchy and of a v1 controller are read from /proc/self/cgroup")
  func cgroupPaths() {
    let hybrid = "9:name=systemd:/\n4:memory:/box/a\n2:cpu,cpuacct:/box/b\n0::/box/c\n"
    #expect(Platform.cgroupPath(inProcSelfCgroup: hybrid, controller: nil) == "/box/c")
    #expect(Platform.cgroupPath(inProcSelfCgroup: hybrid, controller: "cpu") == "/box/b")
    #expect(Platform.cgroupPath(inProcSelfCgroup: hybrid, controller: "cpuacct") == "/box/b")
    #expect(Platform.cgroupPath(inProcSelfCgroup: hybrid, controller: "pids") == nil)
    #expect(Platform.cgroupPath(inProcSelfCgroup: "0::/\n", controller: nil) == "/")
    #expect(Platform.cgroupPath(inProcSelfCgroup: "0::\n", controller: nil) == "/")
    #expect(Platform.cgroupPath(inProcSelfCgroup: "", controller: nil) == nil)
  }

  @Test("the count is at least 1, at most the online processors, and is a queue's default width")
  func countIsWithinTheOnlineProcessors() {
    let available = Platform.availableProcessorCount
    #expect(available >= 1)
    #expect(available <= Platform.onlineProcessorCount)
    #expect(WorkQueue.activeProcessorCount == available)
    #expect(WorkQueue().maxConcurrent == available)
  }

  #if os(Linux)
    @Test("a thread whose affinity allows one processor counts one")
    func affinityNarrowsTheCount() {
      typealias SetAffinity = @convention(c) (Int32, Int, UnsafeRawPointer?) -> Int32
      typealias GetAffinity = @convention(c) (Int32, Int, UnsafeMutableRawPointer?) -> Int32
      guard let setAffinity = Platform.lookUpFunction("sched_setaffinity", as: SetAffinity.self),
        let getAffinity = Platform.lookUpFunction("sched_getaffinity", as: GetAffinity.self)
      else {
        Issue.record("sched_setaffinity or sched_getaffinity is missing from the C library")
        return
      }
      let counted = TSanVisibleMutex<(before: Int, pinned: Int)?>(nil)
      let done = DispatchSemaphore(value: 0)
      // On a thread of its own, whose mask is changed and never given back to a pool.
      PlatformThread.start(name: "affinity-test") {
        defer { done.signal() }
        var mask = [UInt64](repeating: 0, count: 16)
        guard mask.withUnsafeMutableBytes({ getAffinity(0, $0.count, $0.baseAddress) }) == 0,
          let word = mask.firstIndex(where: { $0 != 0 })
        else { return }
        let before = Platform.availableProcessorCount
        var one = [UInt64](repeating: 0, count: 16)
        one[word] = 1 << UInt64(mask[word].trailingZeroBitCount)
        guard one.withUnsafeBytes({ setAffinity(0, $0.count, $0.baseAddress) }) == 0 else { return }
        counted.withLock { $0 = (before, Platform.availableProcessorCount) }
      }
      #expect(done.wait(timeout: .now() + 60) == .success)
      guard let (before, pinned) = counted.withLock({ $0 }) else {
        Issue.record("the thread could not read or set its affinity")
        return
      }
      #expect(pinned == 1)
      #expect(before == Platform.availableProcessorCount)
      if Platform.onlineProcessorCount >= 2 && before >= 2 {
        #expect(pinned < before, "pinning to one processor did not narrow the count")
      }
    }
  #endif
}
