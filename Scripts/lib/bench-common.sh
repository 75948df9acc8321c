# Shared by the benchmark scripts (sourced, not run).

# whole_number SCRIPT FLAG VALUE [DIGITS]: exits with a message naming SCRIPT unless VALUE, given to FLAG, is a whole
# number from 1 to DIGITS nines (default 7).
whole_number() {
  local digits=${4:-7}
  if ! [[ "$3" =~ ^[1-9][0-9]{0,$((digits - 1))}$ ]]; then
    echo "$1: $2 needs a whole number from 1 to $(printf '9%.0s' $(seq "$digits")), not '$3'" >&2
    exit 2
  fi
}
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

# apt_install PACKAGE...: installs Debian packages with apt-get (through sudo when not root), quietly; does nothing
# where apt-get is missing. The caller checks afterwards that what it needs is there.
apt_install() {
  command -v apt-get > /dev/null 2>&1 || return 0
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "Installing $* with apt-get…" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" > /dev/null
}

# have_tbb: whether oneTBB's headers (libtbb-dev) and g++ are there, for the oneTBB peer (Scripts/peers).
have_tbb() { [[ -f /usr/include/oneapi/tbb/flow_graph.h ]] && command -v g++ > /dev/null 2>&1; }
