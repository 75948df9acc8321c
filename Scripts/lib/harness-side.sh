# Shared by the scripts that compare this tree with a base revision through a small harness package (sourced, not run).
#
# make_harness_side SIDE SPINDLE HARNESS WORK: writes $WORK/harness-$SIDE, a package whose one executable is the
# Swift file HARNESS and which depends on the Spindle package at SPINDLE by path (the package's identity is that
# folder's name), and builds it in release mode into $WORK/build-$SIDE; the binary is $WORK/build-$SIDE/release/harness.
make_harness_side() {
  local side=$1 spindle=$2 harness=$3 work=$4
  local identity
  identity=$(basename "$spindle" | tr '[:upper:]' '[:lower:]')
  mkdir -p "$work/harness-$side/Sources/harness"
  cp "$harness" "$work/harness-$side/Sources/harness/main.swift"
  cat > "$work/harness-$side/Package.swift" << SWIFT
// swift-tools-version:6.0
import PackageDescription
let package = Package(
  name: "harness",
  dependencies: [.package(path: "$spindle")],
  targets: [.executableTarget(name: "harness", dependencies: [.product(name: "Spindle", package: "$identity")])]
)
SWIFT
  echo "Building the $side side (release)…" >&2
  swift build -c release --package-path "$work/harness-$side" --scratch-path "$work/build-$side" \
    > "$work/build-$side.log" 2>&1 || {
    cat "$work/build-$side.log" >&2
    exit 1
  }
}
