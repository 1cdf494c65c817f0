"""Writing the PostgreSQL index: chunks with their terms, the document frequencies and counts
BM25 needs, files, vectors and meta. The caller wraps each batch in one transaction, so a
reader never sees half of it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from mdmem.index.chunks import Chunk, sha
from mdmem.index.postgres.terms import chunk_terms
from mdmem.memory.relations import Relation
from mdmem.memory.scan import FileStat

Conn = psycopg.Connection[Any]
CHUNK_COLUMNS = (
    "rowid, id, path, start_line, end_line, heading, text, embed_text, text_hash, kind, type, "
    "importance, created, entry_id, agent, session, archived, context, terms, length"
)


def meta(conn: Conn, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return str(row[0]) if row else None


def set_meta(conn: Conn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def generation(conn: Conn) -> int:
    return int(meta(conn, "generation") or 0)


def bump_generation(conn: Conn) -> None:
    """In the transaction of the change: readers key their caches by it."""
    set_meta(conn, "generation", str(generation(conn) + 1))


def known_stats(conn: Conn) -> dict[str, tuple[int, int]]:
    return {
        str(path): (int(size), int(mtime))
        for path, size, mtime in conn.execute("SELECT path, size, mtime_ns FROM files")
    }


def known_stats_of(conn: Conn, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """:func:`known_stats` of these files only."""
    rows = conn.execute(
        "SELECT path, size, mtime_ns FROM files WHERE path = ANY(%s)", (list(paths),)
    )
    return {str(path): (int(size), int(mtime)) for path, size, mtime in rows}


def known_hashes(conn: Conn) -> dict[str, str]:
    return {str(p): str(h) for p, h in conn.execute("SELECT path, hash FROM files")}


def touch_files(conn: Conn, stats: Sequence[FileStat]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE files SET size = %s, mtime_ns = %s WHERE path = %s",
            [(s.size, s.mtime_ns, s.path) for s in stats],
        )


def put_files(conn: Conn, files: Sequence[tuple[FileStat, str]], now: str) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO files(path, size, mtime_ns, hash, indexed_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (path) DO UPDATE SET size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, hash = excluded.hash, indexed_at = excluded.indexed_at",
            [(s.path, s.size, s.mtime_ns, digest, now) for s, digest in files],
        )


def replace_chunks(conn: Conn, files: Sequence[tuple[str, list[Chunk]]]) -> int:
    """Swap the chunks of these files, keeping rows whose content did not change. Returns the
    chunks written."""
    paths = [path for path, _ in files]
    existing: dict[tuple[str, str], int] = {
        (str(path), str(cid)): int(rowid)
        for rowid, path, cid in conn.execute(
            "SELECT rowid, path, id FROM chunks WHERE path = ANY(%s)", (paths,)
        )
    }
    wanted = {(path, c.id) for path, chunks in files for c in chunks}
    delete_rows(conn, [rowid for key, rowid in existing.items() if key not in wanted])
    new = [(path, c) for path, chunks in files for c in chunks if (path, c.id) not in existing]
    insert_chunks(conn, new)
    return len(new)


def insert_chunks(conn: Conn, chunks: Sequence[tuple[str, Chunk]]) -> None:
    """Insert chunks (with their first-seen dates, terms, postings and BM25 counts) by COPY."""
    if not chunks:
        return
    seen = first_seen(conn, [sha(c.text) for _, c in chunks], dt.date.today().isoformat())
    terms = chunk_terms([(c.text, c.heading, c.context) for _, c in chunks])
    rowids = new_rowids(conn, len(chunks))
    rows = [
        (
            rowid,
            c.id,
            path,
            c.start_line,
            c.end_line,
            c.heading,
            c.text,
            c.embed_text,
            c.text_hash,
            c.kind,
            c.type,
            c.importance,
            c.created or seen[sha(c.text)],
            c.entry_id,
            c.agent,
            c.session,
            c.archived,
            c.context,
            t.tsvector,
            t.length,
        )
        for rowid, (path, c), t in zip(rowids, chunks, terms, strict=True)
    ]
    copy_rows(conn, f"COPY chunks ({CHUNK_COLUMNS}) FROM STDIN", rows)
    copy_lines(
        conn,
        "COPY postings (term, rowid, f, length, places) FROM STDIN",
        (
            f"{term.translate(ESCAPES)}\t{rowid}\t{f!r}\t{t.length}\t"
            f"{{{','.join(map(str, t.places[term]))}}}"
            for rowid, t in zip(rowids, terms, strict=True)
            for term, f in t.frequencies.items()
        ),
    )
    count_terms(conn, (t.lexemes for t in terms), sum(t.length for t in terms), len(terms), +1)


def new_rowids(conn: Conn, n: int) -> list[int]:
    """``n`` row ids from the chunks' identity sequence (COPY returns none, and the postings
    of a chunk name its row)."""
    rows = conn.execute(
        "SELECT nextval(pg_get_serial_sequence('chunks', 'rowid')) FROM generate_series(1, %s)",
        (n,),
    ).fetchall()
    return [int(r[0]) for r in rows]


ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
"""Characters COPY's text format escapes."""
COPY_BLOCK = 4000
"""Lines sent to the server in one write."""


