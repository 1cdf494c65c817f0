"""Indexing with embedding against the raw model, on session files and on knowledge files.

Two workspaces: one LoCoMo conversation recorded through ``ws.session`` (session files: one
event per turn; the data is read from ../shared/bench/locomo/locomo10.json), and synthetic
knowledge files (``benchmarks/speed.py``'s corpus: 200 files of 10 entries, or ``--files``).
For each:
  sync        ``Workspace.sync()`` on a fresh copy: scan, parse, chunk, write, embed
  raw, sync's batches    the same model on the exact ``embed_text`` strings, in the batches a
              sync sends them (shortest first, 64 at a time): what a sync could reach at best
  raw, by hash           the same texts in the order SQLite lists them (by text hash), 64 at a
              time: the batching before this benchmark (texts of mixed lengths pad)
  raw, text only         the chunks' own text without their file context, in the sync's
              batches: the difference is the cost of the context tokens
Best of 2 alternated rounds (a busy neighbour hits each alike). The load average is printed.

Usage:  .venv/bin/python benchmarks/index_rate.py [--conversation 0] [--files 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import locomo  # noqa: E402
import speed  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.sync import EMBED_BATCH  # noqa: E402

WORK = ROOT / ".bench" / "index_rate"
ROUNDS = 2


def in_batches(model: SentenceTransformerEmbedder, texts: list[str]) -> None:
    for start in range(0, len(texts), EMBED_BATCH):
        model.embed(texts[start : start + EMBED_BATCH])


def best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(name: str, source: Path, model: SentenceTransformerEmbedder) -> list[str]:
    syncs = []
    for n in range(ROUNDS):
        copy = WORK / f"{name}-{n}"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".mdmem"))
        with Workspace(copy, embedder=model) as ws:
            started = time.perf_counter()
            ws.sync()
            syncs.append(time.perf_counter() - started)
            rows = ws.index.conn.execute(
                "SELECT text_hash, min(embed_text), min(text) FROM chunks GROUP BY text_hash"
            ).fetchall()
    by_hash = [r[1] for r in rows]
    by_length = sorted(by_hash, key=len)
    plain = [r[2] for r in sorted(rows, key=lambda r: len(r[1]))]
    n = len(rows)
    t_sync = min(syncs)
    t_sorted = best(lambda: in_batches(model, by_length))
    t_hash = best(lambda: in_batches(model, by_hash))
    t_plain = best(lambda: in_batches(model, plain))
    words = sum(len(t.split()) for t in by_hash) / n
    plain_words = sum(len(t.split()) for t in plain) / n
    return [
        name,
        f"{n:,}",
        f"{words:.0f} / {plain_words:.0f}",
        f"{n / t_sync:.1f}",
        f"{n / t_sorted:.1f}",
        f"{n / t_hash:.1f}",
        f"{n / t_plain:.1f}",
        f"{t_sorted / t_sync:.0%}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--files", type=int, default=200, help="knowledge files (10 entries)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    WORK.mkdir(parents=True, exist_ok=True)
    model = SentenceTransformerEmbedder()
    model.embed(["warm up the model"] * 64)

    sample = json.loads(locomo.DATA.read_text())[args.conversation]
    sessions_src = WORK / "sessions-source"
    locomo.fresh_root(sessions_src)
    locomo.render_session_api(sample, sessions_src)
    knowledge_src = speed.Corpus().workspace(WORK / "knowledge-source", args.files, lambda _: 10)

    table = Table(title="Indexing with embedding against the raw model (texts/s)")
    for column in ("workspace", "texts", "words: embedded / text", "sync()",
                   "raw, sync's batches", "raw, by hash", "raw, text only",
                   "sync / raw (sync's batches)"):  # fmt: skip
        table.add_column(column, justify="left" if column == "workspace" else "right")
    table.add_row(*measure(f"sessions ({sample['sample_id']})", sessions_src, model))
    table.add_row(*measure(f"knowledge ({args.files} files)", knowledge_src, model))
    console = Console(width=140)
    console.print(table)
    loads = [" / ".join(f"{x:.2f}" for x in v) for v in (load_before, os.getloadavg())]
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


if __name__ == "__main__":
    main()
