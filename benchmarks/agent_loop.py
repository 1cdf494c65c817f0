"""What an agent loop pays per step: recording session events, and building its context.

    .venv/bin/python benchmarks/agent_loop.py [--events 500] [--memories 2000] [--sessions 200]

A synthetic full-mode workspace (in .bench/agent_loop/) gets ``--memories`` entries in
memory.md / learnings.md, ``--sessions`` past session files of 40 events each, a task with 30
TODO items and a world state of 60 facts. Then:

  event append   one ``Session.event`` call (lock, read, parse, compare-and-swap, atomic replace
                 with fsync), measured as the session file grows to ``--events`` events
  tool call      one ``Session.tool`` call (a call and its result: two events, tool counts)
  task tick      one ``ws.task.complete(n)``
  world set      one ``ws.world.set(key, value)``
  context        ``ws.build_context(budget_tokens=4000)`` without a query, with the fast estimate
                 and with gpt-4o's tokenizer (litellm, offline); a query adds one search (see
                 benchmarks/speed.py for search timings)

Medians and p95 of one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace

OUT = Path(__file__).resolve().parent.parent / ".bench" / "agent_loop"
WORDS = (
    "invoice customer postgres migration deploy retry cache token queue worker schema index "
    "backup alert metric release branch review docker build test config secret region"
).split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def build(root: Path, memories: int, sessions: int, rng: random.Random) -> Workspace:
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root, mode="full", agent="coder")
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    kinds = ["preference", "fact", "pattern"]
    lines = ["# Memory", ""]
    for kind, title in zip(kinds, ["Preferences", "Facts", "Patterns"], strict=True):
        lines += [f"## {title}", ""]
        lines += [
            f"- {sentence(rng)} <!-- mdmem type={kind} importance={rng.random():.2f} -->"
            for _ in range(memories // 4)
        ]
        lines.append("")
    (root / "memory.md").write_text("\n".join(lines))
    skills = [f"- {sentence(rng, 16)}" for _ in range(memories // 4)]
    (root / "learnings.md").write_text("# Learnings\n\n## Skills\n\n" + "\n".join(skills) + "\n")
    todo = "\n".join(f"- [ ] {sentence(rng, 8)}" for _ in range(30))
    (root / "task_process.md").write_text(
        f"# Task: benchmark\n\n## State\n- Phase: implement\n- Pointer: 1\n\n## TODO\n{todo}\n"
        "\n## Instructions\n- IF tests fail THEN fix them ELSE continue\n"
    )
    facts = "\n".join(f"- **key {n}**: {sentence(rng, 8)}" for n in range(60))
    (root / "world_state.md").write_text(f"# World State\n\n## Environment\n{facts}\n")
    folder = root / ".sessions"
    for n in range(sessions):
        day = 1 + n % 28
        meta = "<!-- mdmem importance=0.65 -->"
        events = "\n".join(
            f"- 10:{m // 60:02d}:{m % 60:02d} [execute] {sentence(rng)} {meta}" for m in range(40)
        )
        (folder / f"202611{day:02d}_{n:06d}_past-{n}.md").write_text(
            f"---\nagent: coder\nstarted: 2026-11-{day:02d}T10:00:00\nstatus: completed\n---\n"
            f"# Session: past {n}\n\n## Request\n\n{sentence(rng)}\n\n## Events\n\n{events}\n\n"
            f"## Response\n\n{sentence(rng)}\n"
        )
    return Workspace.open(root)


def timed(fn: Callable[[], object], times: list[float]) -> None:
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1000)


def row(name: str, times: list[float], note: str = "") -> tuple[str, str, str, str, str]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return name, str(len(times)), f"{statistics.median(times):.1f}", f"{p95:.1f}", note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(0)
    console = Console()
    ws = build(OUT / "ws", args.memories, args.sessions, rng)
    rows = []

    first: list[float] = []
    last: list[float] = []
    tools: list[float] = []
    with ws.session("benchmark loop") as s:
        for n in range(args.events):
            bucket = first if n < 50 else last if n >= args.events - 50 else []
            timed(lambda: s.event("execute", sentence(rng)), bucket)
        for _ in range(50):
            timed(lambda: s.tool("shell", "pytest -q", "12 passed"), tools)
    rows.append(row("event append, first 50", first, "session file with < 50 events"))
    rows.append(row("event append, last 50", last, f"file with ~{args.events} events"))
    rows.append(row("tool call (call + result)", tools, "two events + tool counts"))

    ticks: list[float] = []
    for n in range(1, 31):
        timed(lambda n=n: ws.task.complete(n), ticks)
    rows.append(row("task tick", ticks, "task_process.md, 30 items"))
    sets: list[float] = []
    for n in range(50):
        timed(lambda n=n: ws.world.set(f"key {n}", sentence(rng, 8)), sets)
    rows.append(row("world set", sets, "world_state.md, 60 facts"))

    estimate: list[float] = []
    tokenizer: list[float] = []
    ws.build_context(budget_tokens=4000, model="gpt-4o")  # litellm import, tokenizer load
    for _ in range(30):
        timed(lambda: ws.build_context(budget_tokens=4000), estimate)
        timed(lambda: ws.build_context(budget_tokens=4000, model="gpt-4o"), tokenizer)
    size = f"{args.memories} memories, {args.sessions + 1} sessions"
    rows.append(row("build_context, estimate", estimate, size))
    rows.append(row("build_context, gpt-4o tokens", tokenizer, size))

    table = Table(title="Agent loop costs (ms per call)")
    for column in ("operation", "calls", "median ms", "p95 ms", "setting"):
        table.add_column(column, justify="left" if column in ("operation", "setting") else "right")
    for r in rows:
        table.add_row(*r)
    console.print(table)


if __name__ == "__main__":
    main()
