"""Indexing with embedding against the raw model, on session files and on knowledge files.

Two workspaces: one LoCoMo conversation recorded through ``ws.session`` (session files: one
event per turn; the data is read from ../shared/bench/locomo/locomo10.json), and synthetic
knowledge files (``benchmarks/speed.py``'s corpus: 200 files of 10 entries, or ``--files``).
For each, in alternated rounds (a busy neighbour hits each alike):
  sync        ``Workspace.sync()`` on a fresh copy: scan, parse, chunk, write, embed
  raw, sync's batches    the same model on the exact ``embed_text`` strings, in the very
              batches that round's sync handed it (recorded): what a sync could reach at best
  raw, by hash           the same texts in the order SQLite lists them (by text hash), 64 at a
              time: the batching before issue 15 (texts of mixed lengths pad)
  raw, text only         the chunks' own text without their file context, in the sync's
              batches: the difference is the cost of the context tokens
  model busy  the share of the sync's wall time the model spent embedding (measured inside
              the same sync, so a neighbour's load cancels out), median of the rounds
Rates: best of ``--rounds`` (3). The load average is printed.

Usage:  nice -n 19 .venv/bin/python benchmarks/index_rate.py [--conversation 0] [--files 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def in_batches(model: SentenceTransformerEmbedder, texts: list[str]) -> None:
    for start in range(0, len(texts), EMBED_BATCH):
        model.embed(texts[start : start + EMBED_BATCH])


def timed(fn: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def each(model: SentenceTransformerEmbedder, batches: list[list[str]]) -> None:
    for batch in batches:
        model.embed(batch)


class Recording:
    """The model, recording the batches a sync hands it and the time it spends on them."""

    def __init__(self, model: SentenceTransformerEmbedder) -> None:
        self.model = model
        self.model_id = model.model_id
        self.batches: list[list[str]] = []
        self.seconds = 0.0

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Any:
        self.batches.append(list(texts))
        started = time.perf_counter()
        vectors = self.model.embed(texts, progress)
        self.seconds += time.perf_counter() - started
        return vectors


def sync_once(source: Path, copy: Path, model: SentenceTransformerEmbedder) -> tuple[float, Any]:
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".mdmem"))
    recording = Recording(model)
    with Workspace(copy, embedder=recording) as ws:
        seconds = timed(ws.sync)
        rows = ws.index._backend.conn.execute(
            "SELECT text_hash, min(embed_text), min(text) FROM chunks GROUP BY text_hash"
        ).fetchall()
    return seconds, (recording, rows)


def measure(name: str, source: Path, model: SentenceTransformerEmbedder, rounds: int) -> list[str]:
    times: dict[str, list[float]] = {k: [] for k in ("sync", "batches", "hash", "plain")}
    busy = []
    for n in range(rounds):
        t_sync, (recording, rows) = sync_once(source, WORK / f"{name}-{n}", model)
        times["sync"].append(t_sync)
        busy.append(recording.seconds / t_sync)
        plain_of = {r[1]: r[2] for r in rows}
        plain = [[plain_of[t] for t in b] for b in recording.batches]
        times["batches"].append(timed(each, model, recording.batches))
        times["hash"].append(timed(in_batches, model, [r[1] for r in rows]))
        times["plain"].append(timed(each, model, plain))
    n = len(rows)
    assert sum(len(b) for b in recording.batches) == n, "the sync embedded each text once"
    best = {k: min(v) for k, v in times.items()}
    words = sum(len(r[1].split()) for r in rows) / n
    plain_words = sum(len(r[2].split()) for r in rows) / n
    return [
        name,
        f"{n:,}",
        f"{words:.0f} / {plain_words:.0f}",
        f"{n / best['sync']:.1f}",
        f"{n / best['batches']:.1f}",
        f"{n / best['hash']:.1f}",
        f"{n / best['plain']:.1f}",
        f"{best['batches'] / best['sync']:.0%}",
        f"{statistics.median(busy):.1%}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--files", type=int, default=200, help="knowledge files (10 entries)")
    parser.add_argument("--rounds", type=int, default=3)
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
                   "sync / raw (sync's batches)", "model busy"):  # fmt: skip
        table.add_column(column, justify="left" if column == "workspace" else "right")
    table.add_row(*measure(f"sessions ({sample['sample_id']})", sessions_src, model, args.rounds))
    table.add_row(*measure(f"knowledge ({args.files} files)", knowledge_src, model, args.rounds))
    console = Console(width=140)
    console.print(table)
    loads = [" / ".join(f"{x:.2f}" for x in v) for v in (load_before, os.getloadavg())]
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


if __name__ == "__main__":
    main()
