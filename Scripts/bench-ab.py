#!/usr/bin/env python3
"""A/B two builds of `spindle` on one `spindle bench` suite: interleaved runs, medians and paired ratios.

    Scripts/bench-ab.py BASELINE_SPINDLE CANDIDATE_SPINDLE [--suite engine] [--pairs 20] [--contender WorkQueue]

Runs `spindle bench SUITE --quick` with each binary in turn (the order alternates every pair, so neither always
runs on a warmer or quieter machine), reads the per-item time of every row whose contender column starts with
--contender, and prints for each scenario: both medians, the ratio of the medians (candidate / baseline), the
median of the per-pair ratios, and the spread of the per-pair ratios (25th-75th percentile). On a shared
machine, read the spread before the ratio: a difference inside it is not a difference.

Scripts/bench-trace-hooks.sh uses it to measure what WorkQueue's recording hooks cost when recording is off.
"""

import argparse
import re
import statistics
import subprocess
import sys

UNITS = {"ns": 1e-3, "µs": 1.0, "ms": 1e3, "s": 1e6}
ROW = re.compile(r"^(?P<scenario>.+?)\s{2,}(?P<contender>\S.*?)\s{2,}(?P<median>[\d.]+ \S+)\s+(?P<per>[\d.]+ \S+)")


def per_item_times(binary, suite, contender):
    """{scenario: µs per item} of one run."""
    run = subprocess.run([binary, "bench", suite, "--quick"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"bench-ab: {binary} bench {suite} exited {run.returncode}:\n{run.stderr}")
    found = {}
    for line in run.stdout.splitlines():
        row = ROW.match(line)
        if not row or not row["contender"].startswith(contender):
            continue
        value, unit = row["per"].split()
        if unit in UNITS:
            found.setdefault(row["scenario"].strip(), float(value) * UNITS[unit])
    return found


def quartiles(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 4], ordered[(3 * len(ordered)) // 4]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline")
    parser.add_argument("candidate")
    parser.add_argument("--suite", default="engine")
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--contender", default="WorkQueue")
    options = parser.parse_args()
    if options.pairs < 2:
        parser.error("--pairs needs at least 2")

    times = {}  # scenario -> [(baseline, candidate)]
    for pair in range(options.pairs):
        order = [("A", options.baseline), ("B", options.candidate)]
        if pair % 2:
            order.reverse()
        measured = {who: per_item_times(binary, options.suite, options.contender) for who, binary in order}
        for scenario in measured["A"].keys() & measured["B"].keys():
            times.setdefault(scenario, []).append((measured["A"][scenario], measured["B"][scenario]))

    print(f"{'scenario':44s} {'baseline':>10s} {'candidate':>10s} {'ratio':>6s} {'paired':>7s}  paired 25-75%")
    for scenario, pairs in sorted(times.items()):
        a = statistics.median(p[0] for p in pairs)
        b = statistics.median(p[1] for p in pairs)
        ratios = [p[1] / p[0] for p in pairs]
        low, high = quartiles(ratios)
        print(
            f"{scenario[:44]:44s} {a:8.2f}µs {b:8.2f}µs {b / a:5.2f}x {statistics.median(ratios):6.2f}x"
            f"  {low:.2f}-{high:.2f}x"
        )
    print(f"({options.pairs} pairs, `spindle bench {options.suite} --quick`, per-item times, candidate / baseline)")


if __name__ == "__main__":
    main()
