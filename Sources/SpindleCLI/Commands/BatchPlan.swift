import Foundation
import TiltShift

/// The files a `tiltshift` run will read and write, decided before any pixel is touched.
///
/// The plan is made over *every* input, then sharded, so that every shard of a `--shard K/N` run agrees on
/// which outputs collide with inputs or with each other.
struct BatchPlan {
  /// One input the run found: where it came from, relative to the folder argument that named it.
  struct Input {
    var path: String
    /// Sub-folder under the folder argument (empty for files named directly); mirrored under `-o`.
    var subfolder: String
  }

  /// What the plan decided for one input, in sorted input order.
  enum Decision {
    case process(BatchItem)
    /// `existingOutput`: the input's output, when it is refused only because that file exists. A temporary file of
    /// its name that is the same file (a hard link) is still this run's to remove: a run killed between linking a
    /// finished output into place and removing the temporary name leaves both.
    case reject(path: String, reason: String, existingOutput: String? = nil)
  }

  var decisions: [Decision] = []

  /// The extensions (lower-cased) of the files a folder contributes: `.jfif` and `.jpe` are JPEG too.
  static let imageExtensions: Set<String> = ["jpg", "jpeg", "jpe", "jfif", "png"]

  /// The absolute, symlink-free form of `path`, to compare files: the system's `realpath` of its longest existing
  /// head, then the rest with `.` dropped and `..` taken off lexically. Its bytes are the key: two names that differ
  /// only in Unicode normalization (`é` as one scalar or as `e` and an accent) are two files on Linux, but equal
  /// `String`s.
  static func canonical(_ path: String) -> [UInt8] {
    func resolve(_ bytes: [UInt8]) -> [UInt8] {
      let path = bytes.isEmpty ? [UInt8(ascii: ".")] : bytes
      if let resolved = (path + [0]).withUnsafeBufferPointer({ buffer in
        buffer.withMemoryRebound(to: CChar.self) { realpath($0.baseAddress!, nil) }
      }) {
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
      }
      var trimmed = path[...]
      while trimmed.count > 1 && trimmed.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
      let slash = trimmed.lastIndex(of: UInt8(ascii: "/"))
      let last = Array(slash.map { trimmed[($0 + 1)...] } ?? trimmed)
      let head: [UInt8] = slash.map { $0 == trimmed.startIndex ? [UInt8(ascii: "/")] : Array(trimmed[..<$0]) } ?? []
      // "/" itself unresolvable, or "." when the working folder was deleted: nothing more to do (resolving "." again
      // recursed until the stack overflowed).
      if head == path || (head.isEmpty && last == [UInt8(ascii: ".")]) { return path }
      let base = resolve(head)
      switch last {
      case [], [UInt8(ascii: ".")]: return base
      case [UInt8(ascii: "."), UInt8(ascii: ".")]:
        guard let up = base.lastIndex(of: UInt8(ascii: "/")) else { return base }
        return up == 0 ? [UInt8(ascii: "/")] : Array(base[..<up])
      default: return (base.last == UInt8(ascii: "/") ? base : base + [UInt8(ascii: "/")]) + last
      }
    }
    return resolve(SystemPath.bytes(of: path))
  }

  /// `stat` of `path` (escaped bytes passed as the bytes they stand for), or nil when it fails.
  static func status(_ path: String, followingLinks: Bool = true) -> stat? {
    var info = stat()
    let result = SystemPath.withCString(path) { followingLinks ? stat($0, &info) : lstat($0, &info) }
    return result == 0 ? info : nil
  }

  static func isRegularFile(_ path: String) -> Bool {
    status(path).map { ($0.st_mode & S_IFMT) == S_IFREG } ?? false
  }

  static func isDirectory(_ path: String) -> Bool {
    status(path).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
  }

