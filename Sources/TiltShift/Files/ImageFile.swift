import Spindle
import Synchronization

// TiltShift's one file of POSIX file calls (open, read, fsync, rename); everything else of the C library the package
// uses goes through the core's `Platform` shim.
#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// File input and output for images with POSIX calls: whole-file reads and atomic writes.
///
/// ``writeAtomically(_:to:replacingExisting:)`` never leaves a partial file at the destination: it
/// writes a temporary file in the destination's folder (named `.NAME.spindle-tmp-XXXXXXXX`, with a shorter stem in
/// place of a NAME too long for that), syncs it,
/// then renames it over the destination. On any failure the temporary file is removed. A process
/// killed mid-write can leave temporaries behind; ``temporaryFiles(in:)`` and
/// ``removeTemporaryFiles(in:)`` find and remove them, and ``removeInFlightTemporaryFiles(refusingNewOnes:)`` removes
/// the ones this process is writing right now (for a Ctrl-C handler). Paths go to the system as ``SystemPath`` bytes,
/// so a name that is not UTF-8 is read and written as it is.
///
/// ```swift
/// let bytes = try ImageFile.read("in.png")
/// try ImageFile.writeAtomically(bytes, to: "out/in.png")
/// ```
public enum ImageFile {
  /// The marker inside every temporary file name.
  public static let temporaryMarker = ".spindle-tmp-"

  /// The default largest file ``read(_:maxBytes:)`` accepts: 1 GiB.
  public static let defaultMaxBytes = 1 << 30

