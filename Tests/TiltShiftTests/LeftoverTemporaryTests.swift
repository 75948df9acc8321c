import Testing

@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Regression for issue 15, item 14: a batch started again after a SIGKILL removes the temporaries its own outputs
/// left, and only those (another shard may be writing other names into the same folder).
@Suite struct LeftoverTemporaryTests {
  static func touch(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT, 0o644)
    #expect(fd >= 0)
    close(fd)
  }

  @Test func removesExactlyTheLeftoversOfTheGivenDestinations() throws {
    let folder = try TemporaryFolder()
    let sub = folder.path + "/sub"
    #expect(mkdir(sub, 0o755) == 0)
    try ImageFile.writeAtomically([1], to: folder.path + "/done.jpg")
    let mine = [
      folder.path + "/.a.jpg.spindle-tmp-0badf00d",
      folder.path + "/.a.jpg.spindle-tmp-12345678",
      sub + "/.b.png.spindle-tmp-deadbeef",
    ]
    let others = [
      folder.path + "/.other.jpg.spindle-tmp-0badf00d",  // another name: another process's write
      folder.path + "/.a.jpg.spindle-tmp-notahex1",  // not a temporary name this library makes
      folder.path + "/.xa.jpg.spindle-tmp-0badf00d",  // a different name that ends like "a.jpg"
    ]
    for path in mine + others { Self.touch(path) }

    let removed = ImageFile.removeTemporaryFiles(forDestinations: [folder.path + "/a.jpg", sub + "/b.png"])

    #expect(removed == 3)
    #expect(mine.allSatisfy { access($0, F_OK) != 0 })
    #expect(others.allSatisfy { access($0, F_OK) == 0 })
    #expect(folder.files().contains("done.jpg"))
  }
}
