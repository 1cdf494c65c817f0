"""Reading the PostgreSQL index for a search: the layout, BM25 and HNSW candidates, rows and
counters.

BM25 is FTS5's (the same k1, b, IDF floor and column weights), computed in SQL over the
postings of the query's terms, with document frequencies from the table sync keeps:
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

from mdmem.index.backend import ChunkLayout, ChunkRow, Scored
from mdmem.index.filters import Filters, where_clause
from mdmem.index.postgres import postgres_writes
from mdmem.index.postgres.terms import query_phrases
from mdmem.index.sqlite.db import BM25_WEIGHTS
from mdmem.memory.relations import Relation

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


def layout(conn: Conn) -> ChunkLayout:
    rows = conn.execute(
        "SELECT rowid, path, session IS NOT NULL AND path LIKE '.sessions/%%', archived "
        "FROM chunks ORDER BY path, start_line, end_line, rowid"
    ).fetchall()
    return ChunkLayout.build(rows)


def keyword(conn: Conn, layout: ChunkLayout, query: str, limit: int) -> Scored:
    """FTS5's BM25 of the ``limit`` best matches of ``query``, in one statement over the
    postings of its terms (never a chunk's ``tsvector``). A word's postings hold its weighted
    frequency in each chunk; a term that is several tokens (``o'brien``: ``o`` then
    ``brien``) is a phrase, counted where its tokens stand next to each other in one column,
    as FTS5 counts it, and its document count is counted the same way."""
    phrases = query_phrases(query)
    n_docs, n_tokens = postgres_writes.stats(conn)
    if not phrases or not n_docs:
        return _scored(layout, [])
    words = [p[0] for p in phrases if len(p) == 1]
    args: dict[str, Any] = {
        "words": words,
        "idfs": [_idf(n_docs, n) for n in _word_hits(conn, words)],
        "n": n_docs,
        "k1": K1,
        "b": B,
        "avgdl": n_tokens / n_docs,
        "limit": limit,
    }
    parts = [
        "SELECT p.rowid, p.length, q.idf, p.f FROM unnest(%(words)s::text[], %(idfs)s::float8[])"
        " AS q(term, idf) JOIN postings p ON p.term = q.term"
    ]
    ctes = []
    for i, phrase in enumerate(p for p in phrases if len(p) > 1):
        ctes.append(f"ph{i} AS MATERIALIZED ({_phrase_sql(phrase, f'ph{i}_', args)})")
        idf = "ln((%(n)s::float8 - h.n + 0.5) / (h.n + 0.5))"
        parts.append(
            f"SELECT ph{i}.rowid, ph{i}.length, "
            f"CASE WHEN {idf} > 0 THEN {idf} ELSE 1e-6 END, ph{i}.f "
            f"FROM ph{i}, (SELECT count(*) AS n FROM ph{i}) h"
        )
    sql = (
        ("WITH " + ", ".join(ctes) + " " if ctes else "")
        + "SELECT t.rowid, sum(t.idf * t.f * (%(k1)s + 1) / (t.f + %(k1)s * "
        "(1 - %(b)s + %(b)s * t.length / %(avgdl)s))) AS s FROM ("
        + " UNION ALL ".join(parts)
        + ") t GROUP BY t.rowid ORDER BY s DESC, t.rowid LIMIT %(limit)s"
    )
    return _scored(layout, conn.execute(sql, args).fetchall())  # type: ignore[arg-type]


def _phrase_sql(phrase: tuple[str, ...], prefix: str, args: dict[str, Any]) -> str:
    """(rowid, length, f) of every chunk where the phrase stands: each place of its first
    token whose next tokens follow it (``+ 4`` a token), weighted by its column."""
    text_w, heading_w, context_w = BM25_WEIGHTS
    args.update({f"{prefix}wa": text_w, f"{prefix}wb": heading_w, f"{prefix}wc": context_w})
    joins, follows = [], []
    for j, token in enumerate(phrase):
        args[f"{prefix}t{j}"] = token
        if j:
            joins.append(
                f"JOIN postings p{j} ON p{j}.rowid = p0.rowid AND p{j}.term = %({prefix}t{j})s"
            )
            follows.append(f"x + {4 * j} = ANY(p{j}.places)")
    weight = (
        f"CASE x %% 4 WHEN 0 THEN %({prefix}wa)s WHEN 1 THEN %({prefix}wb)s ELSE %({prefix}wc)s END"
    )
    return (
        f"SELECT p0.rowid, p0.length, f.f FROM postings p0 {' '.join(joins)} "
        f"CROSS JOIN LATERAL (SELECT sum({weight}) AS f FROM unnest(p0.places) x "
        f"WHERE {' AND '.join(follows)}) f WHERE p0.term = %({prefix}t0)s AND f.f > 0"
    )


def _word_hits(conn: Conn, words: list[str]) -> list[int]:
    """Documents that hold each word: the frequencies sync keeps (FTS5 counts the same)."""
    found = dict(conn.execute("SELECT term, n FROM df WHERE term = ANY(%s)", (words,)).fetchall())
    return [int(found.get(w, 0)) for w in words]


def _idf(n_docs: int, hits: int) -> float:
    """FTS5's IDF, floored at 1e-6 so a word in most documents still counts a little."""
    idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def _scored(layout: ChunkLayout, rows: Sequence[tuple[Any, ...]]) -> Scored:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    scores = np.fromiter((max(float(r[1]), 1e-9) for r in rows), dtype=np.float64, count=len(rows))
    return Scored(layout.positions(ids) if len(rows) else ids, scores)


def nearest(
    conn: Conn, layout: ChunkLayout, table: str, query: np.ndarray, limit: int, filters: Filters
) -> Scored:
    """Cosine similarity of the ``limit`` nearest chunks that pass ``filters`` (HNSW with an
    iterative scan: rows the filters drop are replaced by the next nearest)."""
    where, args = where_clause(filters, "%s")
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


def filtered(conn: Conn, layout: ChunkLayout, filters: Filters) -> np.ndarray:
    where, args = where_clause(filters, "%s")
    rows = conn.execute(f"SELECT c.rowid FROM chunks c WHERE {where}", args)
    return layout.mask(np.fromiter((r[0] for r in rows), dtype=np.int64))


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


def bump_access(conn: Conn, keys: Sequence[str], wait_s: float | None = None) -> bool:
    """Best effort: a read-only user or a failing server keeps the counts as they are (False).
    ``wait_s``: wait at most that long for the rows another transaction is counting."""
    now = dt.datetime.now().isoformat(timespec="seconds")
    unique = sorted(dict.fromkeys(keys))
    try:
        with conn.transaction():
            if wait_s is not None:
                conn.execute(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}")
            conn.execute(
                "INSERT INTO access(key, count, last_access) SELECT k, 1, %s "
                "FROM unnest(%s::text[]) k ON CONFLICT (key) DO UPDATE SET "
                "count = access.count + 1, last_access = excluded.last_access",
                (now, unique),
            )
    except psycopg.Error:
        return False
    return True


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


def relations(conn: Conn, entry_id: str | None, kind: str | None) -> list[Relation]:
    """Rows of the relations table (all, or from or to ``entry_id``; of ``kind`` or any), each
    with whether its target is a chunk's entry and archived, in file and line order (as the
    SQLite index's)."""
    rows = conn.execute(
        "SELECT r.source, r.kind, r.target, r.path, r.line, r.source_archived, "
        "(SELECT bool_and(c.archived) FROM chunks c WHERE c.entry_id = r.target) "
        "FROM relations r WHERE (%(id)s::text IS NULL OR r.source = %(id)s OR r.target = %(id)s) "
        "AND (%(kind)s::text IS NULL OR r.kind = %(kind)s) ORDER BY r.path, r.line, r.n",
        {"id": entry_id, "kind": kind},
    ).fetchall()
    return [
        Relation(source, k, target, path, line, bool(src_arch), found is not None, bool(found))
        for source, k, target, path, line, src_arch, found in rows
    ]