  /// Creates the folder at `path` and any missing parents: nil when it is a folder then, else what went wrong in the
  /// system's words, naming the parent it concerns when it is not `path` itself (`out/a.jpg is a file`).
  ///
  /// Foundation's `createDirectory` said only "The operation could not be completed. (NSCocoaErrorDomain error
  /// 512.)" for a parent that is a file.
  /// The path without its last component, as `NSString.deletingLastPathComponent` gives it (`a/b/` → `a`, `a` → "",
  /// `/a` → `/`), in plain Swift: that method traps on any one-character string in Swift 6.3.1's Foundation on Linux,
  /// so `-o x` crashed the tool.
  static func parentPath(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "" }
    var parent = trimmed[..<slash]
    while parent.count > 1 && parent.hasSuffix("/") { parent = parent.dropLast() }
    return parent.isEmpty ? "/" : String(parent)
  }

  static func makeFolder(_ path: String) -> String? {
    let top = path
    func make(_ path: String) -> String? {
      if let info = status(path) {
        guard (info.st_mode & S_IFMT) != S_IFDIR else { return nil }
        return path == top ? "a file of that name exists" : "\(path) is a file, not a folder"
      }
      let parent = parentPath(of: path)
      if !parent.isEmpty, parent != path, let failure = make(parent) { return failure }
      if SystemPath.withCString(path, { mkdir($0, 0o777) }) == 0 { return nil }
      let code = errno
      if code == EEXIST && isDirectory(path) { return nil }
      return path == top ? systemMessage(code) : "\(path): \(systemMessage(code))"
    }
    return make(path)
  }

  /// The names in the folder at `path` (without `.` and `..`), or the system's reason it cannot be listed.
  ///
  /// A name that is not valid UTF-8 keeps its bytes (``SystemPath``): `String(decoding:as:)` made `\xFF.jpg` into
  /// `\u{FFFD}.jpg`, which does not exist, so such files were left out without a word.
  static func listFolder(_ path: String) -> Result<[String], FolderListingError> {
    guard let directory = SystemPath.withCString(path, { opendir($0) }) else {
      return .failure(FolderListingError(reason: systemMessage(errno)))
    }
    defer { closedir(directory) }
    var names: [String] = []
    while true {
      errno = 0
      guard let entry = readdir(directory) else {
        if errno != 0 { return .failure(FolderListingError(reason: systemMessage(errno))) }
        return .success(names)
      }
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        SystemPath.string(decoding: raw.prefix(while: { $0 != 0 }))
      }
      if name != "." && name != ".." { names.append(name) }
    }
  }

  /// Why a folder could not be listed: the system's message.
  struct FolderListingError: Error {
    var reason: String
  }

  static func systemMessage(_ code: Int32) -> String { String(cString: strerror(code)) }

  /// A folder's identity on disk (device and inode), however a path names it (relative, `..`, symbolic links).
  struct FolderIdentity: Equatable {
    var device: UInt64
    var inode: UInt64

    /// The identity of the folder at `path`, or nil when there is none (yet).
    init?(_ path: String) {
      guard let info = BatchPlan.status(path), (info.st_mode & S_IFMT) == S_IFDIR else { return nil }
      self.init(info)
    }

    init(_ info: stat) {
      device = UInt64(info.st_dev)
      inode = UInt64(info.st_ino)
    }
  }

  /// The paths under `folder`, relative to it, with those of its sub-folders (never through a symbolic link to a
  /// folder, nor into a folder whose name starts with `.`, nor into `skipping`: the output folder, whose files a
  /// second run would otherwise take for inputs), and each sub-folder that could not be listed with why.
  static func walk(
    _ folder: String, skipping: FolderIdentity? = nil, list: (String) -> Result<[String], FolderListingError>
  ) -> (paths: [String], unlisted: [(path: String, reason: String)]) {
    var paths: [String] = []
    var unlisted: [(path: String, reason: String)] = []
    var pending: [String] = []
    func add(_ names: [String], under relative: String) {
      for name in names {
        let child = relative.isEmpty ? name : relative + "/" + name
        paths.append(child)
        let full = (folder as NSString).appendingPathComponent(child)
        if !name.hasPrefix("."), let info = status(full, followingLinks: false), (info.st_mode & S_IFMT) == S_IFDIR,
          skipping == nil || FolderIdentity(info) != skipping
        {
          pending.append(child)
        }
      }
    }
    switch list(folder) {
    case .success(let names): add(names, under: "")
    case .failure(let error): return ([], [(folder, error.reason)])
    }
    while let relative = pending.popLast() {
      let path = (folder as NSString).appendingPathComponent(relative)
      switch list(path) {
      case .success(let names): add(names, under: relative)
      case .failure(let error): unlisted.append((path, error.reason))
      }
    }
    return (paths, unlisted)
  }

  /// Expands folders into their JPEG/PNG files (regular files only), drops duplicates, and sorts by path.
  ///
  /// Arguments that do not exist, or that are neither a regular file nor a folder (a FIFO, a device), are rejected,
  /// and so is each folder (with `recursive`, each sub-folder) that cannot be listed, with the system's reason: its
  /// photos would otherwise be left out without a word. With `recursive`, the folder `outputFolder` (however it is
  /// named) is not descended into when it lies under an input folder: its files are this tool's outputs, and a
  /// second run took them for inputs. `list` lists one folder (a test's stand-in may refuse some).
  static func collectInputs(
    _ arguments: [String], recursive: Bool, outputFolder: String? = nil,
    list: (String) -> Result<[String], FolderListingError> = listFolder
  ) -> (inputs: [Input], rejected: [Decision]) {
    let output = outputFolder.flatMap { FolderIdentity($0) }
    var inputs: [Input] = []
    var rejected: [Decision] = []
    var seen: Set<[UInt8]> = []
    func add(_ path: String, subfolder: String) {
      if seen.insert(canonical(path)).inserted { inputs.append(Input(path: path, subfolder: subfolder)) }
    }
    for argument in arguments {
      if isRegularFile(argument) {
        add(argument, subfolder: "")
        continue
      }
      guard isDirectory(argument) else {
        let exists = status(argument) != nil
        rejected.append(.reject(path: argument, reason: exists ? "not a regular file" : "no such file or folder"))
        continue
      }
      let listing: [String]
      if recursive {
        let (paths, unlisted) = walk(argument, skipping: output, list: list)
        for (path, reason) in unlisted {
          rejected.append(.reject(path: path, reason: "cannot list folder: \(reason)"))
        }
        listing = paths
      } else {
        switch list(argument) {
        case .success(let names): listing = names
        case .failure(let error):
          rejected.append(.reject(path: argument, reason: "cannot list folder: \(error.reason)"))
          continue
        }
      }
      for relative in listing {
        let name = (relative as NSString).lastPathComponent
        let components = relative.split(separator: "/")
        guard !components.contains(where: { $0.hasPrefix(".") }),
          imageExtensions.contains((name as NSString).pathExtension.lowercased())
        else { continue }
        let path = (argument as NSString).appendingPathComponent(relative)
        if isRegularFile(path) { add(path, subfolder: parentPath(of: relative)) }
      }
    }
    inputs.sort { SystemPath.bytes(of: $0.path).lexicographicallyPrecedes(SystemPath.bytes(of: $1.path)) }
    return (inputs, rejected)
  }

  /// The `index`-th (1-based) of `count` contiguous, disjoint slices of `0..<total`; together they cover it.
  static func shardRange(total: Int, index: Int, count: Int) -> Range<Int> {
    precondition(count >= 1 && (1...count).contains(index), "shard \(index)/\(count) out of range")
    func bound(_ k: Int) -> Int {
      // total * k / count without overflow, whatever the sizes.
      let (high, low) = total.multipliedFullWidth(by: k)
      return count.dividingFullWidth((high, low)).quotient
    }
    return bound(index - 1)..<bound(index)
  }

  /// Parses `K/N` for `--shard`.
  static func parseShard(_ text: String) -> (index: Int, count: Int)? {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]), count >= 1,
      (1...count).contains(index)
    else { return nil }
    return (index, count)
  }

  /// The output format for an input under `--format`: explicit, or (`same`) the format its bytes are in.
  static func outputFormat(for path: String, choice: String) -> ImageFormat {
    switch choice {
    case "jpeg": return .jpeg
    case "png": return .png
    default:
      if let head = try? ImageFile.readPrefix(path, maxBytes: 16).bytes, let format = ImageFormat(detecting: head) {
        return format
      }
      return ImageFormat(pathExtensionOf: path) ?? .png
    }
  }

  /// Pairs each input with an output path under `outputFolder` (mirroring sub-folders), refusing anything that
  /// would overwrite an input, collide with another output, or (without `overwrite`) replace an existing file.
  static func make(
    inputs: [Input],
    outputFolder: String,
    suffix: String,
    format: String,
    overwrite: Bool
  ) -> BatchPlan {
    var plan = BatchPlan()
    let inputSet = Set(inputs.map { canonical($0.path) })
    var outputs: [[UInt8]: String] = [:]
    for input in inputs {
      let name = (input.path as NSString).lastPathComponent
      let stem = (name as NSString).deletingPathExtension
      let outputFormat = outputFormat(for: input.path, choice: format)
      let folder = (outputFolder as NSString).appendingPathComponent(input.subfolder)
      let output = (folder as NSString).appendingPathComponent("\(stem)\(suffix).\(outputFormat.fileExtension)")
      let key = canonical(output)
      if inputSet.contains(key) {
        plan.decisions.append(
          .reject(path: input.path, reason: "output \(output) would overwrite an input; choose another -o or --suffix")
        )
      } else if let other = outputs[key] {
        plan.decisions.append(.reject(path: input.path, reason: "output \(output) is already the output of \(other)"))
      } else if !overwrite, status(output) != nil {
        plan.decisions.append(
          .reject(
            path: input.path, reason: "output \(output) exists (pass --overwrite to replace it)", existingOutput: output
          ))
      } else {
        outputs[key] = input.path
        plan.decisions.append(.process(BatchItem(input: input.path, output: output, format: outputFormat)))
      }
    }
    return plan
  }
}
