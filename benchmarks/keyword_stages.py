"""Keyword search in two stages at scale, against the split it replaced there and against
other stage sizes.

FTS5 hands back the rows matching a term for about 0.1-0.2 µs each, and BM25-ranks them for
about 1-2 µs each; that second cost is why ``index/sqlite/scale/keyword.py`` bounds the rows FTS5
scores (``POSTINGS_BUDGET``). Below ``STAGES_FROM`` chunks a query past the budget is split
(the most common terms scored last, on the candidates the rarer ones find); from it on, it goes
in two stages:
stage 1 reads each term's matching rows, rarest term first, up to ``STAGE_ROWS`` rows in all,
and ranks them by the summed IDF of the terms they hold (no term counts and no lengths: reading
every row's length takes most of a second at 1M chunks, after every change); stage 2 scores the
best ``STAGE_SCORED`` of them with FTS5's exact BM25 (``keyword.later_scores``).

Every variant runs on each query in turn, in one process (so the machine's load meets them
alike), in an order that rotates from query to query, after every query's term counts are
cached (all variants read them). The "at any size" variants go in two stages whatever the index's
size, past the budget. Reported: CPU ms p50 / p95 per ``keyword_candidates`` call
(the 1,000 candidates a hybrid search asks for), and the share of the every-term top 10 (FTS5
scoring every row of every term) each returns.

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
from speed import SEED, WORK, Corpus, all_terms, keyword_settings, ms

from mdmem import Workspace
from mdmem.index.fts import query_terms
from mdmem.index.sqlite.index import SqliteIndex
from mdmem.index.sqlite.scale import keyword

LIMIT = 1000
"""Keyword candidates a hybrid search asks for (``search.keyword_candidates``)."""


def shipped(index: SqliteIndex, query: str) -> list[int]:
    found = index.keyword_candidates(query, LIMIT)
    order = np.argsort(-found.scores, kind="stable")
    return index.layout().rowids[found.positions[order]].tolist()


def every_term(index: SqliteIndex, query: str) -> list[int]:
    with all_terms():
        return shipped(index, query)


def split_alone(index: SqliteIndex, query: str) -> list[int]:
    with keyword_settings(STAGES_FROM=sys.maxsize):
        return shipped(index, query)


def stages(rows: int, scored: int) -> Callable[[SqliteIndex, str], list[int]]:
    def run(index: SqliteIndex, query: str) -> list[int]:
        with keyword_settings(STAGES_FROM=0, STAGE_ROWS=rows, STAGE_SCORED=scored):
            return shipped(index, query)

    return run


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


def lengths_seconds(index: SqliteIndex) -> float:
    """Seconds to read every row's length in tokens (what stage 1 would need to normalise by
    length, as BM25 does), from FTS5's docsize table."""
    started = time.perf_counter()
    lengths = [
        sum(keyword._varints(size)) for _, size in index.conn.execute(
            "SELECT id, sz FROM chunks_fts_docsize"
        )
    ]  # fmt: skip
    assert len(lengths) == len(index.layout().rowids)
    return time.perf_counter() - started


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
    shipped_as = (
        f"two stages from {keyword.STAGES_FROM:,} chunks: {keyword.STAGE_ROWS:,} rows read, "
        f"best {keyword.STAGE_SCORED} scored"
    )
    variants: dict[str, Callable[[SqliteIndex, str], list[int]]] = {
        f"shipped ({shipped_as})": shipped,
        f"the split alone ({keyword.POSTINGS_BUDGET:,} rows scored)": split_alone,
        "every term scored": every_term,
    }
    for rows, scored in ((50_000, 300), (100_000, 300), (100_000, 500), (200_000, 1000)):
        name = f"two stages at any size, {rows:,} rows read, best {scored} scored"
        variants[name] = stages(rows, scored)
    with Workspace(root) as ws:
        index = ws.index._backend
        assert isinstance(index, SqliteIndex)
        went_staged = 0
        for query in queries:  # every query's term counts, then a few searches to warm up
            terms = query_terms(query)
            found = index._terms.of(index.conn, index.generation(), terms)
            rows, _ = index._terms.stats(index.conn, index.generation())
            went_staged += keyword.staged(terms, found, rows)
        for query in queries[:3]:
            for run in variants.values():
                run(index, query)
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        kept: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for n, query in enumerate(queries):
            tops = {}
            for name in names[n % len(names) :] + names[: n % len(names)]:
                run = variants[name]
                started = time.process_time()
                tops[name] = run(index, query)[:10]
                cpu[name].append(time.process_time() - started)
            truth = set(tops["every term scored"])
            for name, top10 in tops.items():
                kept[name].append(len(truth & set(top10)) / max(len(truth), 1))
        ids_us, rank_us = per_row_cost(index, sorted({t for q in queries for t in query_terms(q)}))
        reading = lengths_seconds(index)
    table = Table(
        title=f"keyword search at {args.size:,} chunks, {len(queries)} queries "
        f"({went_staged} of them in two stages as shipped)"
    )
    for column in ("variant", "CPU ms p50 / p95", "top 10 = every term's"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name in variants:
        table.add_row(name, ms(cpu[name]), f"{statistics.fmean(kept[name]):.3f}")
    console.print(table)
    console.print(
        f"FTS5 per matching row (the queries' terms): row ids {ids_us:.2f} µs, "
        f"BM25 ranking {rank_us:.2f} µs; every row's length read in {reading:.2f} s"
    )


if __name__ == "__main__":
    main()
