#!/usr/bin/env python3
"""Runs a test command and, if it stops making progress, says which tests hung and where every thread stood.

    Scripts/watchdog.py [--quiet SECONDS] [--limit SECONDS] [--log FILE] -- swift test --sanitize=address ...

The command's output is passed through (and copied to --log). The watchdog follows Swift Testing's
"◇ Test x started." / "✔ Test x passed" lines and XCTest's "Test Case '…' started/passed/failed" lines.
When no line has arrived for --quiet seconds, or the whole run passes --limit seconds, it prints:

- the tests that started and never finished;
- a backtrace of every thread of every process under the command (gdb, when installed);

then stops the command and exits 124, the same code as timeout(1). Otherwise it exits with the command's code.
A hang on a CI machine then leaves enough behind to be fixed without reproducing it.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

SWIFT_TESTING_START = re.compile(r"^◇ (Test|Suite) (.+?) started\.")
SWIFT_TESTING_END = re.compile(r"^[✔✘↳⚠︎􀢄]*\s*(Test|Suite) (.+?) (passed|failed|skipped|recorded an issue)")
WITH_CASES = re.compile(r" with \d+ test cases?$")
XCTEST_CASE = re.compile(r"^Test Case '(.+?)' (started|passed|failed|skipped)")


def descendants(root):
    """Every process id below `root` (children first found by walking /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            return raw.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(\S+)")
THREAD = re.compile(r"^Thread \d+ ")
BORING = ("__GI_", "__futex", "futex_", "__pthread_", "pthread_cond", "___pthread", "syscall", "start_thread", "clone")


def demangle(names):
    swift = shutil.which("swift")
    if swift is None or not names:
        return {name: name for name in names}
    try:
        out = subprocess.run(
            [swift, "demangle", "--simplified", "--compact"],
            input="\n".join(names),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {name: name for name in names}
    return dict(zip(names, out)) if len(out) == len(names) else {name: name for name in names}


def summarise(traces):
    """Groups threads with the same stack; one line per group, innermost interesting frames first."""
    stacks, current = [], None
    for line in traces.splitlines():
        if THREAD.match(line):
            current = []
            stacks.append(current)
        elif current is not None:
            frame = FRAME.match(line.strip())
            if frame:
                current.append(frame.group(1))
    names = demangle(sorted({name for stack in stacks for name in stack}))
    groups, full = {}, {}
    for stack in stacks:
        frames = [names.get(name, name) for name in stack if not name.startswith(BORING)]
        key = " <- ".join(frame[:90] for frame in frames[:7])
        groups[key] = groups.get(key, 0) + 1
        full[key] = frames
    lines = []
    for key, count in sorted(groups.items(), key=lambda item: -item[1]):
        lines.append(f"  {count} thread(s): {key}")
        # A thread alone with its stack is most often the one that hangs (the others idle in pools): its whole stack,
        # since the frames that say how it got there are the outer ones (a deinit run inside a lock was cut off at 7).
        if count == 1 and len(full[key]) > 7:
            lines.append("      ... <- " + " <- ".join(frame[:90] for frame in full[key][7:30]))
    return lines


def report(process, open_tests, reason, full_log):
    """The report, compact enough to survive in the tail of a CI log: stacks first, hung tests last."""
    lines = [""]
    gdb = shutil.which("gdb")
    for pid in descendants(process.pid):
        line = command_line(pid)
        if "xctest" not in line and "PackageTests" not in line and "swiftpm-testing-helper" not in line:
            continue
        lines.append(f"watchdog: threads of {pid} ({line[:160]}), grouped by stack:")
        if gdb is None:
            lines.append("  (gdb is not installed; no backtraces)")
            continue
        try:
            traces = subprocess.run(
                [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt 30"],
                capture_output=True,
                text=True,
                timeout=240,
            ).stdout
        except subprocess.TimeoutExpired:
            lines.append("  (gdb did not answer within 240s)")
            continue
        if full_log:
            full_log.write(traces)
        lines.extend(summarise(traces))
    lines.append(f"watchdog: {reason}")
    lines.append(f"watchdog: {len(open_tests)} test(s) started and never finished:")
    for name in sorted(open_tests, key=lambda n: open_tests[n]):
        lines.append(f"  - {name} (running for {time.monotonic() - open_tests[name]:.0f}s)")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quiet", type=float, default=600, help="seconds without output before the run counts as hung")
    parser.add_argument("--limit", type=float, default=3600, help="seconds the whole run may take")
    parser.add_argument("--log", help="also write the command's output here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command after --")

    log = open(options.log, "w") if options.log else None
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, bufsize=0
    )
    open_tests = {}
    last_output = [time.monotonic()]
    lock = threading.Lock()

    def pump():
        for raw in iter(process.stdout.readline, b""):
            text = raw.decode(errors="replace")
            sys.stdout.write(text)
            sys.stdout.flush()
            if log:
                log.write(text)
                log.flush()
            line = text.strip()
            with lock:
                last_output[0] = time.monotonic()
                if line.startswith("◇ Test case passing") or line.startswith("◇ Test run"):
                    continue  # a parameterised test's cases end with the test, not one by one
                started = SWIFT_TESTING_START.match(line)
                if started:
                    open_tests[f"{started.group(1)} {started.group(2)}"] = time.monotonic()
                    continue
                ended = SWIFT_TESTING_END.match(line)
                if ended:
                    name = WITH_CASES.sub("", ended.group(2))
                    open_tests.pop(f"{ended.group(1)} {name}", None)
                    continue
                case = XCTEST_CASE.match(line)
                if case:
                    if case.group(2) == "started":
                        open_tests[f"XCTest {case.group(1)}"] = time.monotonic()
                    else:
                        open_tests.pop(f"XCTest {case.group(1)}", None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    began = time.monotonic()
    reason = None
    while process.poll() is None:
        time.sleep(1)
        now = time.monotonic()
        with lock:
            quiet = now - last_output[0]
        if quiet > options.quiet:
            reason = f"no output for {quiet:.0f}s (--quiet {options.quiet:.0f}); the run looks hung"
        elif now - began > options.limit:
            reason = f"the run passed its limit of {options.limit:.0f}s"
        if reason:
            with lock:
                snapshot = dict(open_tests)
            text = report(process, snapshot, reason, log)
            sys.stdout.write(text)
            sys.stdout.flush()
            if log:
                log.write(text)
                log.flush()
            # Every process under the command, found before any is stopped: `swift test` starts the test bundle in a
            # process group of its own, so stopping the command's group left a hung bundle running (seen here: a
            # ThreadSanitizer run's bundle outlived its CI run and the next one).
            below = descendants(process.pid)
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            for pid in below:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return 124
    reader.join(timeout=5)
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
