#!/usr/bin/env bash
# Measures what WorkQueue's recording hooks cost when recording is off (issue 13's "< 2 % when off").
#
# Usage: Scripts/bench-trace-hooks.sh [--pairs N] [--scratch-path DIR]
#
# Builds `spindle` in release mode twice: as it is (DIR/with-hooks), and with -DSPINDLE_MEASURE_WITHOUT_TRACE_HOOKS
# (DIR/without-hooks), which makes every engine's trace a constant nil so the compiler removes the hooks. Then
# runs `spindle bench engine --quick` with the two alternately (Scripts/bench-ab.py, N pairs, default 30) and
# prints each row's medians, their ratio and the spread of the paired ratios. The independent-items row is the
# one the issue names. Default DIR: /work/build/trace-hooks.
set -euo pipefail
cd "$(dirname "$0")/.."

pairs=30
scratch=/work/build/trace-hooks
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=${2:?--pairs needs a number}; shift 2 ;;
    --scratch-path) scratch=${2:?--scratch-path needs a folder}; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-trace-hooks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$pairs" =~ ^[1-9][0-9]{0,3}$ ]] || [ "$pairs" -lt 2 ]; then
  echo "bench-trace-hooks.sh: --pairs needs a whole number from 2 to 9999, not '$pairs'" >&2
  exit 2
fi

swift build -c release --product spindle --scratch-path "$scratch/with-hooks"
swift build -c release --product spindle --scratch-path "$scratch/without-hooks" \
  -Xswiftc -DSPINDLE_MEASURE_WITHOUT_TRACE_HOOKS
echo "baseline: recording hooks compiled out; candidate: the normal build (recording off in both)"
python3 Scripts/bench-ab.py "$scratch/without-hooks/release/spindle" "$scratch/with-hooks/release/spindle" \
  --suite engine --pairs "$pairs"
