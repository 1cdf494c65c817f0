"""mdmem at 1M chunks: index size, RSS, cold load, no-op re-index, hybrid and keyword latency,
with the float16 vector store (faiss float16, ``index/sqlite/scale/float16_vectors.py``) and, for
comparison, the float32 matrix (``vector_cache.py``).

Usage:  nice -n 19 .venv/bin/python benchmarks/million.py [--sizes 100000,1000000]
                                                          [--queries 30] [--only store,float32]

The workspaces are ``benchmarks/speed.py``'s (same generator, seed and place,
``.bench/speed/search-N``: real Markdown, real FTS5, random unit vectors under the real model's
id). One that already holds N chunks and their vectors is reused as it is (building 1M takes
about 11 minutes); otherwise it is built with speed.py's builders.

Each variant runs in a fresh process (so RSS and the cold load are its own), with the real
model loaded first (its ~530 MB are in every RSS figure):
- cold load: the first hybrid search's ranking in that process (layout, vectors: the store's
  file read, or the float32 matrix read from SQLite; the store's file is written first if
  missing, which is timed separately as "store built");
- no-op re-index: ``Workspace.sync(embed=False)`` with nothing changed, median of 3;
- hybrid and keyword: ranking only (``mdmem.index.search.search`` with the queries' real
  vectors embedded up front), p50 / p95 over the queries, wall clock and (in brackets) the
  process's CPU time, which a shared machine's other load does not inflate; then every query
  again with every term scored by FTS5 ("every term": no term scored last, see
  ``index/sqlite/scale/keyword.py``), and "top 10 = every term's" is the share of that top 10 the
  shipped search returns. The two run as separate passes: interleaved, each shipped search
  followed one that scored ~400,000 rows, and came to it with cold caches (at 1M on
  23 November that added 15-20 ms to the hybrid p95);
- keyword / vector part: ``keyword_candidates`` and ``vector_candidates`` alone, one after the
  other (the two retrievers, which a hybrid search runs side by side on two threads; the rest
  of a hybrid search is fusion and reranking in ``search.py``);
- recall@10: the share of the float32 path's top 10 hits (hybrid) that the store also returns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from rich.console import Console
from rich.table import Table
from speed import (
    ENTRIES_PER_FILE,
    SEED,
    WORK,
    Corpus,
    PrecomputedEmbedder,
    all_terms,
    chunk_count,
    fill_random_vectors,
    ms,
    timed,
)

from mdmem import Workspace
from mdmem.config import IndexConfig, load_config
from mdmem.index.backend import vector_candidates
from mdmem.index.filters import Filters
from mdmem.index.search import search
from mdmem.index.sqlite.scale import keyword

T = TypeVar("T")
VARIANTS = {"store": 0, "float32": 10**12}
"""``index.float16_vectors_from`` of each variant."""


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def ensure(size: int, model_id: str, log: Console) -> Path:
    """speed.py's workspace of ``size`` chunks, reused when it is complete."""
    root = WORK / f"search-{size}"
    db = root / ".mdmem" / "index.db"
    if db.exists():
        with Workspace(root) as ws:
            conn = ws.index._backend.conn
            chunks = chunk_count(ws)
            embedded = conn.execute(
                "SELECT count(*) FROM embeddings WHERE model = ?", (model_id,)
            ).fetchone()[0]
        if chunks >= size and embedded >= chunks * 0.99:
            log.log(f"{size:,}: reusing {root} ({chunks:,} chunks, {embedded:,} vectors)")
            return root
    files = max(1, size // ENTRIES_PER_FILE)
    root = Corpus().workspace(root, files, lambda _: ENTRIES_PER_FILE)
    log.log(f"{size:,}: {files:,} files written, indexing")
    with Workspace(root) as ws:
        took = timed(lambda: ws.index.update(embed=False))
        fill_random_vectors(ws, model_id, np.random.default_rng(SEED + size))
        log.log(f"{size:,}: {chunk_count(ws):,} chunks indexed in {took:.0f} s")
    return root


def child(root: Path, variant: str, queries: list[str], budgets: list[int]) -> dict[str, object]:
    """The measurements of one variant, in this (fresh) process."""
    from mdmem.index.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    vectors = dict(zip(queries, embedder.embed(queries), strict=True))
    stand_in = PrecomputedEmbedder(embedder.model_id, vectors)
    model = embedder.model_id
    config = load_config(root)
    config = replace(config, index=IndexConfig(float16_vectors_from=VARIANTS[variant]))
    out: dict[str, object] = {"rss_model": rss_mb()}
    with Workspace(root, config, embedder=embedder) as ws:
        index, search_config = ws.index._backend, ws.config.search
        store = Path(str(index.db_path) + "-vectors")
        if variant == "store" and not store.exists():
            out["built"] = timed(lambda: index.vector_cache(embedder.model_id))
            index.close()

        def ranked(query: str, mode: str) -> list[tuple[str, int]]:
            hits = search(
                index,
                stand_in,  # type: ignore[arg-type]
                query,
                k=10,
                mode=mode,
                config=search_config,
                filters=Filters(),
                track_access=False,
            )
            return [(h.path, h.start_line) for h in hits]

        out["cold"] = timed(lambda: ranked(queries[0], "hybrid"))
        out["rss_loaded"] = rss_mb()
        noop = [timed(lambda: ws.index.update(embed=False)) for _ in range(3)]
        out["noop"] = statistics.median(noop)
        full: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for mode in ("hybrid", "keyword"):
            for query in queries[:3]:
                ranked(query, mode)
                with all_terms():
                    ranked(query, mode)
            times, every, overlap = [], [], []
            cpu: dict[str, list[float]] = {mode: [], f"{mode}_every": []}
            shipped: list[list[tuple[str, int]]] = []
            for query in queries:  # as shipped, then with every term scored by FTS5
                wall, used = time.perf_counter(), time.process_time()
                shipped.append(ranked(query, mode))
                times.append(time.perf_counter() - wall)
                cpu[mode].append(time.process_time() - used)
            with all_terms():
                for query, top in zip(queries, shipped, strict=True):
                    wall, used = time.perf_counter(), time.process_time()
                    exact = ranked(query, mode)
                    every.append(time.perf_counter() - wall)
                    cpu[f"{mode}_every"].append(time.process_time() - used)
                    overlap.append(len(set(top) & set(exact)) / max(len(exact), 1))
                    full[(mode, query)] = exact
            out[mode], out[f"{mode}_every"], out[f"{mode}_overlap"] = times, every, overlap
            out.update({f"{name}_cpu": values for name, values in cpu.items()})
        parts: dict[str, list[float]] = {}
        limit = search_config.keyword_candidates

        def part(name: str, run: Callable[[], T]) -> T:
            wall, used = time.perf_counter(), time.process_time()
            result = run()
            parts.setdefault(name, []).append(time.perf_counter() - wall)
            parts.setdefault(f"{name}_cpu", []).append(time.process_time() - used)
            return result

        for query in queries:  # where a hybrid search's time goes: the two retrievers alone
            with index.reading():
                found = part("keyword part", lambda q=query: index.keyword_candidates(q, limit))
                part(
                    "vector part",
                    lambda q=query, f=found: vector_candidates(index, model, vectors[q], keyword=f),
                )
        out.update(parts)
        out["top10"] = [ranked(q, "hybrid") for q in queries]
        saved = keyword.POSTINGS_BUDGET
        for budget in budgets:  # keyword search alone at other budgets: CPU ms, top 10 kept
            keyword.POSTINGS_BUDGET = budget
            used, kept = [], []
            for query in queries:
                started = time.process_time()
                top = ranked(query, "keyword")
                used.append(time.process_time() - started)
                exact = full[("keyword", query)]
                kept.append(len(set(top) & set(exact)) / max(len(exact), 1))
            out[f"budget {budget}"] = (used, kept)
        keyword.POSTINGS_BUDGET = saved
        out["rss"] = rss_mb()
        out["disk"] = sum(
            p.stat().st_size for p in index.db_path.parent.glob("index.db*") if p.is_file()
        )
        out["store_disk"] = store.stat().st_size if store.exists() else 0
    return out


def with_cpu(result: dict[str, object], name: str) -> str:
    """Wall-clock p50 / p95 ms, and in brackets the process's CPU time (all its threads): on
    a shared machine the wall clock also counts the time other processes held the cores."""
    return f"{ms(result[name])} ({ms(result[f'{name}_cpu'])})"  # type: ignore[arg-type]


def run_child(
    root: Path, variant: str, queries: list[str], budgets: list[int]
) -> dict[str, object]:
    args = [sys.executable, __file__, "--child", str(root), variant, json.dumps(queries)]
    args.append(json.dumps(budgets))
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        result = child(
            Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
        )
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--only", default="store,float32")
    parser.add_argument(
        "--budgets",
        default="",
        help="also time keyword search alone at these keyword.POSTINGS_BUDGET values",
    )
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b]
    log = Console(stderr=True)
    import random

    corpus = Corpus()
    rng = random.Random(f"{SEED}-million")
    queries = [corpus.query(rng) for _ in range(args.queries)]
    from mdmem.index.embed import DEFAULT_MODEL

    table = Table(title="mdmem at scale (ranking; model loaded in every process)")
    for column in (
        "chunks",
        "vectors",
        "index on disk MB (of it: store)",
        "RSS MB: model / loaded / after",
        "store built s",
        "cold load ms",
        "no-op re-index s",
        "hybrid ms p50 / p95 (CPU)",
        "hybrid, every term",
        "keyword ms p50 / p95 (CPU)",
        "keyword, every term",
        "top 10 = every term's: hybrid / keyword",
        "keyword; vector part ms (CPU)",
        "recall@10 vs float32",
    ):
        table.add_column(column, justify="right")
    swept: list[tuple[int, str, dict[str, object]]] = []
    for size in [int(s) for s in args.sizes.split(",")]:
        root = ensure(size, f"sentence-transformers/{DEFAULT_MODEL}", log)
        results = {}
        for variant in args.only.split(","):
            log.log(f"{size:,}: {variant}, load average {os.getloadavg()[0]:.1f}")
            results[variant] = run_child(root, variant, queries, budgets)
            swept.append((size, variant, results[variant]))
        for variant, r in results.items():
            recall = ""
            if variant == "store" and "float32" in results:
                truth = results["float32"]["top10"]
                shares = [
                    len({tuple(h) for h in a} & {tuple(h) for h in b}) / max(len(b), 1)
                    for a, b in zip(r["top10"], truth, strict=True)  # type: ignore[call-overload]
                ]
                recall = f"{statistics.mean(shares):.3f}"
            table.add_row(
                f"{size:,}",
                "faiss float16" if variant == "store" else "float32 numpy",
                f"{r['disk'] / 1e6:,.0f} ({r['store_disk'] / 1e6:,.0f})",  # type: ignore[operator]
                f"{r['rss_model']:,.0f} / {r['rss_loaded']:,.0f} / {r['rss']:,.0f}",
                f"{r['built']:.1f}" if "built" in r else "",
                f"{r['cold'] * 1000:,.0f}",  # type: ignore[operator]
                f"{r['noop']:.2f}",
                with_cpu(r, "hybrid"),
                with_cpu(r, "hybrid_every"),
                with_cpu(r, "keyword"),
                with_cpu(r, "keyword_every"),
                f"{statistics.mean(r['hybrid_overlap']):.3f} / "  # type: ignore[arg-type]
                f"{statistics.mean(r['keyword_overlap']):.3f}",  # type: ignore[arg-type]
                f"{with_cpu(r, 'keyword part')}; {with_cpu(r, 'vector part')}",
                recall,
            )
    console = Console(width=220)  # the whole table, also when printed to a file
    console.print(table)
    if budgets:
        sweep = Table(title="keyword search alone at other budgets (ranking)")
        for column in ("chunks", "vectors", "budget", "CPU ms p50 / p95", "top 10 = every term's"):
            sweep.add_column(column, justify="right")
        for size, variant, r in swept:
            for budget in budgets:
                used, kept = r[f"budget {budget}"]  # type: ignore[misc]
                sweep.add_row(
                    f"{size:,}", variant, f"{budget:,}", ms(used), f"{statistics.mean(kept):.3f}"
                )
        console.print(sweep)
    console.print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