  /// Reads the whole file at `path`, refusing files larger than `maxBytes`.
  ///
  /// Throws ``ImageError/Kind/unreadableFile(reason:)`` (with the system's message, or saying the file
  /// is too large) or ``ImageError/Kind/emptyFile``; errors name the file.
  public static func read(_ path: String, maxBytes: Int = defaultMaxBytes) throws(ImageError) -> [UInt8] {
    let fd = SystemPath.withCString(path) { open($0, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { throw ImageError(.unreadableFile(reason: systemMessage(errno)), path: path) }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw ImageError(.unreadableFile(reason: systemMessage(errno)), path: path) }
    if (info.st_mode & S_IFMT) == S_IFDIR {
      throw ImageError(.unreadableFile(reason: "is a directory"), path: path)
    }
    func tooLarge(_ size: Int) -> ImageError {
      ImageError(.unreadableFile(reason: "file is \(size) bytes, more than the limit of \(maxBytes)"), path: path)
    }
    if Int(info.st_size) > maxBytes { throw tooLarge(Int(info.st_size)) }
    var bytes: [UInt8] = []
    var failure: Int32 = 0
    // One read sized from fstat, plus one byte to see end-of-file; files that grow (or pipes) loop on. Each read
    // fills a fresh array's uninitialised storage: no zero-filling first (which `append(contentsOf:
    // repeatElement(0, …))` did element by element in a debug build, 7 s per 8 MB, 31 s under ThreadSanitizer).
    var chunk = min(max(Int(info.st_size), 0), maxBytes) + 1
    while true {
      let piece = [UInt8](unsafeUninitializedCapacity: chunk) { buffer, initialized in
        var got = 0
        while got < chunk {
          let n = systemRead(fd, buffer.baseAddress! + got, chunk - got)
          if n < 0 {
            if errno == EINTR { continue }
            failure = errno
            break
          }
          if n == 0 { break }
          got += n
        }
        initialized = got
      }
      if bytes.isEmpty { bytes = piece } else { bytes.append(contentsOf: piece) }
      if piece.count < chunk || failure != 0 { break }
      if bytes.count > maxBytes { throw tooLarge(bytes.count) }
      chunk = max(65536, bytes.count)
    }
    guard failure == 0 else { throw ImageError(.unreadableFile(reason: systemMessage(failure)), path: path) }
    guard !bytes.isEmpty else { throw ImageError(.emptyFile, path: path) }
    return bytes
  }

  /// Writes `bytes` to `path` atomically: readers see the old file or the complete new one, never a part.
  ///
  /// The bytes go to a fresh temporary file next to `path` (created exclusively, permissions from the
  /// umask), which is `fsync`ed, then renamed to `path`; the folder is synced too. With
  /// `replacingExisting: false` an existing destination is left alone and
  /// ``ImageError/Kind/destinationExists`` is thrown (the check and the rename are one atomic `link`).
  /// On any failure the temporary file is removed and ``ImageError/Kind/writeFailed(reason:)`` names `path`.
  public static func writeAtomically(
    _ bytes: [UInt8], to path: String, replacingExisting: Bool = true
  ) throws(ImageError) {
    let (folder, name) = split(path)
    guard !name.isEmpty else { throw ImageError(.writeFailed(reason: "not a file name"), path: path) }
    // `.NAME` + marker + 8 digits is 22 bytes longer than NAME: for a long name, a short stem stands for it.
    let nameLimit = maxNameBytes(in: folder)
    let nameBytes = SystemPath.byteCount(of: name)
    let stem = 1 + nameBytes + temporaryMarker.utf8.count + 8 <= nameLimit ? name : shortStem(name)
    /// The system's message, or for a name too long (the destination's own, now) how long it is and may be.
    func reason(_ code: Int32) -> String {
      guard code == ENAMETOOLONG, nameBytes > nameLimit else { return systemMessage(code) }
      return "the file name is \(nameBytes) bytes, longer than its file system allows (\(nameLimit) bytes)"
    }
    var temporary = ""
    var fd: Int32 = -1
    var openError: Int32 = 0
    var refused = false
    for _ in 0..<16 {
      let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
      temporary = folder + "." + stem + temporaryMarker + String(repeating: "0", count: 8 - suffix.count) + suffix
      // Created and registered under the lock, so a concurrent removeInFlightTemporaryFiles() sees it or
      // refuses it: no temporary file can slip past a cleanup.
      inFlight.withLock { state in
        guard !state.closed else {
          refused = true
          return
        }
        fd = SystemPath.withCString(temporary) { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666) }
        openError = errno
        if fd >= 0 { state.paths.insert(temporary) }
      }
      if refused { throw ImageError(.writeFailed(reason: "the process is exiting"), path: path) }
      if fd >= 0 || openError != EEXIST { break }
    }
    guard fd >= 0 else { throw ImageError(.writeFailed(reason: reason(openError)), path: path) }
    defer { inFlight.withLock { _ = $0.paths.remove(temporary) } }

    func fail(_ code: Int32) -> ImageError {
      systemUnlink(temporary)
      return ImageError(.writeFailed(reason: reason(code)), path: path)
    }
    var code: Int32 = 0
    bytes.withUnsafeBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        if n < 0 {
          if errno == EINTR { continue }
          code = errno
          return
        }
        offset += n
      }
    }
    if code == 0 && fsync(fd) != 0 { code = errno }
    if close(fd) != 0 && code == 0 { code = errno }
    guard code == 0 else { throw fail(code) }
    if replacingExisting {
      guard systemRename(temporary, path) == 0 else { throw fail(errno) }
    } else {
      if SystemPath.withCString(temporary, { old in SystemPath.withCString(path) { link(old, $0) } }) != 0 {
        let linkError = errno
        switch linkError {
        case EEXIST:
          systemUnlink(temporary)
          throw ImageError(.destinationExists, path: path)
        case EPERM, EOPNOTSUPP, ENOSYS, EXDEV:
          // File systems without hard links (FAT, exFAT, some network shares): check, then rename. Not atomic
          // against another writer of the same name, but never replaces a file that existed before the check.
          if SystemPath.withCString(path, { access($0, F_OK) }) == 0 {
            systemUnlink(temporary)
            throw ImageError(.destinationExists, path: path)
          }
          guard systemRename(temporary, path) == 0 else { throw fail(errno) }
        default:
          systemUnlink(temporary)
          throw ImageError(.writeFailed(reason: reason(linkError)), path: path)
        }
      } else {
        systemUnlink(temporary)
      }
    }
    let folderFD = SystemPath.withCString(folder.isEmpty ? "." : folder) { open($0, O_RDONLY | O_CLOEXEC) }
    if folderFD >= 0 {
      _ = fsync(folderFD)
      close(folderFD)
    }
  }

  /// Paths of leftover temporary files (`.NAME.spindle-tmp-XXXXXXXX`) in `folder`.
  public static func temporaryFiles(in folder: String) -> [String] {
    guard let directory = SystemPath.withCString(folder.isEmpty ? "." : folder, { opendir($0) }) else { return [] }
    defer { closedir(directory) }
    var found: [String] = []
    let prefix = folder.isEmpty || folder.hasSuffix("/") ? folder : folder + "/"
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        SystemPath.string(decoding: raw.prefix(while: { $0 != 0 }))
      }
      if name.hasPrefix("."), name.contains(temporaryMarker) { found.append(prefix + name) }
    }
    return found.sorted()
  }

  /// Removes leftover temporary files in `folder` and returns how many were removed.
  @discardableResult
  public static func removeTemporaryFiles(in folder: String) -> Int {
    temporaryFiles(in: folder).reduce(0) { count, path in systemUnlink(path) == 0 ? count + 1 : count }
  }

  /// Removes leftover temporary files of the destinations `paths` (each `.NAME.spindle-tmp-XXXXXXXX` beside its
  /// destination) and returns how many were removed.
  ///
  /// For a batch that starts again after a crash or a `SIGKILL`: it clears exactly the leftovers of the outputs it
  /// is about to write, never the temporaries of another process writing other names into the same folders
  /// (another shard of the same batch, say). Each folder is listed once, however many destinations it holds.
  ///
  /// ```swift
  /// ImageFile.removeTemporaryFiles(forDestinations: ["out/a-tiltshift.jpg", "out/b-tiltshift.png"])
  /// ```
  @discardableResult
  public static func removeTemporaryFiles(forDestinations paths: [String]) -> Int {
    var removed = 0
    forEachTemporary(ofDestinations: paths) { candidate, _ in
      if systemUnlink(candidate) == 0 { removed += 1 }
    }
    return removed
  }

  /// Removes the temporary files of the existing files `paths` that are the same file as their destination (a
  /// hard link to it), and returns how many were removed.
  ///
  /// Without `replacingExisting`, ``writeAtomically(_:to:replacingExisting:)`` links the finished temporary file
  /// into place and then removes the temporary name; a process killed between the two leaves both names on one
  /// file. A later run that keeps the existing output (it refuses to replace it) clears that name with this call.
  /// A temporary that is a different file is left alone: it may be a live writer's, such as another process
  /// replacing that destination, whose write would fail if its temporary file vanished.
  ///
  /// ```swift
  /// ImageFile.removeTemporaryFiles(sameFileAs: ["out/a-tiltshift.jpg"])  // a's leftover link, nothing else
  /// ```
  @discardableResult
  public static func removeTemporaryFiles(sameFileAs paths: [String]) -> Int {
    var removed = 0
    forEachTemporary(ofDestinations: paths) { candidate, destination in
      var output = stat()
      var temporary = stat()
      guard systemLstat(destination, &output) == 0, systemLstat(candidate, &temporary) == 0 else { return }
      guard output.st_dev == temporary.st_dev, output.st_ino == temporary.st_ino else { return }
      if systemUnlink(candidate) == 0 { removed += 1 }
    }
    return removed
  }

  /// Calls `body(temporary, destination)` for every temporary file (`.NAME` + marker + 8 hex digits, or for a long
  /// name its ``shortStem(_:)`` in place of NAME) beside one of `paths`, listing each folder once.
  ///
  /// Folders and names are keyed by their bytes: two names that differ only in Unicode normalization are two files on
  /// Linux but equal `String`s, and one's temporary file must not be taken for the other's.
  private static func forEachTemporary(ofDestinations paths: [String], _ body: (String, String) -> Void) {
    var destinationsByFolder: [[UInt8]: (folder: String, destinations: [[UInt8]: String])] = [:]
    for path in paths {
      let (folder, name) = split(path)
      guard !name.isEmpty else { continue }
      let key = SystemPath.bytes(of: folder)
      if destinationsByFolder[key] == nil { destinationsByFolder[key] = (folder, [:]) }
      destinationsByFolder[key]!.destinations[SystemPath.bytes(of: name)] = path
      // Either stem, whatever the file system's limit: the one a write used depends on it.
      destinationsByFolder[key]!.destinations[SystemPath.bytes(of: shortStem(name))] = path
    }
    for (folder, destinations) in destinationsByFolder.values {
      for candidate in temporaryFiles(in: folder) {
        let file = candidate.dropFirst(folder.count)
        let suffix = file.suffix(8)
        let head = file.dropLast(8)
        guard suffix.count == 8, suffix.allSatisfy(\.isHexDigit), head.hasSuffix(temporaryMarker) else { continue }
        let name = head.dropFirst().dropLast(temporaryMarker.count)
        guard let destination = destinations[SystemPath.bytes(of: String(name))] else { continue }
        body(candidate, destination)
      }
    }
  }

  /// Removes the temporary files this process is writing at this moment and returns how many.
  ///
  /// For a cancellation handler: a write that loses its temporary file this way fails with
  /// ``ImageError/Kind/writeFailed(reason:)`` and its destination is untouched. With `refusingNewOnes`, every
  /// later ``writeAtomically(_:to:replacingExisting:)`` in this process fails at once without creating a file
  /// — for a process about to exit, so that no write can start between the cleanup and the exit.
  @discardableResult
  public static func removeInFlightTemporaryFiles(refusingNewOnes: Bool = false) -> Int {
    inFlight.withLock { state in
      if refusingNewOnes { state.closed = true }
      return state.paths.reduce(0) { count, path in systemUnlink(path) == 0 ? count + 1 : count }
    }
  }

  /// Temporary files being written right now, and whether new ones are refused.
  private struct InFlight {
    var paths: Set<String> = []
    var closed = false
  }

  private static let inFlight = TSanVisibleMutex(InFlight())

  /// The stem of a long name's temporary files: its first 100 bytes (whole characters), `~`, and 16 hex digits of
  /// a hash of the whole name (FNV-1a, the same in every process), at most 117 bytes: so `.STEM` + marker + 8 digits
  /// fits in 143 bytes, the smallest name limit of a common file system (eCryptfs), and names a single destination.
  static func shortStem(_ name: String) -> String {
    var head = ""
    var bytes = 0
    for scalar in name.unicodeScalars {
      bytes += scalar.value >= SystemPath.escapeBase ? 1 : UTF8.width(scalar)
      guard bytes <= 100 else { break }
      head.unicodeScalars.append(scalar)
    }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in name.utf8 {
      hash ^= UInt64(byte)
      hash = hash &* 0x0000_0100_0000_01B3
    }
    let digits = String(hash, radix: 16)
    return head + "~" + String(repeating: "0", count: 16 - digits.count) + digits
  }

  /// The longest file name, in bytes, the file system of `folder` holds (255 when it does not say).
  private static func maxNameBytes(in folder: String) -> Int {
    let limit = SystemPath.withCString(folder.isEmpty ? "." : folder) { pathconf($0, Int32(_PC_NAME_MAX)) }
    return limit > 0 ? limit : 255
  }

  /// `("dir/", "name")` from `"dir/name"`; `("", "name")` without a folder.
  private static func split(_ path: String) -> (folder: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return ("", path) }
    return (String(path[...slash]), String(path[path.index(after: slash)...]))
  }

  @discardableResult
  private static func systemUnlink(_ path: String) -> Int32 { SystemPath.withCString(path) { unlink($0) } }

  private static func systemRename(_ old: String, _ new: String) -> Int32 {
    SystemPath.withCString(old) { old in SystemPath.withCString(new) { rename(old, $0) } }
  }

  private static func systemLstat(_ path: String, _ info: inout stat) -> Int32 {
    SystemPath.withCString(path) { lstat($0, &info) }
  }

  private static func systemRead(_ fd: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int {
    #if canImport(Glibc)
      Glibc.read(fd, buffer, count)
    #else
      Darwin.read(fd, buffer, count)
    #endif
  }

  static func systemMessage(_ code: Int32) -> String {
    String(cString: strerror(code))
  }
}
