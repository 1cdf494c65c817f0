"""Keyword candidates at a bounded cost: the most common words of a query are scored last, or,
in a large index, the query goes in two stages over FTS5's own tables.

Why: at 1M chunks FTS5 scoring every row a common-word query matched took p95 369 ms of CPU;
bounded to 20,000 rows it takes 59 ms, and in two stages 27.6 ms with 0.987 of the every-term top
10 (``benchmarks/million.py --budgets``, ``benchmarks/keyword_stages.py``).

FTS5 scores every chunk that matches any term before it sorts and cuts to the best ``limit``,
so one word found in a tenth of 1M chunks makes a query score 100,000 rows while adding little
to the ranking: BM25 gives such a word a small weight, and the rarer words decide. Before the
query runs, each term's document frequency is counted (cached per index generation). While the
terms together would match more than :data:`POSTINGS_BUDGET` rows, the most common term is
moved out of the FTS5 query (the rarest term always stays). FTS5 then finds and scores the
candidates by the rarer terms alone, and each moved term's exact BM25 share is added to those
candidates afterwards, from their own tokens (:func:`later_scores`): FTS5's BM25 is a sum over
the query's terms, each share depending only on the term's document frequency, the chunk's
length and the term's weighted count in the chunk, so a candidate scores exactly what the full
query gives it. What is lost are chunks that hold none of the rarer terms, or too little of them
to be among the candidates. A small index (a LoCoMo conversation: ~600 chunks) never reaches
the budget, so its ranking is exactly as before.

In an index of :data:`STAGES_FROM` chunks or more, a query past the budget is answered in two
stages instead, because FTS5 hands back a term's matching row ids for about 0.1 µs each and
BM25-ranks them for about 1-2 µs each. Stage 1 reads the row ids of each term, rarest first,
up to :data:`STAGE_ROWS` rows, and ranks the rows by the summed IDF of the terms they hold;
stage 2 gives the best :data:`STAGE_SCORED` of them the full query's exact BM25
(:func:`later_scores`): at 1M chunks faster than the split above, and it finds more of the
every-term top 10; at 100k the split is exact and as fast.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Sequence

import numpy as np

from mdmem.index.backend import ChunkLayout, Scored
from mdmem.index.fts import query_terms
from mdmem.index.sqlite.db import BM25_WEIGHTS, FTS_TOKENIZER

POSTINGS_BUDGET = 20_000
"""Matching rows (summed over the terms) FTS5 may score for a keyword query; past it the most
common terms are scored only on the candidates the others find. This many: at 1M chunks 59 ms
p95 of CPU for 0.88 of the full query's top 10, against 369 ms for every term
(``benchmarks/million.py --budgets``)."""
STAGES_FROM = 500_000
"""Chunks in the index from which a query past the budget goes in two stages: at 1M chunks they
keep 0.987 of the every-term top 10 where the split keeps 0.872, in less time; at 100k the split
is exact (``benchmarks/keyword_stages.py``; sizes in between were not measured)."""
STAGE_ROWS = 100_000
"""Row ids stage 1 reads (each term whole, rarest first; the rarest always)."""
STAGE_SCORED = 300
"""Stage 1's best rows that stage 2 scores exactly: the candidates returned. With
``STAGE_ROWS`` read, 300 keep 0.987 of the every-term top 10 at 1M chunks; more keep no more
(``benchmarks/keyword_stages.py``)."""
K1, B = 1.2, 0.75
"""FTS5's BM25 constants (``fts5_aux.c``)."""


