"""Absorbing one changed file while a watcher runs, and search end to end meanwhile (issue 15).

Usage:  .venv/bin/python benchmarks/absorb.py [--files 10000] [--changes 20] [--queries 50]

A workspace of ``--files`` files of 10 entries (100,000 chunks by default), generated as in
``benchmarks/speed.py`` (same corpus, same queries), indexed with ``sync(embed=False)``; the
``embeddings`` table is then filled with random unit vectors under the real model's id (as
speed.py does: embedding 100k chunks would take ~15 minutes; the math and sizes are the same).
Then, with a watcher running (``ws.watch()``, the real model embedding what changes):

1. ``--changes`` times: one file gains an entry; once the watcher has indexed and embedded it
   and says the index caught up with the new generation, ``ws.search`` runs (hybrid, then
   keyword). "absorb" is what that first search spent bringing the in-memory layout and
   vectors in step with the index (``ChunkLayoutCache.refresh``, timed around the call:
   embedding excluded, as the watcher did it). For comparison, in the same run: a full read of
   the layout and the vectors, which is what every change cost before the change log
   (``chunk_layout_cache.py``).
2. ``ws.search`` end to end, p50 / p95 over ``--queries`` queries per mode, with the watcher
   its word (no stat of any file), in two phases: the index unchanged, and while a file
   changes every ``--interval`` seconds (each search may pay an absorb).
3. ``--changes`` times per mode: the workspace's own write (``ws.remember``), then at once
   ``ws.search`` (read your own writes: it must find the new entry); hybrid includes
   embedding the new entry. ``--own-only`` runs this phase alone.

Medians and nearest-rank p95s, wall clock; the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from speed import SEED, WARMUP, Corpus, caught_up, fill_random_vectors, p95  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.sqlite import read  # noqa: E402
from mdmem.index.sqlite.scale.chunk_layout_cache import ChunkLayoutCache  # noqa: E402
from mdmem.index.sqlite.scale.vector_cache import VectorCache  # noqa: E402

WORK = ROOT / ".bench" / "absorb"


class Absorbs:
    """Times every ``ChunkLayoutCache.refresh`` that found a new generation (a measuring wrapper
    around the real method; what it does is unchanged)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._refresh = ChunkLayoutCache.refresh

        def timed_refresh(cache: ChunkLayoutCache, conn: object) -> None:
            before = cache.generation
            started = time.perf_counter()
            self._refresh(cache, conn)  # type: ignore[arg-type]
            if cache.generation != before:
                self.times.append(time.perf_counter() - started)

        ChunkLayoutCache.refresh = timed_refresh  # type: ignore[method-assign]


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} / {p95(values) * 1000:.1f}"


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def add_entry(path: Path, n: int) -> None:
    path.write_text(path.read_text() + f"\n- A new entry, number {n}, about the ledger export\n")


