import Foundation

/// The files a `tiltshift` run will read and write, decided before any pixel is touched.
struct BatchPlan {
  struct Entry {
    var input: String
    var output: String
  }

  /// Inputs paired with their outputs, in sorted input order.
  var entries: [Entry] = []
  /// Inputs that cannot be processed at all (missing, unreadable folder, would overwrite an input...).
  var rejected: [(path: String, reason: String)] = []

  static let imageExtensions: Set<String> = ["jpg", "jpeg", "png"]

  /// Expands folders into their JPEG/PNG files, drops duplicates, and sorts by path.
  static func collectInputs(_ arguments: [String], recursive: Bool) -> (files: [String], rejected: [(String, String)]) {
    let fileManager = FileManager.default
    var files: [String] = []
    var rejected: [(String, String)] = []
    var seen: Set<String> = []
    func add(_ path: String) {
      let canonical = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
      if seen.insert(canonical).inserted { files.append(path) }
    }
    for argument in arguments {
      var isDirectory: ObjCBool = false
      guard fileManager.fileExists(atPath: argument, isDirectory: &isDirectory) else {
        rejected.append((argument, "no such file or folder"))
        continue
      }
      guard isDirectory.boolValue else {
        add(argument)
        continue
      }
      let listing: [String]
      do {
        if recursive {
          guard let enumerator = fileManager.enumerator(atPath: argument) else {
            throw CocoaError(.fileReadUnknown)
          }
          listing = enumerator.compactMap { $0 as? String }
        } else {
          listing = try fileManager.contentsOfDirectory(atPath: argument)
        }
      } catch {
        rejected.append((argument, "cannot list folder"))
        continue
      }
      for name in listing.sorted() {
        let last = (name as NSString).lastPathComponent
        guard !last.hasPrefix("."), imageExtensions.contains((last as NSString).pathExtension.lowercased()) else {
          continue
        }
        let path = (argument as NSString).appendingPathComponent(name)
        var childIsDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: path, isDirectory: &childIsDirectory), !childIsDirectory.boolValue {
          add(path)
        }
      }
    }
    return (files.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, rejected)
  }

  /// The `index`-th (1-based) of `count` contiguous, disjoint slices of `items`; together they cover all items.
  static func shard<T>(_ items: [T], index: Int, count: Int) -> ArraySlice<T> {
    precondition(count >= 1 && (1...count).contains(index), "shard \(index)/\(count) out of range")
    let start = items.count * (index - 1) / count
    let end = items.count * index / count
    return items[start..<end]
  }

  /// Parses `K/N` for `--shard`.
  static func parseShard(_ text: String) -> (index: Int, count: Int)? {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]), count >= 1,
      (1...count).contains(index)
    else { return nil }
    return (index, count)
  }

  /// Pairs each input with an output path in `outputFolder`, refusing anything that would overwrite an input,
  /// collide with another output, or (without `overwrite`) replace an existing file.
  static func make(
    inputs: [String],
    outputFolder: String,
    suffix: String,
    format: String,
    overwrite: Bool
  ) -> BatchPlan {
    var plan = BatchPlan()
    func canonical(_ path: String) -> String {
      URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }
    let inputSet = Set(inputs.map(canonical))
    var outputs: [String: String] = [:]
    for input in inputs {
      let name = (input as NSString).lastPathComponent
      let stem = (name as NSString).deletingPathExtension
      let inputExtension = (name as NSString).pathExtension
      let outputExtension: String
      switch format {
      case "jpeg": outputExtension = "jpg"
      case "png": outputExtension = "png"
      default: outputExtension = inputExtension.isEmpty ? "png" : inputExtension
      }
      let output = (outputFolder as NSString).appendingPathComponent("\(stem)\(suffix).\(outputExtension)")
      let key = canonical(output)
      if inputSet.contains(key) {
        plan.rejected.append((input, "output \(output) would overwrite an input; choose another -o or --suffix"))
      } else if let other = outputs[key] {
        plan.rejected.append((input, "output \(output) is already the output of \(other)"))
      } else if !overwrite, FileManager.default.fileExists(atPath: output) {
        plan.rejected.append((input, "output \(output) exists (pass --overwrite to replace it)"))
      } else {
        outputs[key] = input
        plan.entries.append(Entry(input: input, output: output))
      }
    }
    return plan
  }
}