class TermCounts:
    """How many chunks match each query term, for one generation of the index, and FTS5's
    row count and mean row length (its BM25 statistics)."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.counts: dict[str, int] = {}
        self.totals: tuple[int, float] | None = None

    def _at(self, generation: int) -> None:
        if generation != self.generation:
            self.generation, self.counts, self.totals = generation, {}, None

    def of(self, conn: sqlite3.Connection, generation: int, terms: list[str]) -> dict[str, int]:
        self._at(generation)
        for term in terms:
            if term not in self.counts:
                self.counts[term] = conn.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (_quoted(term),)
                ).fetchone()[0]
        return {term: self.counts[term] for term in terms}

    def stats(self, conn: sqlite3.Connection, generation: int) -> tuple[int, float]:
        """(rows, mean tokens per row), read from FTS5's own averages record as its BM25
        reads them."""
        self._at(generation)
        if self.totals is None:
            block = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
            values = _varints(block[0]) if block is not None else []
            rows = values[0] if values else 0
            tokens = sum(values[1:])
            self.totals = (rows, tokens / max(rows, 1))
        return self.totals


def split_terms(
    terms: list[str],
    counts: dict[str, int],
    movable: Callable[[str], bool] = lambda _: True,
) -> tuple[list[str], list[str]]:
    """(terms FTS5 scores, terms scored last), each in the query's order: while the terms FTS5
    scores match more than the budget together, the most common ``movable`` one is scored
    last; the rarest term always stays."""
    by_count = sorted(terms, key=lambda t: counts[t])
    total = sum(counts[t] for t in terms)
    later: set[str] = set()
    for term in reversed(by_count[1:]):
        if total <= POSTINGS_BUDGET:
            break
        if movable(term):
            later.add(term)
            total -= counts[term]
    return [t for t in terms if t not in later], [t for t in terms if t in later]


def keyword(
    conn: sqlite3.Connection,
    layout: ChunkLayout,
    query: str,
    limit: int,
    counts: TermCounts,
    generation: int,
) -> Scored:
    """FTS5 BM25 (with the configured column weights) of the ``limit`` best matches."""
    terms = query_terms(query)
    later: list[str] = []
    if len(terms) > 1:
        found = counts.of(conn, generation, terms)
        stats = counts.stats(conn, generation)
        if staged(terms, found, stats[0]):
            return two_stages(conn, layout, terms, found, stats, limit)
        terms, later = split_terms(terms, found, single_token)
    rows: list[tuple[int, float]] = []
    if terms:
        rows = conn.execute(
            "SELECT rowid, -rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (" OR ".join(_quoted(t) for t in terms), limit),
        ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    scores = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
    if later and len(rows):
        n_rows, avgdl = counts.stats(conn, generation)
        idf = [_idf(n_rows, c) for c in counts.of(conn, generation, later).values()]
        scores = scores + later_scores(conn, ids, later, idf, avgdl)
    scores = np.maximum(scores, 1e-9)
    return Scored(layout.positions(ids) if len(ids) else ids, scores)


def later_scores(
    conn: sqlite3.Connection,
    rowids: np.ndarray,
    terms: Sequence[str],
    idf: Sequence[float],
    avgdl: float,
) -> np.ndarray:
    """The BM25 share of ``terms`` (single tokens) in each of these chunks, as FTS5 computes
    it: the chunks' indexed columns are tokenized again by the same tokenizer, which also
    gives their lengths in tokens exactly as FTS5 counted them (no read of its docsize table)."""
    texts = conn.execute(
        "SELECT id, c0, c1, c2 FROM chunks_fts_content WHERE id IN "
        "(SELECT value FROM json_each(?))",
        ("[" + ",".join(map(str, rowids.tolist())) + "]",),
    ).fetchall()
    weighted, lengths = _Tokenizer.local().counts(texts, terms)
    at = {int(r): n for n, r in enumerate(rowids)}
    out = np.zeros(len(rowids))
    for (rowid, term), f in weighted.items():  # f: the term's weighted count
        d = lengths.get(rowid, 0)
        share = idf[term] * (f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl))
        out[at[rowid]] += share
    return out


class _Tokenizer:
    """FTS5's tokenizer on an in-memory table of this thread (the same columns and
    tokenizer as ``chunks_fts``), so the tokens are exactly the index's."""

    _local = threading.local()

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        self.conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(text, heading, context, content='', "
            f"tokenize='{FTS_TOKENIZER}')"
        )
        self.conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self.tokens: dict[str, str | None] = {}

    @classmethod
    def local(cls) -> _Tokenizer:
        found: _Tokenizer | None = getattr(cls._local, "tokenizer", None)
        if found is None:
            found = cls._local.tokenizer = cls()
        return found

    def token(self, term: str) -> str | None:
        """The one token ``term`` becomes, None when it becomes none or several."""
        if term not in self.tokens:
            if len(self.tokens) >= 10_000:  # a long-lived server meets many words
                self.tokens.clear()
            found = self._tokens([(-1, term, "", "")])
            self.tokens[term] = found[0] if len(found) == 1 else None
        return self.tokens[term]

    def counts(
        self, docs: Sequence[tuple[int, str, str, str]], terms: Sequence[str]
    ) -> tuple[dict[tuple[int, int], float], dict[int, int]]:
        """{(rowid, term number): weighted count} of each term's token in each doc, every
        occurrence weighted by its column's BM25 weight, and {rowid: tokens in the doc} of the
        docs that hold any of them."""
        wanted: dict[str, list[int]] = {}
        for n, term in enumerate(terms):
            token = self.token(term)
            if token is not None:
                wanted.setdefault(token, []).append(n)
        columns = {"text": 0, "heading": 1, "context": 2}
        out: dict[tuple[int, int], float] = {}
        lengths: dict[int, int] = {}
        if not wanted:
            return out, lengths
        conn = self.conn
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO t(rowid, text, heading, context) VALUES (?,?,?,?)", docs)
            marks = ",".join("?" * len(wanted))
            for term, doc, col, n in conn.execute(
                f"SELECT term, doc, col, count(*) FROM v WHERE term IN ({marks}) "
                "GROUP BY term, doc, col",
                list(wanted),
            ):
                lengths[doc] = 0
                for number in wanted[term]:
                    key = (doc, number)
                    out[key] = out.get(key, 0.0) + n * BM25_WEIGHTS[columns[col]]
            if lengths:
                found = "[" + ",".join(map(str, lengths)) + "]"
                for doc, sz in conn.execute(
                    "SELECT id, sz FROM t_docsize WHERE id IN (SELECT value FROM json_each(?))",
                    (found,),
                ):
                    lengths[doc] = sum(sz) if max(sz, default=0) < 0x80 else sum(_varints(sz))
            conn.execute("INSERT INTO t(t) VALUES('delete-all')")
        finally:
            conn.execute("COMMIT")
        return out, lengths

    def _tokens(self, docs: Sequence[tuple[int, str, str, str]]) -> list[str]:
        conn = self.conn
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO t(rowid, text, heading, context) VALUES (?,?,?,?)", docs)
            found = [r[0] for r in conn.execute("SELECT term FROM v ORDER BY offset")]
            conn.execute("INSERT INTO t(t) VALUES('delete-all')")
        finally:
            conn.execute("COMMIT")
        return found


