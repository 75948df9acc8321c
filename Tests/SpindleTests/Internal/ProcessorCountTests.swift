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

  @Test("the quota is the smallest limit of the group and the groups above it, in cgroup v2 or v1")
  func quotaOfTheGroupAndItsParents() {
    func files(_ contents: [String: String]) -> (String) -> String? { { contents[$0] } }
    // cgroup v2: the parent's 1.5 processors bind the child's unlimited group; the root has no cpu.max.
    let v2 = files([
      "/sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
      "/sys/fs/cgroup/box/cpu.max": "150000 100000\n",
      "/sys/fs/cgroup/box/app/cpu.max": "max 100000\n",
    ])
    #expect(Platform.processorQuota(cgroupMembership: "0::/box/app\n", readFile: v2) == 2)
    // The child's own limit, when smaller.
    let v2Child = files([
      "/sys/fs/cgroup/cgroup.controllers": "cpu\n",
      "/sys/fs/cgroup/box/cpu.max": "400000 100000\n",
      "/sys/fs/cgroup/box/app/cpu.max": "100000 100000\n",
    ])
    #expect(Platform.processorQuota(cgroupMembership: "0::/box/app\n", readFile: v2Child) == 1)
    // A container whose own group is mounted as the hierarchy's root, while /proc/self/cgroup names the host's path.
    let v2Container = files(["/sys/fs/cgroup/cgroup.controllers": "cpu\n", "/sys/fs/cgroup/cpu.max": "300000 100000"])
    #expect(Platform.processorQuota(cgroupMembership: "0::/docker/abc\n", readFile: v2Container) == 3)
    #expect(Platform.processorQuota(cgroupMembership: "0::/\n", readFile: v2Container) == 3)
    // No limit anywhere.
    let v2Free = files(["/sys/fs/cgroup/cgroup.controllers": "cpu\n", "/sys/fs/cgroup/a/cpu.max": "max 100000\n"])
    #expect(Platform.processorQuota(cgroupMembership: "0::/a\n", readFile: v2Free) == nil)
    // cgroup v1 (a hybrid host: the unified hierarchy is not at /sys/fs/cgroup), the cpu controller's group and parent.
    let v1 = files([
      "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
      "/sys/fs/cgroup/cpu/box/cpu.cfs_quota_us": "250000\n", "/sys/fs/cgroup/cpu/box/cpu.cfs_period_us": "100000\n",
      "/sys/fs/cgroup/cpu/box/app/cpu.cfs_quota_us": "-1\n",
      "/sys/fs/cgroup/cpu/box/app/cpu.cfs_period_us": "100000\n",
    ])
    let membership = "4:memory:/box\n2:cpu,cpuacct:/box/app\n0::/box/app\n"
    #expect(Platform.processorQuota(cgroupMembership: membership, readFile: v1) == 3)
    #expect(Platform.processorQuota(cgroupMembership: "2:cpu,cpuacct:/\n", readFile: v1) == nil)
    #expect(Platform.processorQuota(cgroupMembership: "", readFile: files([:])) == nil)
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
