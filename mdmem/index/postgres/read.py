"""Reading the PostgreSQL index for a search: the layout, BM25 and HNSW candidates, rows and
counters.

BM25 is FTS5's (the same k1, b, IDF floor and column weights), computed in SQL over the rows
the ``tsvector`` GIN index matches, with document frequencies from the table sync keeps:
``ts_rank`` knows no document frequency. The nearest vectors come from the HNSW index with an
iterative scan, so filters on the chunks still fill the candidate list.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import pq

from mdmem.index.backend import ChunkRow, Layout, Scored
from mdmem.index.filters import Filters
from mdmem.index.postgres import store
from mdmem.index.postgres.terms import query_phrases, tsquery
from mdmem.index.sqlite.db import BM25_WEIGHTS

Conn = psycopg.Connection[Any]
K1 = 1.2
B = 0.75
ROW_COLUMNS = (
    "rowid, id, path, start_line, end_line, heading, text, kind, type, importance, created, "
    "entry_id, agent, session"
)


@contextlib.contextmanager
def snapshot(conn: Conn) -> Iterator[None]:
    """One view of the index for a whole ranking: a repeatable-read transaction sees the
    index as it was when it began, whatever a writer commits meanwhile."""
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def layout(conn: Conn) -> Layout:
    rows = conn.execute(
        "SELECT rowid, path, session IS NOT NULL AND path LIKE '.sessions/%%', archived "
        "FROM chunks ORDER BY path, start_line, end_line, rowid"
    ).fetchall()
    return Layout.build(rows)


def keyword(conn: Conn, layout: Layout, query: str, limit: int) -> Scored:
    """FTS5's BM25 of the ``limit`` best matches of ``query``. One-word terms are scored in
    SQL; a term that is several tokens (``o'brien``: ``o`` then ``brien``) is a phrase, counted
    where its tokens stand next to each other, as FTS5 counts it."""
    phrases = query_phrases(query)
    n_docs, n_tokens = store.stats(conn)
    if not phrases or not n_docs:
        return _scored(layout, [])
    idf = {p: _idf(n_docs, _hits(conn, p)) for p in phrases}
    avgdl = n_tokens / n_docs
    words = [p[0] for p in phrases if len(p) == 1]
    longer = [p for p in phrases if len(p) > 1]
    rows = _words(conn, words, [idf[(w,)] for w in words], avgdl, None if longer else limit)
    if not longer:
        return _scored(layout, rows)
    scores: dict[int, float] = {int(r): float(s) for r, s in rows}
    for phrase in longer:
        for rowid, score in _phrase(conn, phrase, idf[phrase], avgdl).items():
            scores[rowid] = scores.get(rowid, 0.0) + score
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return _scored(layout, best)


def _bm25(f: float, length: int, idf: float, avgdl: float) -> float:
    return idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avgdl))


def _words(
    conn: Conn, words: list[str], idfs: list[float], avgdl: float, limit: int | None
) -> list[tuple[Any, ...]]:
    """BM25 over the rows holding any of ``words`` (each word's frequency weighted by the
    column it stands in), best first."""
    if not words:
        return []
    text_w, heading_w, context_w = BM25_WEIGHTS
    return conn.execute(
        """
        WITH q AS (SELECT * FROM unnest(%(lex)s::text[], %(idf)s::float8[]) AS q(lexeme, idf))
        SELECT c.rowid, sum(q.idf * t.f * (%(k1)s + 1)
                            / (t.f + %(k1)s * (1 - %(b)s + %(b)s * c.length / %(avgdl)s))) AS s
        FROM chunks c
        CROSS JOIN LATERAL (
            SELECT u.lexeme, sum(CASE w WHEN 'A' THEN %(wa)s WHEN 'B' THEN %(wb)s
                                        WHEN 'C' THEN %(wc)s ELSE 0 END) AS f
            FROM unnest(c.terms) u CROSS JOIN LATERAL unnest(u.weights) w
            WHERE u.lexeme = ANY(%(lex)s) GROUP BY u.lexeme) t
        JOIN q ON q.lexeme = t.lexeme
        WHERE c.terms @@ %(match)s::tsquery
        GROUP BY c.rowid ORDER BY s DESC, c.rowid LIMIT %(limit)s
        """,
        {
            "lex": words,
            "idf": idfs,
            "wa": text_w,
            "wb": heading_w,
            "wc": context_w,
            "match": tsquery([(w,) for w in words]),
            "k1": K1,
            "b": B,
            "avgdl": avgdl,
            "limit": limit,
        },
    ).fetchall()


def _phrase(conn: Conn, phrase: tuple[str, ...], idf: float, avgdl: float) -> dict[int, float]:
    """BM25 of one phrase in every row that holds it: occurrences are the positions of its
    first token followed by the others, each weighted by its column."""
    weight = dict(zip(("A", "B", "C"), BM25_WEIGHTS, strict=True))
    found: dict[int, tuple[int, dict[str, dict[int, str]]]] = {}
    for rowid, length, lexeme, positions, weights in conn.execute(
        "SELECT c.rowid, c.length, u.lexeme, u.positions, u.weights "
        "FROM chunks c CROSS JOIN LATERAL unnest(c.terms) u "
        "WHERE c.terms @@ %s::tsquery AND u.lexeme = ANY(%s)",
        (tsquery([phrase]), list(set(phrase))),
    ):
        tokens = found.setdefault(int(rowid), (int(length), {}))[1]
        tokens[str(lexeme)] = dict(zip(positions, weights, strict=True))
    out: dict[int, float] = {}
    for rowid, (length, tokens) in found.items():
        first = tokens.get(phrase[0], {})
        f = sum(
            weight.get(label, 0.0)
            for p, label in first.items()
            if all(p + j in tokens.get(tok, {}) for j, tok in enumerate(phrase[1:], 1))
        )
        if f > 0:
            out[rowid] = _bm25(f, length, idf, avgdl)
    return out


def _hits(conn: Conn, phrase: tuple[str, ...]) -> int:
    """Documents that hold the phrase: the kept frequency of a one-word phrase (FTS5 counts
    the same), a count for longer ones."""
    if len(phrase) == 1:
        row = conn.execute("SELECT n FROM df WHERE term = %s", (phrase[0],)).fetchone()
        return int(row[0]) if row else 0
    row = conn.execute(
        "SELECT count(*) FROM chunks WHERE terms @@ %s::tsquery", (tsquery([phrase]),)
    ).fetchone()
    return int(row[0]) if row else 0


def _idf(n_docs: int, hits: int) -> float:
    """FTS5's IDF, floored at 1e-6 so a word in most documents still counts a little."""
    idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def _scored(layout: Layout, rows: Sequence[tuple[Any, ...]]) -> Scored:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    scores = np.fromiter((max(float(r[1]), 1e-9) for r in rows), dtype=np.float64, count=len(rows))
    return Scored(layout.positions(ids) if len(rows) else ids, scores)


def nearest(
    conn: Conn, layout: Layout, table: str, query: np.ndarray, limit: int, filters: Filters
) -> Scored:
    """Cosine similarity of the ``limit`` nearest chunks that pass ``filters`` (HNSW with an
    iterative scan: rows the filters drop are replaced by the next nearest)."""
    where, args = filter_sql(filters)
    vector = query.astype(np.float32)
    rows = conn.execute(
        f"SELECT c.rowid, 1 - (v.embedding <=> %s) FROM {table} v "
        f"JOIN chunks c ON c.text_hash = v.text_hash WHERE {where} "
        "ORDER BY v.embedding <=> %s LIMIT %s",
        [vector, *args, vector, limit],
    ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    scores = np.fromiter((float(r[1]) for r in rows), dtype=np.float64, count=len(rows))
    return Scored(layout.positions(ids) if len(rows) else ids, scores)


def filtered(conn: Conn, layout: Layout, filters: Filters) -> np.ndarray:
    where, args = filter_sql(filters)
    ids = np.fromiter(
        (r[0] for r in conn.execute(f"SELECT c.rowid FROM chunks c WHERE {where}", args)),
        dtype=np.int64,
    )
    mask = np.zeros(len(layout.rowids), dtype=bool)
    if ids.size:
        mask[layout.positions(ids)] = True
    return mask


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """The stored-column filters as a WHERE clause on ``chunks c`` (the path glob is not
    SQL): the same as the SQLite side's."""
    clauses: list[str] = []
    args: list[Any] = []
    if not filters.include_archived:
        clauses.append("NOT c.archived")
    for column, value in (("type", filters.type), ("agent", filters.agent)):
        if value is not None:
            clauses.append(f"c.{column} = %s")
            args.append(value)
    if filters.session is not None:
        clauses.append("(c.session = %s OR c.path = %s)")
        args += [filters.session, f".sessions/{filters.session}.md"]
    if (since := filters.since_date()) is not None:
        clauses.append("c.created >= %s")
        args.append(since)
    if (until := filters.until_date()) is not None:
        clauses.append("substr(c.created, 1, 10) <= %s")
        args.append(until)
    return (" AND ".join(clauses) or "true"), args


def chunk_rows(conn: Conn, rowids: Sequence[int]) -> dict[int, ChunkRow]:
    return {
        int(row[0]): ChunkRow(*row)
        for row in conn.execute(
            f"SELECT {ROW_COLUMNS} FROM chunks WHERE rowid = ANY(%s)", (list(rowids),)
        )
    }


def access_counts(conn: Conn, keys: Sequence[str]) -> dict[str, int]:
    return {
        str(k): int(n)
        for k, n in conn.execute("SELECT key, count FROM access WHERE key = ANY(%s)", (list(keys),))
    }


def bump_access(conn: Conn, keys: Sequence[str]) -> None:
    """Best effort: a read-only user or a failing server keeps the counts as they are."""
    now = dt.datetime.now().isoformat(timespec="seconds")
    unique = sorted(dict.fromkeys(keys))
    with contextlib.suppress(psycopg.Error), conn.transaction():
        conn.execute(
            "INSERT INTO access(key, count, last_access) SELECT k, 1, %s FROM unnest(%s::text[]) k "
            "ON CONFLICT (key) DO UPDATE SET count = access.count + 1, "
            "last_access = excluded.last_access",
            (now, unique),
        )


def counts(conn: Conn, table: str | None) -> tuple[int, int, int]:
    """(files, chunks, chunks with a vector in ``table``)."""
    files = conn.execute("SELECT count(*) FROM files").fetchone()
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()
    embedded = None
    if table is not None:
        embedded = conn.execute(
            f"SELECT count(*) FROM chunks c WHERE EXISTS (SELECT 1 FROM {table} v "
            "WHERE v.text_hash = c.text_hash)"
        ).fetchone()
    return (
        int(files[0]) if files else 0,
        int(chunks[0]) if chunks else 0,
        int(embedded[0]) if embedded else 0,
    )


def size_bytes(conn: Conn, schema: str) -> int:
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (schema,),
    ).fetchone()
    return int(row[0]) if row else 0
