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

  /// A name of 233 to 255 bytes could not be written: `.NAME.spindle-tmp-XXXXXXXX` is 22 bytes longer, past the
  /// 255-byte limit, and the error was a misleading "File name too long". Such a name's temporary has a short stem.
  @Test func aLongNameIsWrittenAndItsLeftoversAreStillFound() throws {
    let folder = try TemporaryFolder()
    for length in [233, 234, 240, 255] {
      let name = String(repeating: "a", count: length - 4) + ".jpg"
      try ImageFile.writeAtomically([UInt8(length & 0xFF)], to: folder.path + "/" + name)
      #expect(try ImageFile.read(folder.path + "/" + name) == [UInt8(length & 0xFF)], "\(length) bytes")
    }
    #expect(folder.files().count == 4, "no temporary left: \(folder.files().map(\.count))")
    // Two long names alike for their first 100 bytes have different stems, each within 143 bytes with its suffix.
    let long = String(repeating: "é", count: 120) + ".jpg"  // 244 bytes
    let twin = String(repeating: "é", count: 120) + ".png"
    let stem = ImageFile.shortStem(long)
    #expect(stem != ImageFile.shortStem(twin) && stem == ImageFile.shortStem(long))
    #expect(stem.hasPrefix(String(repeating: "é", count: 50) + "~") && stem.utf8.count == 117)
    #expect(1 + stem.utf8.count + ImageFile.temporaryMarker.utf8.count + 8 <= 143)
    let mine = folder.path + "/." + stem + ImageFile.temporaryMarker + "0badf00d"
    let others = folder.path + "/." + ImageFile.shortStem(twin) + ImageFile.temporaryMarker + "0badf00d"
    Self.touch(mine)
    Self.touch(others)
    #expect(ImageFile.removeTemporaryFiles(forDestinations: [folder.path + "/" + long]) == 1)
    #expect(access(mine, F_OK) != 0 && access(others, F_OK) == 0)
    // A hard link left between `link` and `unlink`, under the short stem, is found as the output's own.
    let output = folder.path + "/" + long
    try ImageFile.writeAtomically([1], to: output, replacingExisting: false)
    #expect(link(output, mine) == 0)
    #expect(ImageFile.removeTemporaryFiles(sameFileAs: [output]) == 1)
  }

  @Test func aNameTooLongForTheFileSystemIsSaidToBeOne() throws {
    let folder = try TemporaryFolder()
    let limit = pathconf(folder.path, Int32(_PC_NAME_MAX))
    let name = String(repeating: "b", count: limit + 5)
    do {
      try ImageFile.writeAtomically([1], to: folder.path + "/" + name)
      Issue.record("a \(limit + 5)-byte name was written")
    } catch {
      #expect(
        error.kind
          == .writeFailed(
            reason: "the file name is \(limit + 5) bytes, longer than its file system allows (\(limit) bytes)"))
    }
    #expect(folder.files().isEmpty, "no temporary left")
  }
}
