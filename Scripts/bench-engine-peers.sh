#!/usr/bin/env bash
# Measures the WorkQueue engine against oneTBB's flow graph (issue 11's speed goals), on the same machine in
# the same run.
#
# Usage: Scripts/bench-engine-peers.sh [--rounds N] [--runs R] [--quick] [--no-install] [--scratch-path DIR]
#
# Installs libtbb-dev with apt-get when it is missing (not on CI or with --no-install), compiles
# Scripts/peers/tbb_flow_graph.cpp with g++ -O2 -ltbb into a temporary folder, builds `spindle` in release
# mode (swift build -c release --scratch-path DIR, default /work/build/tbb-rel) and runs the two alternately
# N rounds (default 5; odd rounds oneTBB first, even rounds spindle first). Each round runs every case R times
# (default 3, after a warm-up) and keeps the median. The workloads, at 2 threads, graph build + run timed
# together, 100,000 nodes (10,000 with --quick): independent items, a chain, fan-in N -> 1, and a seeded random
# DAG with up to 4 edges per node (the same graph on both sides; the edge counts are checked). The table
# shows the median over the rounds of each contender's ns per node and the ratio of those medians, plus the
# Dispatch and task-group peers, WorkQueue built suspended then resumed (the peer's shape: build, then run) against
# oneTBB, the async/callback ratios and the peak thread counts of `spindle bench engine`.
set -euo pipefail

cd "$(dirname "$0")/.."

rounds=5
runs=3
quick=""
install=1
scratch=/work/build/tbb-rel

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

source Scripts/lib/bench-common.sh

while (($# > 0)); do
  case "$1" in
    --rounds)
      whole_number bench-engine-peers.sh "$1" "${2:-}" 4
      rounds=$2
      shift 2
      ;;
    --runs)
      whole_number bench-engine-peers.sh "$1" "${2:-}" 4
      runs=$2
      shift 2
      ;;
    --scratch-path)
      if [[ -z "${2:-}" ]]; then
        echo "bench-engine-peers.sh: --scratch-path needs a folder" >&2
        exit 2
      fi
      scratch=$2
      shift 2
      ;;
    --quick)
      quick="--quick"
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
      echo "bench-engine-peers.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
done

if [[ -n "${CI:-}" ]]; then install=0; fi
nodes=100000
if [[ -n "$quick" ]]; then nodes=10000; fi

for tool in swift python3; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    echo "bench-engine-peers.sh: '$tool' is needed and not on the PATH" >&2
    exit 1
  fi
done

if ! have_tbb; then
  if ((install)); then apt_install libtbb-dev g++; fi
  if ! have_tbb; then
    echo "bench-engine-peers.sh: oneTBB (libtbb-dev) or g++ is missing; install them or drop --no-install" >&2
    exit 1
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-engine.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "Compiling the oneTBB peer…" >&2
g++ -std=c++17 -O2 Scripts/peers/tbb_flow_graph.cpp -o "$work/tbb_flow_graph" -ltbb

echo "Building spindle (release, $scratch)…" >&2
swift build -c release --scratch-path "$scratch" --product spindle > "$work/build.log" 2>&1 || {
  cat "$work/build.log" >&2
  exit 1
}
spindle="$scratch/release/spindle"

# Each side's output goes to a file of the round; a side that fails shows its error output and stops the script.
run_tbb() {
  "$work/tbb_flow_graph" --nodes "$nodes" --runs "$runs" --threads 2 > "$work/tbb-$1.tsv" 2> "$work/tbb-$1.err" || {
    echo "bench-engine-peers.sh: the oneTBB peer failed in round $1:" >&2
    cat "$work/tbb-$1.err" >&2
    exit 1
  }
}
run_spindle() {
  # shellcheck disable=SC2086 # $quick is empty or one flag
  "$spindle" bench engine $quick --runs "$runs" --json "$work/engine-$1.json" > "$work/engine-$1.txt" \
    2> "$work/engine-$1.err" || {
    echo "bench-engine-peers.sh: spindle bench engine failed in round $1:" >&2
    cat "$work/engine-$1.err" >&2
    exit 1
  }
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  echo "Round $round of $rounds…" >&2
  if ((round % 2 == 1)); then
    run_tbb "$round"
    run_spindle "$round"
  else
    run_spindle "$round"
    run_tbb "$round"
  fi
done

python3 - "$work" "$rounds" "$nodes" "$runs" "$((SECONDS - start))" << 'PYTHON'
import json, re, statistics, sys

work, rounds, nodes, runs, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def median(values):
    return statistics.median(values) if values else None

# Workload keys: (oneTBB name, prefix of the engine suite's scenario).
workloads = [
    ("independent", "independent", f"{nodes:,} independent items"),
    ("chain", "chain", f"chain of {nodes:,}"),
    ("fan-in", "fan-in", f"fan-in {nodes:,} → 1"),
    ("dag", "random DAG", f"random DAG, {nodes:,} nodes × ≤4 edges"),
]

tbb = {key: [] for key, _, _ in workloads}
engine = {}      # (scenario prefix, contender) -> [ns per node per round]
peaks = {}       # scenario prefix -> [(peak, before)]
tbb_version = ""
for round in range(1, rounds + 1):
    tbb_edges = {}
    with open(f"{work}/tbb-{round}.tsv") as file:
        for line in file:
            if line.startswith("#"):
                tbb_version = line.split(",")[0].lstrip("# ").strip()
                continue
            name, _, edges, ns, _ = line.rstrip("\n").split("\t")
            tbb[name].append(float(ns))
            tbb_edges[name] = int(edges)
    with open(f"{work}/engine-{round}.json") as file:
        report = next(r for r in json.load(file) if r["suite"] == "engine")
    for result in report["results"]:
        scenario, contender = result["scenario"], result["contender"]
        ns = result["sample"]["median"] / result["items"] * 1e9
        engine.setdefault((scenario, contender), []).append(ns)
        note = result.get("note") or ""
        peak = re.match(r"peak (\d+) threads \((\d+) before\)", note)
        if peak:
            peaks.setdefault(scenario, []).append((int(peak.group(1)), int(peak.group(2))))
        edges = re.match(r"(\d+) edges", note)
        if edges and scenario.startswith("random DAG") and int(edges.group(1)) != tbb_edges["dag"]:
            sys.exit(f"the random DAGs differ: {edges.group(1)} edges in Swift, {tbb_edges['dag']} in C++")

def find(prefix, contender):
    for (scenario, name), values in engine.items():
        if scenario.startswith(prefix) and name == contender:
            return values
    return []

def ns(value):
    return "—" if value is None else f"{value:,.0f}"

def ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.2f}×"

