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
    // The filter's innermost loops, compiled for the baseline and for AVX2, picked at run time.
    .target(name: "CFilterKernels"),
    .target(name: "TiltShift", dependencies: ["Spindle", "CJPEG", "CPNG", "CFilterKernels"], swiftSettings: strict),
    // A self-pipe signal handler: the CLI's Ctrl-C and Ctrl-\ reach it whichever thread the kernel picks.
    .target(name: "CSignals"),
    // Benchmark suites: not a product; only `spindle bench` (SpindleCLI's BenchCommand) imports them.
    .target(
      name: "SpindleBenchmarks",
      dependencies: ["Spindle", "SpindleFoundation", "TiltShift"],
      swiftSettings: strict
    ),
    // The command-line tool as a library (commands, parser, terminal), so it is tested in-process.
    .target(
      name: "SpindleCLI",
      dependencies: ["Spindle", "TiltShift", "SpindleBenchmarks", "CSignals"],
      swiftSettings: strict
    ),
    // The thin executable: main.swift only.
    .executableTarget(name: "spindle", dependencies: ["SpindleCLI"], swiftSettings: strict),
    // Helpers every test target shares: offPool, the offThePool trait, eventually, Counter, Gate, Stress, TemporaryFolder.
    .target(
      name: "SpindleTestSupport", dependencies: ["Spindle"], path: "Tests/SpindleTestSupport", swiftSettings: strict),
    .testTarget(name: "SpindleTests", dependencies: ["Spindle", "SpindleTestSupport"], swiftSettings: strict),
    .testTarget(
      name: "SpindleFoundationTests",
      dependencies: ["Spindle", "SpindleFoundation", "SpindleTestSupport"],
      swiftSettings: strict
    ),
    .testTarget(
      name: "TiltShiftTests",
      dependencies: ["TiltShift", "Spindle", "SpindleTestSupport"],
      swiftSettings: strict
    ),
    .testTarget(
      name: "SpindleCLITests",
      dependencies: ["Spindle", "TiltShift", "SpindleCLI", "spindle", "SpindleTestSupport"],
      swiftSettings: strict
    ),
  ]
)
