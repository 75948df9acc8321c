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

  static let imageExtensions: Set<String> = ["jpg", "jpeg", "png"]

  /// The absolute, symlink-free form of `path`, to compare files.
  static func canonical(_ path: String) -> String {
    URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
  }

  static func isRegularFile(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
  }

  static func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
  }

  /// Expands folders into their JPEG/PNG files (regular files only), drops duplicates, and sorts by path.
  ///
  /// Arguments that do not exist, or that are neither a regular file nor a folder (a FIFO, a device), are rejected.
  static func collectInputs(_ arguments: [String], recursive: Bool) -> (inputs: [Input], rejected: [Decision]) {
    var inputs: [Input] = []
    var rejected: [Decision] = []
    var seen: Set<String> = []
    func add(_ path: String, subfolder: String) {
      if seen.insert(canonical(path)).inserted { inputs.append(Input(path: path, subfolder: subfolder)) }
    }
    for argument in arguments {
      if isRegularFile(argument) {
        add(argument, subfolder: "")
        continue
      }
      guard isDirectory(argument) else {
        let exists = FileManager.default.fileExists(atPath: argument)
        rejected.append(.reject(path: argument, reason: exists ? "not a regular file" : "no such file or folder"))
        continue
      }
      let listing: [String]
      if recursive {
        guard let enumerator = FileManager.default.enumerator(atPath: argument) else {
          rejected.append(.reject(path: argument, reason: "cannot list folder"))
          continue
        }
        listing = enumerator.compactMap { $0 as? String }
      } else {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: argument) else {
          rejected.append(.reject(path: argument, reason: "cannot list folder"))
          continue
        }
        listing = names
      }
      for relative in listing {
        let name = (relative as NSString).lastPathComponent
        let components = relative.split(separator: "/")
        guard !components.contains(where: { $0.hasPrefix(".") }),
          imageExtensions.contains((name as NSString).pathExtension.lowercased())
        else { continue }
        let path = (argument as NSString).appendingPathComponent(relative)
        if isRegularFile(path) { add(path, subfolder: (relative as NSString).deletingLastPathComponent) }
      }
    }
    inputs.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
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
      if let handle = FileHandle(forReadingAtPath: path) {
        defer { try? handle.close() }
        if let head = try? handle.read(upToCount: 16), let format = ImageFormat(detecting: [UInt8](head)) {
          return format
        }
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
    var outputs: [String: String] = [:]
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
      } else if !overwrite, FileManager.default.fileExists(atPath: output) {
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
