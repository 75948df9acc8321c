import Foundation

/// Makes a fresh temporary folder, hands it to `body`, and removes it (with everything in it) afterwards,
/// whether `body` returns or throws.
///
/// ```swift
/// try await withTemporaryFolder { folder in
///   try Data("x".utf8).write(to: folder.appendingPathComponent("x.txt"))
/// }
/// ```
package func withTemporaryFolder<T>(
  _ prefix: String = "spindle-tests",
  _ body: (URL) async throws -> T
) async throws -> T {
  let folder = try makeTemporaryFolder(prefix)
  defer { try? FileManager.default.removeItem(at: folder) }
  return try await body(folder)
}

/// The synchronous ``withTemporaryFolder(_:_:)-async``.
package func withTemporaryFolder<T>(_ prefix: String = "spindle-tests", _ body: (URL) throws -> T) throws -> T {
  let folder = try makeTemporaryFolder(prefix)
  defer { try? FileManager.default.removeItem(at: folder) }
  return try body(folder)
}

/// A new, empty folder under the system's temporary directory; the caller removes it.
package func makeTemporaryFolder(_ prefix: String = "spindle-tests") throws -> URL {
  let url = FileManager.default.temporaryDirectory
    .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
  try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  return url
}
