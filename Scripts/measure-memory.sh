#!/usr/bin/env bash
# Measures the peak resident memory of `spindle tiltshift` over four 100-megapixel PNGs (10000 x 10000 RGB),
# with the default memory budget and with --memory 2G, and prints one line per run.
#
#   Scripts/measure-memory.sh [SPINDLE_BINARY [EXTRA TILTSHIFT OPTIONS...]]
#   (default binary: a release build in $SCRATCH, built if missing)
#
# Work files (the PNGs, about 1.7 MB each, and the outputs) go to $WORK, default /tmp/spindle-memory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${WORK:-/tmp/spindle-memory}"
scratch="${SCRATCH:-$root/.build-memory}"
spindle="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$spindle" ]; then
  swift build -c release --package-path "$root" --scratch-path "$scratch" >/dev/null
  spindle="$scratch/release/spindle"
fi
rm -rf "$work" && mkdir -p "$work/in"
"${CC:-clang}" -O2 "$root/Scripts/measure-memory.c" -lz -o "$work/make-frames"
"$work/make-frames" "$work/in" 4 10000 10000
echo "inputs: $(ls "$work/in" | wc -l) PNGs of 10000x10000 RGB, $(du -sh "$work/in" | cut -f1) in all"
run() {
  local name="$1"
  shift
  rm -rf "$work/out"
  /usr/bin/time -f "%M %e" -o "$work/time.txt" "$spindle" tiltshift "$work/in" -o "$work/out" --quiet "$@" \
    2>"$work/stderr.txt" || { cat "$work/stderr.txt"; exit 1; }
  read -r kilobytes seconds <"$work/time.txt"
  echo "$name: peak RSS $((kilobytes / 1024)) MiB, $seconds s, $(ls "$work/out" | wc -l) outputs ($(tail -1 "$work/stderr.txt"))"
}
run "default budget" "$@"
run "--memory 2G" --memory 2G "$@"
run "--memory 1G" --memory 1G "$@"
