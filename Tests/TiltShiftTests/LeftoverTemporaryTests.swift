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

  /// Of an existing output, only a temporary that is the same file goes (what a kill between `link` and `unlink`
  /// leaves); a temporary that is another file may be a live writer's (a run replacing that output) and stays.
  @Test func removesOnlyTheTemporariesThatAreTheExistingOutputItself() throws {
    let folder = try TemporaryFolder()
    let output = folder.path + "/a.jpg"
    try ImageFile.writeAtomically([1, 2, 3], to: output)
    let leftover = folder.path + "/.a.jpg.spindle-tmp-0badf00d"
    #expect(link(output, leftover) == 0)
    let live = folder.path + "/.a.jpg.spindle-tmp-12345678"  // another file: a writer replacing a.jpg
    Self.touch(live)
    let otherName = folder.path + "/.b.jpg.spindle-tmp-0badf00d"
    #expect(link(output, otherName) == 0)  // the same file, but under another destination's name
    let missing = folder.path + "/c.jpg"  // no output: its temporaries are not this call's
    let orphan = folder.path + "/.c.jpg.spindle-tmp-0badf00d"
    Self.touch(orphan)

    let removed = ImageFile.removeTemporaryFiles(sameFileAs: [output, missing])

    #expect(removed == 1)
    #expect(access(leftover, F_OK) != 0)
    let kept: [String] = [live, otherName, orphan]
    #expect(kept.allSatisfy { access($0, F_OK) == 0 })
    #expect(access(output, F_OK) == 0)
  }
}