def wait_caught_up(ws: Workspace, since: int) -> None:
    deadline = time.monotonic() + 60
    while ws.index._backend.generation() == since:  # the watcher has not written the change yet
        if time.monotonic() > deadline:
            raise RuntimeError("the watcher never indexed the change")
        time.sleep(0.01)
    caught_up(ws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--own-only", action="store_true", help="only phase 3")
    args = parser.parse_args()
    log = Console(stderr=True)
    console = Console()
    if not console.is_terminal:
        console.width = 110
    corpus = Corpus()
    rng = random.Random(f"{SEED}-queries")
    queries = [corpus.query(rng) for _ in range(args.queries)]
    warmup = [corpus.query(rng) for _ in range(WARMUP)]
    if WORK.exists():
        shutil.rmtree(WORK)
    root = corpus.workspace(WORK / "ws", args.files, lambda _: 10)
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up the model"] * 8)
    loads: list[str] = [load_average()]
    with Workspace(root, embedder=embedder) as ws:
        log.log(f"indexing {args.files:,} files")
        ws.index.update(embed=False)
        fill_random_vectors(ws, embedder.model_id, np.random.default_rng(SEED))
        chunks = ws.index._backend.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        full = full_reads(ws, embedder.model_id)
        notes = sorted((root / "notes").rglob("*.md"))
        absorbs = Absorbs()
        results: dict[str, list[float]] = {}
        with ws.watch():
            caught_up(ws)
            for q in warmup:
                for mode in ("hybrid", "keyword"):
                    ws.search(q, mode=mode, track_access=False)
            log.log(f"{chunks:,} chunks; {args.changes} own writes per mode")
            for mode in ("keyword", "hybrid"):
                results[f"{mode}, right after an own write"] = own_writes(ws, mode, args.changes)
            loads.append(load_average())
            log.log(f"{chunks:,} chunks; {args.changes} changes, one file each")
            absorbs.times.clear()
            first: dict[str, list[float]] = {"hybrid": [], "keyword": []}
            for n in range(0 if args.own_only else args.changes):
                generation = ws.index._backend.generation()
                add_entry(notes[(n * 997) % len(notes)], n)
                wait_caught_up(ws, generation)
                for mode in ("hybrid", "keyword"):
                    query = queries[n % len(queries)]
                    search = lambda q=query, m=mode: ws.search(q, mode=m, track_access=False)  # noqa: E731
                    first[mode].append(timed(search))
            absorb = list(absorbs.times)
            loads.append(load_average())
            for mode in () if args.own_only else ("keyword", "hybrid"):
                log.log(f"search, {mode}: unchanged index")
                results[f"{mode} unchanged"] = [
                    timed(lambda q=q, m=mode: ws.search(q, mode=m, track_access=False))
                    for q in queries
                ]
                log.log(f"search, {mode}: a file changing every {args.interval} s")
                results[f"{mode} changing"] = while_changing(
                    ws, notes, args.interval, mode, queries, offset=1000 * (mode == "hybrid")
                )
            loads.append(load_average())
    table = Table(title=f"Absorbing a change at {chunks:,} chunks ({args.files:,} files)")
    table.add_column("measure")
    table.add_column("p50 / p95 ms", justify="right")
    if absorb:
        label = f"absorb one changed file: layout + vectors ({len(absorb)} changes)"
        table.add_row(label, ms(absorb))
    table.add_row("before: full read of the layout (3 runs)", ms(full["layout"]))
    table.add_row("before: full read of the vectors (3 runs)", ms(full["vectors"]))
    for mode in ("hybrid", "keyword"):
        if first[mode]:
            table.add_row(f"first ws.search after a change, {mode}", ms(first[mode]))
    for name, values in results.items():
        table.add_row(f"ws.search with a watcher, {name}", ms(values))
    table.caption = f"load average (1, 5, 15 min) at start / middle / end: {' | '.join(loads)}"
    console.print(table)


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def own_writes(ws: Workspace, mode: str, count: int) -> list[float]:
    """``ws.search`` right after each of ``count`` own writes; each must find its write."""
    times = []
    for n in range(count):
        word = f"quokka{mode}{n}"
        ws.remember(f"The {word} ledger export moved to the annex")
        started = time.perf_counter()
        hits = ws.search(f"{word} ledger", mode=mode, track_access=False)
        times.append(time.perf_counter() - started)
        if not any(word in hit.text for hit in hits):
            raise RuntimeError(f"a search right after an own write missed it ({mode})")
        time.sleep(0.5)  # the watcher hears of it and indexes it
    return times


def full_reads(ws: Workspace, model_id: str) -> dict[str, list[float]]:
    """What a change cost before the change log: the layout and the vectors read whole."""
    conn = ws.index._backend.conn
    out: dict[str, list[float]] = {"layout": [], "vectors": []}
    for _ in range(3):
        out["layout"].append(timed(lambda: read.layout_and_texts(conn)))
        texts = read.layout_and_texts(conn)[1]
        out["vectors"].append(timed(lambda t=texts: VectorCache(model_id).update(conn, t)))
    return out


def while_changing(
    ws: Workspace, notes: list[Path], interval: float, mode: str, queries: list[str], offset: int
) -> list[float]:
    """Search times while another thread changes one file every ``interval`` seconds."""
    stop = threading.Event()

    def change() -> None:
        n = offset
        while not stop.wait(interval):
            add_entry(notes[(n * 991) % len(notes)], n)
            n += 1

    thread = threading.Thread(target=change)
    thread.start()
    try:
        times = []
        for q in queries:
            times.append(timed(lambda q=q: ws.search(q, mode=mode, track_access=False)))
            time.sleep(interval / 5)  # searches spread over the changes, as an agent's are
        return times
    finally:
        stop.set()
        thread.join()


if __name__ == "__main__":
    main()
