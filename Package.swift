// swift-tools-version:6.2
import PackageDescription

let strict: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
  name: "Spindle",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
  products: [
    .library(name: "Spindle", targets: ["Spindle"]),
    .library(name: "SpindleFoundation", targets: ["SpindleFoundation"]),
    .library(name: "TiltShift", targets: ["TiltShift"]),
    .executable(name: "spindle", targets: ["spindle"]),
  ],
  targets: [
    // The core: Dispatch + Synchronization only, never Foundation.
    .target(name: "Spindle", swiftSettings: strict),
    // Foundation.Operation interop.
    .target(name: "SpindleFoundation", dependencies: ["Spindle"], swiftSettings: strict),
    // C shims over the system image libraries (error managers that return instead of exit()).
    .target(name: "CJPEG", linkerSettings: [.linkedLibrary("jpeg")]),
    .target(name: "CPNG", linkerSettings: [.linkedLibrary("png16")]),
    .target(name: "TiltShift", dependencies: ["Spindle", "CJPEG", "CPNG"], swiftSettings: strict),
    // Benchmark suites, shared by `spindle bench`.
    .target(
      name: "SpindleBenchmarks",
      dependencies: ["Spindle", "SpindleFoundation", "TiltShift"],
      swiftSettings: strict
    ),
    .executableTarget(
      name: "spindle",
      dependencies: ["Spindle", "TiltShift", "SpindleBenchmarks"],
      swiftSettings: strict
    ),
    .testTarget(name: "SpindleTests", dependencies: ["Spindle"], swiftSettings: strict),
    .testTarget(
      name: "SpindleFoundationTests",
      dependencies: ["Spindle", "SpindleFoundation"],
      swiftSettings: strict
    ),
    .testTarget(name: "TiltShiftTests", dependencies: ["TiltShift", "Spindle"], swiftSettings: strict),
    .testTarget(name: "SpindleCLITests", dependencies: ["TiltShift", "spindle"], swiftSettings: strict),
  ]
)
