#!/usr/bin/env bash
# Times the WorkQueue engine of this tree against a base revision, interleaved, on the engine benchmark's rows at
# width 2 (graph build + run), plus the two halves of a chain: adding it to a suspended queue, and running it after.
#
# Usage: Scripts/bench-engine-ab.sh --base REV [--count N] [--rounds R] [--reps K] [--workloads "a b …"]
#
# The base revision is exported with `git archive`; this tree is used as it is. Both are built in release mode
# beside a small harness (Scripts/engine-ab/harness.swift). Each workload (default: independent chain fanin dag
# chain-run chain-add; also: callback, callback bodies that call finish at once) runs R rounds (default 15) per side, sides alternating and swapping places every round; each
# run times K repetitions (default 7) of N items (default 100,000) and reports their median and minimum. The table
# shows, per side, the median over the rounds of those medians and of those minimums, and new / base for both.
# Timings on a shared 2-core machine move by ±10-20 % between runs: read ratios from many rounds, and check
# instruction counts (Scripts/bench-instructions.sh) for changes of a few per cent.
set -euo pipefail

cd "$(dirname "$0")/.."

base=""
count=100000
rounds=15
reps=7
workloads="independent chain fanin dag chain-run chain-add"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

source Scripts/lib/bench-common.sh

while (($# > 0)); do
  case "$1" in
    --base)
      base=${2:?--base needs a revision}
      shift 2
      ;;
    --count | --rounds | --reps)
      whole_number bench-engine-ab.sh "$1" "${2:-}"
      case "$1" in
        --count) count=$2 ;;
        --rounds) rounds=$2 ;;
        --reps) reps=$2 ;;
      esac
      shift 2
      ;;
    --workloads)
      workloads=${2:?--workloads needs a list}
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "bench-engine-ab.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

if [[ -z "$base" ]]; then
  echo "bench-engine-ab.sh: --base REV is required" >&2
  usage >&2
  exit 2
fi
if ((count < 2)); then
  echo "bench-engine-ab.sh: --count needs at least 2 items" >&2
  exit 2
fi
for workload in $workloads; do
  case "$workload" in
    independent | callback | chain | fanin | dag | chain-run | chain-add) ;;
    *)
      echo "bench-engine-ab.sh: unknown workload '$workload' (independent, callback, chain, fanin, dag, chain-run, chain-add)" >&2
      exit 2
      ;;
  esac
done
if ! git rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
  echo "bench-engine-ab.sh: '$base' is not a revision of this repository" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-engine-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "Exporting $base…" >&2
mkdir -p "$work/base"
git archive "$base" | tar -x -C "$work/base"

make_harness_side base "$work/base" Scripts/engine-ab/harness.swift "$work"
make_harness_side new "$PWD" Scripts/engine-ab/harness.swift "$work"

# One run: "<median> <min>" ns per item.
run() {
  "$work/build-$1/release/harness" "$2" "$count" "$reps" || {
    echo "bench-engine-ab.sh: the $1 harness failed ($2)" >&2
    exit 1
  }
}

echo "Base $base against this tree: $count items, width 2, $rounds rounds of $reps repetitions per side." >&2
printf '%-12s %14s %14s %12s %14s %14s %12s\n' workload "base median" "new median" "new/base" "base min" "new min" "new/base"
for workload in $workloads; do
  echo "$workload…" >&2
  results="$work/$workload.txt"
  : > "$results"
  for ((round = 1; round <= rounds; round++)); do
    if ((round % 2 == 1)); then
      echo "base $(run base "$workload")" >> "$results"
      echo "new $(run new "$workload")" >> "$results"
    else
      echo "new $(run new "$workload")" >> "$results"
      echo "base $(run base "$workload")" >> "$results"
    fi
  done
  python3 - "$workload" "$results" << 'PYTHON'
import statistics, sys
workload, path = sys.argv[1], sys.argv[2]
rows = {"base": [], "new": []}
for line in open(path):
    side, median, minimum = line.split()
    rows[side].append((int(median), int(minimum)))
base_median = statistics.median(m for m, _ in rows["base"])
new_median = statistics.median(m for m, _ in rows["new"])
base_min = statistics.median(n for _, n in rows["base"])
new_min = statistics.median(n for _, n in rows["new"])
print(f"{workload:<12} {base_median:>14,.0f} {new_median:>14,.0f} {new_median / base_median:>11.3f}x "
      f"{base_min:>14,.0f} {new_min:>14,.0f} {new_min / base_min:>11.3f}x")
PYTHON
done