def copy_rows(conn: Conn, statement: str, rows: Iterable[Sequence[Any]]) -> None:
    """COPY in text format, each row formatted here: psycopg's per-value dumping (``write_row``)
    was most of the time of a bulk load."""
    copy_lines(conn, statement, ("\t".join(map(copy_field, row)) for row in rows))


def copy_lines(conn: Conn, statement: str, lines: Iterable[str]) -> None:
    """COPY ready lines of COPY's text format (without their newline), in blocks."""
    with conn.cursor() as cur, cur.copy(statement) as copy:  # type: ignore[arg-type]
        block: list[str] = []
        for line in lines:
            block.append(line)
            if len(block) == COPY_BLOCK:
                copy.write("\n".join(block) + "\n")
                block.clear()
        if block:
            copy.write("\n".join(block) + "\n")


def copy_field(value: object) -> str:
    """A value in COPY's text format: NULL, a boolean, text (escaped), a number, or a list of
    numbers (an array)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, str):
        return value.translate(ESCAPES)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "{" + ",".join(map(str, value)) + "}"
    return str(value)


def first_seen(conn: Conn, hashes: Sequence[str], today: str) -> dict[str, str]:
    """The date each text was first indexed (today for new ones)."""
    unique = sorted(set(hashes))
    conn.execute(
        "INSERT INTO first_seen(text_hash, seen) SELECT h, %s FROM unnest(%s::text[]) h "
        "ON CONFLICT (text_hash) DO NOTHING",
        (today, unique),
    )
    return {
        str(h): str(s)
        for h, s in conn.execute(
            "SELECT text_hash, seen FROM first_seen WHERE text_hash = ANY(%s)", (unique,)
        )
    }


def count_terms(
    conn: Conn, lexemes: Iterable[frozenset[str] | list[str]], tokens: int, docs: int, sign: int
) -> None:
    """Add (sign +1) or remove (-1) documents from the counts BM25 reads: each term's document
    frequency, the number of documents and their total length."""
    df: Counter[str] = Counter()
    for terms in lexemes:
        df.update(terms)
    if df:
        terms_sorted = sorted(df)
        conn.execute(
            "INSERT INTO df(term, n) SELECT * FROM unnest(%s::text[], %s::int[]) "
            "ON CONFLICT (term) DO UPDATE SET n = df.n + excluded.n",
            (terms_sorted, [sign * df[t] for t in terms_sorted]),
        )
        if sign < 0:
            conn.execute("DELETE FROM df WHERE term = ANY(%s) AND n <= 0", (terms_sorted,))
    if docs:
        n_docs, n_tokens = stats(conn)
        set_meta(conn, "bm25_docs", str(n_docs + sign * docs))
        set_meta(conn, "bm25_tokens", str(n_tokens + sign * tokens))


def stats(conn: Conn) -> tuple[int, int]:
    """(documents, tokens in all of them): BM25's N and average length."""
    return int(meta(conn, "bm25_docs") or 0), int(meta(conn, "bm25_tokens") or 0)


