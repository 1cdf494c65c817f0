"""Keyword candidates at a bounded cost: the most common words of a long query are left out.

FTS5 scores every chunk that matches any term before it sorts and cuts to the best ``limit``,
so one word found in a third of 100k chunks ("one", "work") makes a query score tens of
thousands of rows (50-120 ms) while adding almost nothing to the ranking: BM25 gives such a
word a small weight, and the rarer words decide. Before the query runs, each term's document
frequency is counted (cached per index generation); while the terms together would match more
than :data:`POSTINGS_BUDGET` rows, the most common term is dropped, as long as it is in at
least :data:`MIN_SHARE` of the chunks and another term is left. A small index (a LoCoMo
conversation: ~600 chunks) never reaches the budget, so its ranking is exactly as before.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from mdmem.index.backend import Layout, Scored
from mdmem.index.fts import query_terms

POSTINGS_BUDGET = 10_000
"""Matching rows (summed over the terms) a keyword query may make FTS5 score before its most
common terms are left out (benchmarks/speed.py, "all terms" rows)."""
MIN_SHARE = 0.15
"""Only a term in at least this share of the chunks is ever left out. On LoCoMo with the
budget forced down to 10% of a conversation's chunks (the ratio 10,000 is of 100k), hybrid
R@5 / R@10 / rec@2000 were 0.638 / 0.743 / 0.897 at 15% against 0.644 / 0.744 / 0.897 with
every term; at 5%, 0.630 / 0.733 / 0.896 (README, "Speed and memory")."""


class TermCounts:
    """How many chunks match each query term, for one generation of the index."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.counts: dict[str, int] = {}

    def of(self, conn: sqlite3.Connection, generation: int, terms: list[str]) -> dict[str, int]:
        if generation != self.generation:
            self.generation, self.counts = generation, {}
        for term in terms:
            if term not in self.counts:
                self.counts[term] = conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (_quoted(term),)
                ).fetchone()[0]
        return {term: self.counts[term] for term in terms}


def kept_terms(terms: list[str], counts: dict[str, int], chunks: int) -> list[str]:
    """``terms`` without the most common ones while they match more than the budget, in the
    query's order."""
    by_count = sorted(terms, key=lambda t: counts[t])
    while (
        len(by_count) > 1
        and sum(counts[t] for t in by_count) > POSTINGS_BUDGET
        and counts[by_count[-1]] >= MIN_SHARE * chunks
    ):
        by_count.pop()
    kept = set(by_count)
    return [t for t in terms if t in kept]


def keyword(
    conn: sqlite3.Connection,
    layout: Layout,
    query: str,
    limit: int,
    counts: TermCounts,
    generation: int,
) -> Scored:
    """FTS5 BM25 (with the configured column weights) of the ``limit`` best matches."""
    terms = query_terms(query)
    if len(terms) > 1:
        terms = kept_terms(terms, counts.of(conn, generation, terms), len(layout.rowids))
    rows = []
    if terms:
        rows = conn.execute(
            "SELECT rowid, -rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (" OR ".join(_quoted(t) for t in terms), limit),
        ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    scores = np.fromiter((max(r[1], 1e-9) for r in rows), dtype=np.float64, count=len(rows))
    return Scored(layout.positions(ids) if len(rows) else ids, scores)


def _quoted(term: str) -> str:
    """A literal FTS5 string: no query syntax can break it (as ``fts.fts_query`` quotes)."""
    return '"' + term.replace('"', '""') + '"'
