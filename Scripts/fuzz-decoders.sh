#!/usr/bin/env bash
# Fuzzes both decoder shims (JPEG and PNG, strict, lenient and 16-bit) with libFuzzer + AddressSanitizer +
# UndefinedBehaviorSanitizer for a bounded time, then prints the executions and the crashes found.
#
#   Scripts/fuzz-decoders.sh [SECONDS]      (default 60)
#
# Work files (binaries, corpus, crash inputs) go to $FUZZ_WORK, default ./fuzz-decoders/ (git-ignored as fuzz-*/).
# A crash input is kept as $FUZZ_WORK/artifacts/crash-*; replay it with: $FUZZ_WORK/decoders-fuzzer FILE
# Only the shims are instrumented for coverage: the system's libjpeg-turbo and libpng run uninstrumented, but
# AddressSanitizer still guards every allocation they make and every buffer the shims hand them.
set -euo pipefail

seconds="${1:-60}"
case "$seconds" in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${FUZZ_WORK:-$root/fuzz-decoders}"
cc="${CC:-clang}"
mkdir -p "$work/corpus" "$work/artifacts"

includes=(-I"$root/Sources/CJPEG/include" -I"$root/Sources/CPNG/include" -I/usr/include/libpng16)
shims=("$root/Sources/CJPEG/spindle_jpeg.c" "$root/Sources/CPNG/spindle_png.c")
build() { # the linker's notes about sanitizer symbols are noise: kept in build.log, shown on failure
  "$@" >>"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 2; }
}
: >"$work/build.log"
build "$cc" -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${includes[@]}" "$root/Scripts/fuzz/decoders_fuzzer.c" "${shims[@]}" -ljpeg -lpng16 -o "$work/decoders-fuzzer"
build "$cc" -O1 "${includes[@]}" "$root/Scripts/fuzz/make_seeds.c" "${shims[@]}" -ljpeg -lpng16 -o "$work/make-seeds"
"$work/make-seeds" "$work/corpus"

log="$work/fuzz.log"
status=0
"$work/decoders-fuzzer" "$work/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$log" 2>&1 || status=$?

executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
crashes="$(find "$work/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)"
corpus="$(find "$work/corpus" -type f | wc -l)"
echo "fuzz-decoders: ${seconds}s, executions: ${executions:-0}, crashes: $crashes, corpus: $corpus files (log: $log)"
if [ "$crashes" -gt 0 ] || [ "$status" -ne 0 ]; then
  find "$work/artifacts" -type f | sed 's/^/  artefact: /'
  grep -m1 -A12 'ERROR: \|SUMMARY: ' "$log" || true
  exit 1
fi
