"""Keyword search in two stages at scale, weighed against the shipped search (not shipped).

FTS5 hands back the rows matching a term for about 0.1 µs each, and BM25-scores them for about
2.3 µs each; that second cost is why ``index/sqlite/keyword.py`` bounds the rows FTS5 scores
(``POSTINGS_BUDGET``) and scores the most common terms last, on the candidates only. The idea
weighed here spends the cheap cost instead: stage 1 reads each term's matching rows, rarest
term first, up to ``budget`` rows in all, and ranks them by the summed IDF of the terms they
hold (no term counts and no lengths: reading every row's length takes 1.3-1.7 s at 1M chunks,
after every change); stage 2 scores the best ``M`` of them with FTS5's exact BM25
(``keyword.later_scores``, which re-tokenizes their text).

Every variant runs on each query in turn, in one process (so the machine's load meets them
alike). Reported: CPU ms p50 / p95 per keyword search (the 1,000 candidates a hybrid search
asks for), and the share of the every-term top 10 (FTS5 scoring every row of every term)
each returns.

Usage:  .venv/bin/python benchmarks/keyword_stages.py [--size 1000000] [--queries 60]
The workspace is ``benchmarks/speed.py``'s ``.bench/speed/search-N`` (build it with
``benchmarks/million.py --sizes N`` first).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from rich.console import Console
from rich.table import Table
from speed import SEED, WORK, Corpus, all_terms, ms

from mdmem import Workspace
from mdmem.index.fts import query_terms
from mdmem.index.sqlite import keyword
from mdmem.index.sqlite.index import SqliteIndex

LIMIT = 1000
"""Keyword candidates a hybrid search asks for (``search.keyword_candidates``)."""


def two_stage(index: SqliteIndex, query: str, top: int, budget: int) -> list[int]:
    """The best ``LIMIT`` row ids by the two stages (see the module's docstring)."""
    conn, layout, generation = index.conn, index.layout(), index.generation()
    counts = index._terms  # the index's own per-generation term counts
    terms = query_terms(query)
    found = counts.of(conn, generation, terms)
    rows, _ = counts.stats(conn, generation)
    idf = {t: keyword._idf(rows, found[t]) for t in terms}
    summed = np.zeros(len(layout.rowids), dtype=np.float32)
    read = 0
    for term in sorted(terms, key=lambda t: found[t]):
        if read and read + found[term] > budget:
            break
        read += found[term]
        ids = conn.execute(
            "SELECT group_concat(rowid) FROM chunks_fts WHERE chunks_fts MATCH ?",
            (keyword._quoted(term),),
        ).fetchone()[0]
        if ids:
            summed[layout.positions(np.array(ids.split(","), dtype=np.int64))] += idf[term]
    held = np.flatnonzero(summed)
    if len(held) > top:
        held = held[np.argpartition(-summed[held], top - 1)[:top]]
    best = layout.rowids[held]
    _, avgdl = counts.stats(conn, generation)
    exact = keyword.later_scores(conn, best, terms, [idf[t] for t in terms], avgdl)
    return best[np.argsort(-exact, kind="stable")[:LIMIT]].tolist()


def shipped(index: SqliteIndex, query: str) -> list[int]:
    found = index.keyword_candidates(query, LIMIT)
    order = np.argsort(-found.scores, kind="stable")
    return index.layout().rowids[found.positions[order]].tolist()


def every_term(index: SqliteIndex, query: str) -> list[int]:
    with all_terms():
        return shipped(index, query)


def per_row_cost(index: SqliteIndex, terms: list[str]) -> tuple[float, float]:
    """µs per matching row: FTS5's row ids alone, and FTS5 ranking them by BM25."""
    conn, n, ids_s, rank_s = index.conn, 0, 0.0, 0.0
    for term in terms:
        quoted = keyword._quoted(term)
        started = time.process_time()
        ids = conn.execute(
            "SELECT group_concat(rowid) FROM chunks_fts WHERE chunks_fts MATCH ?", (quoted,)
        ).fetchone()[0]
        ids_s += time.process_time() - started
        started = time.process_time()
        conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 10",
            (quoted,),
        ).fetchall()
        rank_s += time.process_time() - started
        n += len(ids.split(",")) if ids else 0
    return ids_s / max(n, 1) * 1e6, rank_s / max(n, 1) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    console = Console()
    root = WORK / f"search-{args.size}"
    if not (root / ".mdmem" / "index.db").exists():
        sys.exit(f"{root}: no index; run benchmarks/million.py --sizes {args.size} first")
    corpus, rng = Corpus(), random.Random(f"{SEED}-million")
    queries = [corpus.query(rng) for _ in range(args.queries)]
    variants: dict[str, Callable[[SqliteIndex, str], list[int]]] = {
        "shipped (budget 20,000 rows scored)": shipped,
        "every term scored": every_term,
    }
    for top, budget in ((500, 100_000), (500, 200_000), (1000, 200_000)):
        variants[f"two stages: {budget:,} rows read, best {top} scored"] = (
            lambda index, query, top=top, budget=budget: two_stage(index, query, top, budget)
        )
    with Workspace(root) as ws:
        index = ws.index
        assert isinstance(index, SqliteIndex)
        for query in queries[:3]:  # warm the caches and the term counts
            for run in variants.values():
                run(index, query)
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        kept: dict[str, list[float]] = {name: [] for name in variants}
        for query in queries:
            tops = {}
            for name, run in variants.items():
                started = time.process_time()
                tops[name] = run(index, query)[:10]
                cpu[name].append(time.process_time() - started)
            truth = set(tops["every term scored"])
            for name, top10 in tops.items():
                kept[name].append(len(truth & set(top10)) / max(len(truth), 1))
        ids_us, rank_us = per_row_cost(index, sorted({t for q in queries for t in query_terms(q)}))
    table = Table(title=f"keyword search at {args.size:,} chunks, {len(queries)} queries")
    for column in ("variant", "CPU ms p50 / p95", "top 10 = every term's"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name in variants:
        table.add_row(name, ms(cpu[name]), f"{statistics.fmean(kept[name]):.3f}")
    console.print(table)
    console.print(
        f"FTS5 per matching row (the queries' terms): row ids {ids_us:.2f} µs, "
        f"BM25 ranking {rank_us:.2f} µs"
    )


if __name__ == "__main__":
    main()
