"""The shared pool: read and write latency, and throughput under contention.

    .venv/bin/python benchmarks/pool.py [--keys 100] [--repeat 200] [--procs 8] [--increments 100]

A fresh workspace (in .bench/pool/) gets a pool of ``--keys`` entries (half text, half JSON).
Then, in one process:

  read              ``pool.read(key)`` of a random key, the file unchanged since the last read
                    (lock-free; its bytes are read and compared, the parse is cached)
  read, changed     the same after another writer changed the file (the file is parsed)
  list              ``pool.list()``: every entry, newest first
  write             ``pool.write(key, value)`` (last writer wins): the safe write, journaled
  optimistic write  ``read`` then ``write(..., expected_version=)``, with no one competing

and under contention: ``--procs`` real processes each do ``--increments`` optimistic
increments of one key, retrying on VersionConflict (the test in tests/integration/test_pool.py).
Reported: wall time, increments per second, conflicts retried, and the final value and version.
Medians and p95 of one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace

OUT = Path(__file__).resolve().parent.parent / ".bench" / "pool"
INCREMENTER = textwrap.dedent(
    """
    import sys
    from mdmem import VersionConflict, Workspace
    pool = Workspace(sys.argv[1]).sharing.pool()
    conflicts = 0
    for _ in range(int(sys.argv[2])):
        while True:
            entry = pool.read("counter")
            value, version = (entry.content, entry.version) if entry else (0, 0)
            try:
                pool.write("counter", value + 1, expected_version=version)
                break
            except VersionConflict:
                conflicts += 1
    print(conflicts)
    """
)


def _timed(call: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def _value(n: int) -> object:
    if n % 2:
        return f"finding {n}: the measured latency was {n * 3} ms on the staging box"
    return {"n": n, "tags": ["a", "b"], "ok": True, "score": n / 7}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--increments", type=int, default=100)
    args = parser.parse_args()

    shutil.rmtree(OUT, ignore_errors=True)
    ws = Workspace.init(OUT / "ws", mode="full", agent="bench")
    pool = ws.sharing.pool()
    keys = [f"bench/key-{n:04d}" for n in range(args.keys)]
    for n, key in enumerate(keys):
        pool.write(key, _value(n))
    size = (ws.root / pool.path).stat().st_size
    rng = random.Random(0)

    def optimistic() -> None:
        key = rng.choice(keys)
        entry = pool.read(key)
        assert entry is not None
        pool.write(key, entry.content, expected_version=entry.version)

    other = Workspace.open(ws.root).sharing.pool()  # another writer: its own view of the file

    def changed_read() -> float:
        other.write(rng.choice(keys), _value(rng.randrange(99)))
        start = time.perf_counter()
        pool.read(rng.choice(keys))
        return (time.perf_counter() - start) * 1000

    rows = [
        ("read", _timed(lambda: pool.read(rng.choice(keys)), args.repeat)),
        ("read, changed", [changed_read() for _ in range(max(10, args.repeat // 4))]),
        ("list", _timed(pool.list, max(10, args.repeat // 10))),
        (
            "write",
            _timed(lambda: pool.write(rng.choice(keys), _value(rng.randrange(99))), args.repeat),
        ),
        ("optimistic write", _timed(optimistic, args.repeat)),
    ]
    ws.close()
    console = Console()
    table = Table(title=f"One process: a pool of {args.keys} keys ({size / 1000:.0f} KB)")
    for column in ("call", "p50 ms", "p95 ms", "calls"):
        table.add_column(column, justify="left" if column == "call" else "right")
    for name, times in rows:
        table.add_row(
            name, f"{statistics.median(times):.2f}", f"{_p95(times):.2f}", str(len(times))
        )
    console.print(table)

    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", INCREMENTER, str(ws.root), str(args.increments)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.procs)
    ]
    conflicts = sum(int(p.communicate()[0]) for p in procs)
    elapsed = time.monotonic() - started
    final = Workspace.open(ws.root).sharing.pool().read("counter")
    total = args.procs * args.increments
    contention = Table(title=f"{args.procs} processes x {args.increments} optimistic increments")
    for column in ("wall s", "increments/s", "conflicts retried", "final value", "final version"):
        contention.add_column(column, justify="right")
    contention.add_row(
        f"{elapsed:.1f}",
        f"{total / elapsed:.0f}",
        str(conflicts),
        str(final.content if final else None),
        str(final.version if final else None),
    )
    console.print(contention)


if __name__ == "__main__":
    main()
