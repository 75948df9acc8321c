#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension ImageFile {
  /// Reads at most the first `maxBytes` of the file at `path`, and its size, for a header probe.
  ///
  /// ```swift
  /// let (head, size) = try ImageFile.readPrefix("big.png", maxBytes: 1 << 18)
  /// ```
  public static func readPrefix(_ path: String, maxBytes: Int) throws(ImageError) -> (bytes: [UInt8], fileSize: Int) {
    let fd = SystemPath.withCString(path) { open($0, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { throw ImageError(.unreadableFile(reason: String(cString: strerror(errno))), path: path) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      throw ImageError(.unreadableFile(reason: String(cString: strerror(errno))), path: path)
    }
    let size = Int(info.st_size)
    let want = max(0, min(maxBytes, size))
    var bytes = [UInt8](repeating: 0, count: want)
    var got = 0
    let failed = bytes.withUnsafeMutableBytes { buffer -> Bool in
      while got < want {
        #if canImport(Glibc)
          let n = Glibc.read(fd, buffer.baseAddress! + got, want - got)
        #else
          let n = Darwin.read(fd, buffer.baseAddress! + got, want - got)
        #endif
        if n < 0 {
          if errno == EINTR { continue }
          return true
        }
        if n == 0 { break }
        got += n
      }
      return false
    }
    guard !failed else { throw ImageError(.unreadableFile(reason: String(cString: strerror(errno))), path: path) }
    bytes.removeLast(want - got)
    return (bytes, size)
  }
}
