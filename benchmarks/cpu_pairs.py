"""Commands run alternately, round by round: the median CPU time of each (user + system of its
process and the children it waited for, from wait4), and its wall time.

On a shared machine, wall time mostly measures the queue for the cores; CPU time barely moves
with the load, so two versions of the code compare fairly when run alternately, many rounds,
as medians. What issue 41's changes were measured with, e.g. the hook Stop before and after::

    .venv/bin/python benchmarks/cpu_pairs.py --runs 11 \\
        'pass=python -c pass' \\
        'before=PYTHONPATH=/tmp/old mdmem -w WS hooks run claude-code import <stop.json' \\
        'after=PYTHONPATH=. mdmem -w WS hooks run claude-code import <stop.json'

Each argument is ``LABEL=COMMAND`` (run by bash, its output discarded); ``--before CMD`` runs
before each round, not timed (stop a server, append records to a log). The first command is the
one every ratio is taken against. A command that fails stops the run, with its stderr.

Usage:  .venv/bin/python benchmarks/cpu_pairs.py [--runs 11] [--before CMD] LABEL=COMMAND ...
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def run(command: str) -> tuple[float, float]:
    """CPU and wall milliseconds of one run of ``command``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        ["bash", "-c", command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    if status != 0:
        raise SystemExit(f"{command!r} failed:\n{err.decode(errors='replace')[-2000:]}")
    return (usage.ru_utime + usage.ru_stime) * 1000, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--before", help="a command run before each round, not timed")
    parser.add_argument("commands", nargs="+", metavar="LABEL=COMMAND")
    args = parser.parse_args()
    pairs = [c.partition("=")[::2] for c in args.commands]
    if any(not label or not command for label, command in pairs):
        parser.error("each command is LABEL=COMMAND")
    cpu: dict[str, list[float]] = {label: [] for label, _ in pairs}
    wall: dict[str, list[float]] = {label: [] for label, _ in pairs}
    load = os.getloadavg()[0]
    for _ in range(args.runs):
        if args.before:
            subprocess.run(["bash", "-c", args.before], check=True)
        for label, command in pairs:
            c, w = run(command)
            cpu[label].append(c)
            wall[label].append(w)
    base = statistics.median(cpu[pairs[0][0]])
    print(f"{args.runs} rounds, load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"{'command':32} {'CPU ms (median)':>16} {'x first':>8} {'wall ms (median)':>17}")
    for label, _ in pairs:
        median = statistics.median(cpu[label])
        print(f"{label:32} {median:16.0f} {median / base:8.1f} "
              f"{statistics.median(wall[label]):17.0f}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
