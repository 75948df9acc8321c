import Dispatch
import SpindleTestSupport
import Testing

@testable import TiltShift

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A fresh folder under /tmp, removed (with its files) when the value is released.
final class TemporaryFolder {
  let path: String

  init() throws {
    var template = Array("/tmp/tiltshift-tests-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw ImageError(.writeFailed(reason: "mkdtemp failed")) }
    path = String(cString: made)
  }

  func files() -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  deinit {
    for name in files() {
      let full = path + "/" + name
      if unlink(full) != 0 { rmdir(full) }
    }
    rmdir(path)
  }
}

@Suite("Image files", .offThePool)
struct ImageFileTests {
  @Test func writeAtomicallyWritesTheBytesAndNoTemporary() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/out.png"
    try ImageFile.writeAtomically([1, 2, 3], to: path)
    #expect(try ImageFile.read(path) == [1, 2, 3])
    try ImageFile.writeAtomically([4, 5], to: path)
    #expect(try ImageFile.read(path) == [4, 5])
    #expect(folder.files() == ["out.png"])
    #expect(ImageFile.temporaryFiles(in: folder.path).isEmpty)
  }

  @Test func aFailedRenameLeavesNoTemporary() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/taken.jpg"
    #expect(mkdir(path, 0o755) == 0)  // a folder where the file should go: rename fails
    do {
      try ImageFile.writeAtomically([1, 2, 3], to: path)
      Issue.record("expected a write failure")
    } catch {
      guard case .writeFailed = error.kind else {
        Issue.record("unexpected \(error)")
        return
      }
      #expect(error.path == path)
    }
    #expect(folder.files() == ["taken.jpg"])
  }

  @Test func aMissingFolderIsAnError() throws {
    let folder = try TemporaryFolder()
    #expect(throws: ImageError.self) { try ImageFile.writeAtomically([1], to: folder.path + "/nope/out.jpg") }
    #expect(folder.files().isEmpty)
  }

  @Test func notReplacingKeepsTheExistingFile() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/keep.png"
    try ImageFile.writeAtomically([9], to: path)
    do {
      try ImageFile.writeAtomically([1, 2], to: path, replacingExisting: false)
      Issue.record("expected destinationExists")
    } catch {
      #expect(error.kind == .destinationExists)
    }
    #expect(try ImageFile.read(path) == [9])
    #expect(folder.files() == ["keep.png"])
    try ImageFile.writeAtomically([3], to: folder.path + "/new.png", replacingExisting: false)
    #expect(folder.files() == ["keep.png", "new.png"])
  }

  @Test func leftoverTemporariesAreFoundAndRemoved() throws {
    let folder = try TemporaryFolder()
    try ImageFile.writeAtomically([1], to: folder.path + "/a.jpg")
    let leftover = folder.path + "/.b.jpg.spindle-tmp-0badf00d"
    let fd = open(leftover, O_WRONLY | O_CREAT, 0o644)
    #expect(fd >= 0)
    close(fd)
    #expect(ImageFile.temporaryFiles(in: folder.path) == [leftover])
    #expect(ImageFile.removeTemporaryFiles(in: folder.path) == 1)
    #expect(folder.files() == ["a.jpg"])
  }

  @Test func filesAboveTheSizeLimitAreRefused() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/big.jpg"
    try ImageFile.writeAtomically([UInt8](repeating: 1, count: 1000), to: path)
    #expect(try ImageFile.read(path, maxBytes: 1000).count == 1000)
    do {
      _ = try ImageFile.read(path, maxBytes: 999)
      Issue.record("expected a refusal")
    } catch {
      guard case .unreadableFile(let reason) = error.kind else {
        Issue.record("unexpected \(error)")
        return
      }
      #expect(reason.contains("more than the limit"))
    }
  }

  @Test func readsLargeFilesWhole() throws {
    let folder = try TemporaryFolder()
    let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    try ImageFile.writeAtomically(bytes, to: folder.path + "/big.bin")
    #expect(try ImageFile.read(folder.path + "/big.bin") == bytes)
  }

  /// A pipe has no size to read up front: `read` takes it in growing pieces (1 byte, 64 KiB, then doubling) until
  /// end-of-file, and must give back every byte in order.
  @Test func readsAPipeThatHasNoSizeWhole() throws {
    let folder = try TemporaryFolder()
    let path = folder.path + "/pipe.jpg"
    #expect(mkfifo(path, 0o600) == 0)
    let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
    let written = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      let fd = open(path, O_WRONLY)
      if fd >= 0 {
        bytes.withUnsafeBytes { raw in
          var offset = 0
          while offset < raw.count {
            let n = write(fd, raw.baseAddress! + offset, Swift.min(4096, raw.count - offset))
            if n <= 0 { break }
            offset += n
          }
        }
        close(fd)
      }
      written.signal()
    }
    let read = try ImageFile.read(path)
    written.wait()
    #expect(read.count == bytes.count)
    #expect(read == bytes)
  }

  @Test func appendingZerosKeepsWhatWasThereAndAddsExactlyThatManyZeros() {
    for (start, added) in [(0, 0), (3, 1), (5, 65_536), (7, 65_537), (1, 200_001)] {
      var bytes = [UInt8](repeating: 0xA5, count: start)
      bytes.appendZeros(added)
      #expect(bytes.count == start + added)
      #expect(bytes.prefix(start).allSatisfy { $0 == 0xA5 })
      #expect(bytes.dropFirst(start).allSatisfy { $0 == 0 })
    }
  }
}
