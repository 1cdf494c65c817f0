"""What finding killed sessions costs the calls that do it (session start, status, sync).

    .venv/bin/python benchmarks/interrupted.py [--sessions 1000] [--repeat 50]

A synthetic full-mode workspace (in .bench/interrupted/) gets ``--sessions`` completed session
files of 40 events each, and one session this process keeps running. Then
``ws.sessions.mark_interrupted()`` (what ``Workspace.session()``, ``ws.index.status()`` and
``ws.index.update()`` run first) is timed:

  first look        a new Workspace: every session file's head is read once (the first 2 KB;
                    the frontmatter is parsed only where it may say ``running``)
  nothing changed   the folder did not change: only this host's running session is read
  one event later   the running session wrote an event (the folder changed: it is listed,
                    and only this host's running session is read again)

Searches never run it. Medians and p95 of one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace

OUT = Path(__file__).resolve().parent.parent / ".bench" / "interrupted"


def _session_text(n: int) -> str:
    events = "".join(
        f"- 10:{i // 60:02d}:{i % 60:02d} [execute] step {i} of session {n} "
        "<!-- mdmem importance=0.65 -->\n"
        for i in range(40)
    )
    return (
        "---\nagent: coder\nstarted: 2026-01-01T10:00:00\nstatus: completed\nrounds: 3\n"
        f"host: bench\npid: {100000 + n}\n---\n# Session: past work {n}\n\n## Request\n\n"
        f"Do task {n}\n\n## Events\n\n{events}\n## Response\n\nDone.\n\n## Metadata\n"
    )


def _timed(call: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    ws = Workspace.init(OUT, mode="full", agent="coder")
    folder = ws.root / ".sessions"
    for n in range(args.sessions):
        (folder / f"20260101_{n:06d}_past-{n}.md").write_text(_session_text(n))
    running = ws.session("still running")

    rows: list[tuple[str, list[float]]] = []
    firsts = []
    for _ in range(max(3, args.repeat // 10)):
        fresh = Workspace.open(OUT)
        firsts += _timed(fresh.sessions.mark_interrupted, 1)
    rows.append(("first look", firsts))
    ws.sessions.mark_interrupted()
    rows.append(("nothing changed", _timed(ws.sessions.mark_interrupted, args.repeat)))
    later = []
    for i in range(args.repeat):
        running.event("execute", f"step {i}")
        later += _timed(ws.sessions.mark_interrupted, 1)
    rows.append(("one event later", later))
    running.close()

    table = Table(title=f"ws.sessions.mark_interrupted() with {args.sessions} session files (ms)")
    for column in ("case", "median", "p95", "runs"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for name, times in rows:
        p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
        table.add_row(name, f"{statistics.median(times):.2f}", f"{p95:.2f}", str(len(times)))
    Console().print(table)


if __name__ == "__main__":
    main()