def staged(terms: Sequence[str], found: dict[str, int], rows: int) -> bool:
    """Whether a query of these ``terms`` (each matching ``found`` rows of the index's
    ``rows``) goes in two stages: an index of :data:`STAGES_FROM` chunks or more, several
    terms (one gives stage 1 nothing to rank by) matching more than the budget together, all
    single tokens (stage 2 counts tokens)."""
    return (
        rows >= STAGES_FROM
        and len(terms) > 1
        and sum(found[t] for t in terms) > POSTINGS_BUDGET
        and all(map(single_token, terms))
    )


def two_stages(
    conn: sqlite3.Connection,
    layout: ChunkLayout,
    terms: Sequence[str],
    found: dict[str, int],
    stats: tuple[int, float],
    limit: int,
) -> Scored:
    """The best of at most ``limit`` candidates, in two stages (see the module's docstring):
    ``found`` holds each term's matching rows, ``stats`` FTS5's row count and mean length."""
    rows, avgdl = stats
    idf = {term: _idf(rows, found[term]) for term in terms}
    summed = np.zeros(len(layout.rowids), dtype=np.float32)
    first_read: list[np.ndarray] = []  # each row once: scanning all of ``summed`` costs more
    read = 0
    for term in sorted(terms, key=found.__getitem__):
        if read and read + found[term] > STAGE_ROWS:
            break
        read += found[term]
        ids = conn.execute(
            "SELECT group_concat(rowid) FROM chunks_fts WHERE chunks_fts MATCH ?",
            (_quoted(term),),
        ).fetchone()[0]
        if ids:
            at = layout.positions(np.fromstring(ids, dtype=np.int64, sep=","))
            first_read.append(at[summed[at] == 0])  # every IDF is above 0
            summed[at] += idf[term]
    held = np.concatenate(first_read) if first_read else np.zeros(0, dtype=np.int64)
    if len(held) > STAGE_SCORED:
        held = held[np.argpartition(-summed[held], STAGE_SCORED - 1)[:STAGE_SCORED]]
    scores = later_scores(conn, layout.rowids[held], terms, [idf[t] for t in terms], avgdl)
    if len(held) > limit:  # the best by the exact score, not by stage 1's
        kept = np.argsort(-scores, kind="stable")[:limit]
        held, scores = held[kept], scores[kept]
    return Scored(held, np.maximum(scores, 1e-9))


def single_token(term: str) -> bool:
    """Whether FTS5 reads ``term`` as one token (a phrase of several is matched, not counted)."""
    return _Tokenizer.local().token(term) is not None


def _idf(rows: int, hits: int) -> float:
    """FTS5's IDF, floored at 1e-6 as ``fts5_aux.c`` does."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (as FTS5 writes its sizes): 7 bits a byte, high bit set on all but the
    last; a ninth byte carries 8 bits."""
    out: list[int] = []
    value, count = 0, 0
    for byte in blob:
        if count == 8:
            out.append((value << 8) | byte)
            value, count = 0, 0
            continue
        value = (value << 7) | (byte & 0x7F)
        count += 1
        if not byte & 0x80:
            out.append(value)
            value, count = 0, 0
    return out


def _quoted(term: str) -> str:
    """A literal FTS5 string: no query syntax can break it (as ``fts.fts_query`` quotes)."""
    return '"' + term.replace('"', '""') + '"'
