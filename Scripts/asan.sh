#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer, bounded in time, and fails on any AddressSanitizer report.
#
#   Scripts/asan.sh                      # every test target, default sizes
#   Scripts/asan.sh --filter Reliability # any `swift test` arguments pass through
#
# Environment:
#   SPINDLE_ASAN_SCRATCH  build folder (default .build-asan, ignored by git)
#   SPINDLE_ASAN_TIMEOUT  seconds before the run is stopped and reported as a failure (default 1800)
#   SPINDLE_ASAN_QUIET    seconds without output before the run counts as hung (default 600)
#
# A run that hangs is stopped by Scripts/watchdog.py, which first prints the tests that never finished and a
# backtrace of every thread (gdb), so a hang seen only on a CI machine can be fixed from its log.
#
# Leaks fail the run too (LeakSanitizer, at the end of each test process): memory nothing refers to any more, such
# as a reference cycle. Scripts/lsan-suppressions.txt lists what the toolchain's own libraries keep until exit
# (Foundation's Process, XCTest); nothing of Spindle's is suppressed. It found a batch kept alive for the life of the
# process by a callback that captured it, and loops over a queue's streams that waited for ever once it was gone. The weak-reference tests (Tests/SpindleTests/Reliability/MemoryTests.swift,
# TaskBridgeTests.swift) check the same for memory that stays reachable.
set -uo pipefail
cd "$(dirname "$0")/.."

scratch=${SPINDLE_ASAN_SCRATCH:-.build-asan}
limit=${SPINDLE_ASAN_TIMEOUT:-1800}
quiet=${SPINDLE_ASAN_QUIET:-600}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

export SPINDLE_ASAN=1  # tests that measure resident memory skip themselves
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:print_summary=1}
# exitcode=0: a leak does not change a process's exit status; this script fails on the report in the log instead.
# Exit tests' child processes (their standard error is captured, not logged) would otherwise fail at their exit.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/Scripts/lsan-suppressions.txt:print_suppressions=0:exitcode=0}

start=$(date +%s)
python3 Scripts/watchdog.py --quiet "$quiet" --limit "$limit" --log "$log" -- \
  swift test --sanitize=address --scratch-path "$scratch" "$@"
status=$?
seconds=$(($(date +%s) - start))

if grep -q "ERROR: AddressSanitizer" "$log"; then
  echo "asan.sh: AddressSanitizer reported a problem (see ERROR: AddressSanitizer above); ${seconds}s"
  exit 1
fi
if grep -q "ERROR: LeakSanitizer" "$log"; then
  echo "asan.sh: LeakSanitizer found leaked memory (see ERROR: LeakSanitizer above: the allocation's stack; a"
  echo "reference cycle shows as one direct leak and the memory it holds); ${seconds}s"
  exit 1
fi
if [ "$status" -eq 124 ]; then
  echo "asan.sh: stopped after ${seconds}s by the watchdog (see 'watchdog:' above for the tests that hung and where)"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "asan.sh: swift test --sanitize=address exited $status after ${seconds}s"
  exit "$status"
fi
echo "asan.sh: no AddressSanitizer or LeakSanitizer report; build and tests took ${seconds}s"
