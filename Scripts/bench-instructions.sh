#!/usr/bin/env bash
# Counts the instructions the WorkQueue engine spends per item, for this tree and a base revision, with
# callgrind: a count that does not depend on what else the machine is doing, so a cost of a few per cent can be
# seen on a shared, noisy machine where timings cannot show it (issue 12's rule: the engine benchmark's
# independent-items and chain rows may regress by at most 5 % when no part-two feature is used).
#
# Usage: Scripts/bench-instructions.sh [--base REV] [--count N] [--repeats R] [--workloads "a b …"] [--peer]
#                                      [--no-install]
#
# The base revision (default c6090d0, the engine before WorkQueue part two) is exported with `git archive`; this
# tree is used as it is. Both are built in release mode beside a small harness (Scripts/instructions/harness.swift)
# and each workload (default: independent after dependencies fanin; also: callback, async, and taskgroup, the
# async row's peer, which does not use Spindle) runs R times (default 3) per side under
# `valgrind --tool=callgrind`, sides alternating, with N items (default 20,000) and with none; the instructions
# per item are (full run - empty run) / N. The table shows each side's median and the ratio new / base.
# Worker threads that find nothing to run spin a little before they sleep, so the counts vary by about 1-2 %
# between repeats; the ratio of medians is what to read. With --peer, oneTBB's flow graph
# (Scripts/peers/tbb_flow_graph.cpp --once, compiled with g++ -O2; libtbb-dev is installed unless --no-install) is
# counted the same way on the workloads it has (independent, after as its chain, fanin as its fan-in), and the table
# adds its median and this tree / oneTBB: a peer ratio that, unlike a timing, the machine's noise does not move.
set -euo pipefail

cd "$(dirname "$0")/.."

base=c6090d0
count=20000
repeats=3
workloads="independent after dependencies fanin"
install=1
peer=0

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

source Scripts/lib/bench-common.sh

while (($# > 0)); do
  case "$1" in
    --base)
      base=${2:?--base needs a revision}
      shift 2
      ;;
    --count)
      whole_number bench-instructions.sh "$1" "${2:-}"
      count=$2
      shift 2
      ;;
    --repeats)
      whole_number bench-instructions.sh "$1" "${2:-}"
      repeats=$2
      shift 2
      ;;
    --workloads)
      workloads=${2:?--workloads needs a list}
      shift 2
      ;;
    --peer)
      peer=1
      shift
      ;;
    --no-install)
      install=0
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "bench-instructions.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

for workload in $workloads; do
  case "$workload" in
    independent | after | dependencies | fanin | callback | async | taskgroup) ;;
    *)
      echo "bench-instructions.sh: unknown workload '$workload' (independent, after, dependencies, fanin, callback, async, taskgroup)" >&2
      exit 2
      ;;
  esac
done

if ! git rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
  echo "bench-instructions.sh: '$base' is not a revision of this repository" >&2
  exit 2
fi

if ! command -v valgrind > /dev/null 2>&1; then
  if ((install)); then apt_install valgrind; fi
  if ! command -v valgrind > /dev/null 2>&1; then
    echo "bench-instructions.sh: valgrind is missing; install it or drop --no-install" >&2
    exit 1
  fi
fi

if ((peer)) && ! have_tbb; then
  if ((install)); then apt_install libtbb-dev g++; fi
  if ! have_tbb; then
    echo "bench-instructions.sh: --peer needs oneTBB (libtbb-dev) and g++; install them or drop --no-install" >&2
    exit 1
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-instructions.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ((peer)); then
  echo "Compiling the oneTBB peer…" >&2
  g++ -std=c++17 -O2 Scripts/peers/tbb_flow_graph.cpp -o "$work/tbb_flow_graph" -ltbb
fi

echo "Exporting $base…" >&2
mkdir -p "$work/base"
git archive "$base" | tar -x -C "$work/base"

# A harness package per side, depending on that side's Spindle by path.
make_harness_side base "$work/base" Scripts/instructions/harness.swift "$work"
make_harness_side new "$PWD" Scripts/instructions/harness.swift "$work"

# The oneTBB workload that matches a harness workload, or nothing.
peer_workload() {
  case "$1" in
    independent) echo independent ;;
    after) echo chain ;;
    fanin) echo fan-in ;;
  esac
}

# Instructions of one run of the harness (side base or new) or of the oneTBB peer (side tbb) under callgrind.
instructions() {
  local side=$1 workload=$2 items=$3
  local log="$work/callgrind-$side.log"
  local command=("$work/build-$side/release/harness" "$workload" "$items")
  if [[ $side == tbb ]]; then command=("$work/tbb_flow_graph" --once "$(peer_workload "$workload")" --nodes "$items"); fi
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "${command[@]}" > /dev/null 2> "$log" || {
    echo "bench-instructions.sh: the $side harness failed ($workload, $items items):" >&2
    cat "$log" >&2
    exit 1
  }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log"
}

per_item() {
  local full empty
  full=$(instructions "$1" "$2" "$count")
  empty=$(instructions "$1" "$2" 0)
  echo $(((full - empty) / count))
}

results="$work/results.tsv"
: > "$results"
for workload in $workloads; do
  for ((repeat = 1; repeat <= repeats; repeat++)); do
    echo "$workload, repeat $repeat of $repeats…" >&2
    if ((repeat % 2 == 1)); then order="base new"; else order="new base"; fi
    if ((peer)) && [[ -n $(peer_workload "$workload") ]]; then order="$order tbb"; fi
    for side in $order; do
      printf '%s\t%s\t%s\n' "$workload" "$side" "$(per_item "$side" "$workload")" >> "$results"
    done
  done
done

python3 - "$results" "$base" "$count" << 'PYTHON'
import statistics
import sys

path, base, count = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(path):
    workload, side, value = line.split("\t")
    rows.setdefault(workload, {}).setdefault(side, []).append(int(value))
print(f"Instructions per item (callgrind, {count} items, median of {len(next(iter(rows.values()))['new'])} runs)")
peer = any("tbb" in sides for sides in rows.values())
header = f"{'workload':<14}{'base ' + base:>18}{'this tree':>14}{'new / base':>12}"
if peer:
    header += f"{'oneTBB':>10}{'new / oneTBB':>14}"
print(header + "   runs (base | new" + (" | oneTBB)" if peer else ")"))
for workload, sides in rows.items():
    old, new = statistics.median(sides["base"]), statistics.median(sides["new"])
    line = f"{workload:<14}{old:>18,.0f}{new:>14,.0f}{new / old:>11.3f}x"
    runs = [sides["base"], sides["new"]]
    if peer and "tbb" in sides:
        tbb = statistics.median(sides["tbb"])
        line += f"{tbb:>10,.0f}{new / tbb:>13.3f}x"
        runs.append(sides["tbb"])
    elif peer:
        line += f"{'—':>10}{'—':>14}"
    print(line + "   " + " | ".join(" ".join(map(str, values)) for values in runs))
PYTHON