def spread(a_values, b_values):
    ratios = sorted(a / b for a, b in zip(a_values, b_values))
    return f"{ratios[0]:.2f}–{ratios[-1]:.2f}×" if ratios else "—"

print(f"Engine against {tbb_version or 'oneTBB'} flow graph: 2 threads, graph build + run, ns per node, "
      f"median of {rounds} rounds (each the median of {runs} runs); {seconds} s.")
print()
print("| Workload | WorkQueue | oneTBB flow graph | WorkQueue ÷ oneTBB (rounds) | DispatchQueue.async + group | withTaskGroup |")
print("| --- | --- | --- | --- | --- | --- |")
for key, prefix, label in workloads:
    queue, peer = find(prefix, "WorkQueue"), tbb[key]
    dispatch = median(find(prefix, "DispatchQueue.async + group"))
    group = median(find(prefix, "withTaskGroup"))
    print(f"| {label} | {ns(median(queue))} | {ns(median(peer))} | {ratio(median(queue), median(peer))} "
          f"({spread(queue, peer)}) | {ns(dispatch)} | {ns(group)} |")
# oneTBB builds its whole graph and then starts it; WorkQueue's rows above add to a running queue, where the adding
# thread and the worker share each item as it is made. The suite's "built suspended then resumed" rows have the
# peer's shape: build, then run.
suspended = [(key, prefix, label) for key, prefix, label in workloads
             if find(prefix, "WorkQueue, built suspended then resumed")]
if suspended:
    print()
    print("Built first, then run (the peer's shape: WorkQueue suspended while the graph is added, then resumed):")
    print()
    print("| Workload | WorkQueue, built suspended | oneTBB flow graph | WorkQueue ÷ oneTBB (rounds) |")
    print("| --- | --- | --- | --- |")
    for key, prefix, label in suspended:
        queue, peer = find(prefix, "WorkQueue, built suspended then resumed"), tbb[key]
        print(f"| {label} | {ns(median(queue))} | {ns(median(peer))} | {ratio(median(queue), median(peer))} "
              f"({spread(queue, peer)}) |")
print()
print("| Row | WorkQueue ns/item | Peer ns/item | WorkQueue ÷ peer (rounds) | Goal |")
print("| --- | --- | --- | --- | --- |")
for prefix, label, contender, peer_name in [
    ("async bodies", "async bodies vs a withTaskGroup child task per item", "WorkQueue async bodies",
     "withTaskGroup child task per item"),
    ("callback bodies", "callback bodies (finish at once) vs sync bodies", "WorkQueue callback bodies",
     "WorkQueue sync bodies"),
]:
    queue, peer = find(prefix, contender), find(prefix, peer_name)
    print(f"| {label} | {ns(median(queue))} | {ns(median(peer))} | {ratio(median(queue), median(peer))} "
          f"({spread(queue, peer)}) | ≤ 1.5× |")
print()
print("| Peak threads | median peak | rounds | threads before |")
print("| --- | --- | --- | --- |")
for scenario, values in peaks.items():
    label = scenario.removeprefix("peak threads: ")
    peak_values = sorted(p for p, _ in values)
    before = median([b for _, b in values])
    print(f"| {label} | {median(peak_values):.0f} | {peak_values[0]}–{peak_values[-1]} | {before:.0f} |")
PYTHON