def delete_rows(conn: Conn, rowids: Sequence[int]) -> None:
    if not rowids:
        return
    _delete(conn, "DELETE FROM chunks WHERE rowid = ANY(%s)", list(rowids))


def delete_paths(conn: Conn, paths: Sequence[str]) -> None:
    _delete(conn, "DELETE FROM chunks WHERE path = ANY(%s)", list(paths))
    conn.execute("DELETE FROM relations WHERE path = ANY(%s)", (list(paths),))
    conn.execute("DELETE FROM files WHERE path = ANY(%s)", (list(paths),))


def replace_relations(conn: Conn, files: Sequence[tuple[str, Sequence[Relation]]]) -> None:
    """Swap the relations these files' entries declare (in the transaction of their chunks)."""
    if not files:
        return
    conn.execute("DELETE FROM relations WHERE path = ANY(%s)", ([path for path, _ in files],))
    copy_rows(
        conn,
        "COPY relations (source, kind, target, path, line, source_archived) FROM STDIN",
        (
            (r.source, r.kind, r.target, path, r.line, r.source_archived)
            for path, found in files
            for r in found
        ),
    )


def _delete(conn: Conn, statement: str, keys: list[Any]) -> None:
    gone = conn.execute(
        statement + " RETURNING rowid, length, tsvector_to_array(terms)",  # type: ignore[operator]
        (keys,),
    ).fetchall()
    if gone:
        conn.execute("DELETE FROM postings WHERE rowid = ANY(%s)", ([r[0] for r in gone],))
        count_terms(conn, (r[2] for r in gone), sum(r[1] for r in gone), len(gone), -1)


def missing_vectors(conn: Conn, table: str | None) -> list[tuple[str, str]]:
    """(text hash, embedded text) of every chunk text without a vector in ``table``."""
    if table is None:
        rows = conn.execute("SELECT text_hash, min(embed_text) FROM chunks GROUP BY text_hash")
    else:
        rows = conn.execute(
            "SELECT c.text_hash, min(c.embed_text) FROM chunks c WHERE NOT EXISTS "
            f"(SELECT 1 FROM {table} v WHERE v.text_hash = c.text_hash) GROUP BY c.text_hash"
        )
    return [(str(h), str(t)) for h, t in rows.fetchall()]


def put_vectors(conn: Conn, table: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table}(text_hash, embedding) VALUES (%s, %s) "
            "ON CONFLICT (text_hash) DO UPDATE SET embedding = excluded.embedding",
            [(h, v.astype(np.float32)) for h, v in zip(hashes, vectors, strict=True)],
        )


def entry_rows(conn: Conn, entry_ids: Sequence[str]) -> list[tuple[int, str, str]]:
    """(rowid, text, text_hash) of the chunks of these entries."""
    return [
        (int(r), str(t), str(h))
        for r, t, h in conn.execute(
            "SELECT rowid, text, text_hash FROM chunks WHERE entry_id = ANY(%s)", (list(entry_ids),)
        )
    ]


def drop_unused_vectors(conn: Conn, tables: Sequence[str], hashes: Sequence[str]) -> int:
    """Delete the cached vectors of these texts that no chunk uses any more."""
    dropped = 0
    for table in tables:
        cursor = conn.execute(
            f"DELETE FROM {table} v WHERE v.text_hash = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM chunks c WHERE c.text_hash = v.text_hash)",
            (list(hashes),),
        )
        dropped += cursor.rowcount
    return dropped


def forget_keys(conn: Conn, access_keys: Sequence[str], text_hashes: Sequence[str]) -> None:
    conn.execute("DELETE FROM access WHERE key = ANY(%s)", (list(access_keys),))
    conn.execute("DELETE FROM first_seen WHERE text_hash = ANY(%s)", (list(text_hashes),))
