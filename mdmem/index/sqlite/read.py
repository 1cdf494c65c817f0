"""Reading the SQLite index for a search: the layout, candidates, rows and counters."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Collection, Iterator, Sequence

import numpy as np

from mdmem.index.backend import ChunkLayout, ChunkRow
from mdmem.index.filters import Filters, where_clause
from mdmem.memory.relations import Relation

ROWS_PER_QUERY = 500
"""Bound parameters per ``IN (...)`` (SQLite's limit is 999 on old builds)."""
CHUNK_COLUMNS = (
    "rowid, id, path, start_line, end_line, heading, text, kind, type, importance, created, "
    "entry_id, agent, session"
)


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One view of the index for the whole ranking. In WAL mode a read transaction sees the
    database as it was when it began, whatever the watcher commits meanwhile, so the layout,
    the vectors and the rows always agree."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


LAYOUT_COLUMNS = "rowid, path, session IS NOT NULL AND path LIKE '.sessions/%', archived, text_hash"
LAYOUT_ORDER = "ORDER BY path, start_line, end_line, rowid"
ChunkLayoutRow = tuple[int, str, bool, bool, str]
"""(rowid, path, is_stream, archived, text_hash) of one chunk."""


def layout_and_texts(conn: sqlite3.Connection) -> tuple[ChunkLayout, list[str]]:
    """The layout, and the ``text_hash`` of each of its positions (what vectors are keyed by)."""
    rows = conn.execute(f"SELECT {LAYOUT_COLUMNS} FROM chunks {LAYOUT_ORDER}").fetchall()
    return ChunkLayout.build(rows), [r[4] for r in rows]


def layout_rows_of(
    conn: sqlite3.Connection, paths: Sequence[str]
) -> dict[str, list[ChunkLayoutRow]]:
    """The layout rows of these files' chunks, in layout order (files with none are absent)."""
    found: dict[str, list[ChunkLayoutRow]] = {}
    for start in range(0, len(paths), ROWS_PER_QUERY):
        part = list(paths[start : start + ROWS_PER_QUERY])
        marks = ",".join("?" * len(part))
        for row in conn.execute(
            f"SELECT {LAYOUT_COLUMNS} FROM chunks WHERE path IN ({marks}) {LAYOUT_ORDER}", part
        ):
            found.setdefault(row[1], []).append(row)
    return found


def last_change(conn: sqlite3.Connection) -> int:
    """The newest entry of the change log (see ``db._v4``), 0 when there is none."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])


def changes_since(conn: sqlite3.Connection, seq: int) -> tuple[int, list[str], list[int]] | None:
    """(newest entry, paths whose chunks changed, row ids of vectors stored) since entry
    ``seq`` of the change log; None when the log no longer reaches back that far or says
    that everything may have changed."""
    rows = conn.execute(
        "SELECT seq, path, embedding FROM changes WHERE seq > ? ORDER BY seq", (seq,)
    ).fetchall()
    if not rows:
        return seq, [], []
    if (
        rows[0][0] != seq + 1
        and conn.execute("SELECT 1 FROM changes WHERE seq <= ? LIMIT 1", (seq,)).fetchone() is None
    ):
        return None  # pruned past what this reader saw
    paths = [r[1] for r in rows if r[1] is not None]
    vectors = [r[2] for r in rows if r[2] is not None]
    if any(r[1] is None and r[2] is None for r in rows):
        return None
    return rows[-1][0], sorted(set(paths)), vectors


def vectors_at(
    conn: sqlite3.Connection, model_id: str, rowids: Sequence[int]
) -> list[tuple[str, bytes]]:
    """(text_hash, vector bytes) of the stored vectors of ``model_id`` with these row ids."""
    found: list[tuple[str, bytes]] = []
    for start in range(0, len(rowids), ROWS_PER_QUERY):
        part = list(rowids[start : start + ROWS_PER_QUERY])
        found.extend(
            conn.execute(
                "SELECT text_hash, vector FROM embeddings WHERE model = ? AND rowid IN "
                f"({', '.join('?' * len(part))})",
                (model_id, *part),
            ).fetchall()
        )
    return found


def vectors_of(
    conn: sqlite3.Connection, model_id: str, hashes: Sequence[str]
) -> list[tuple[str, bytes]]:
    """(text_hash, vector bytes) of those of ``hashes`` that ``model_id`` has embedded."""
    found: list[tuple[str, bytes]] = []
    for start in range(0, len(hashes), ROWS_PER_QUERY):
        part = hashes[start : start + ROWS_PER_QUERY]
        found.extend(
            conn.execute(
                "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN "
                f"({', '.join('?' * len(part))})",
                (model_id, *part),
            ).fetchall()
        )
    return found


def vectors_stored(
    conn: sqlite3.Connection, model_id: str, stored: Sequence[int], missing: Collection[str]
) -> list[tuple[str, bytes]]:
    """(text_hash, vector bytes) to fill ``missing`` texts from, among the vectors stored since
    (``stored``: their row ids, any model): read by row id, or by text when fewer are missing."""
    if not stored or not missing:
        return []
    if len(stored) <= len(missing):
        return vectors_at(conn, model_id, stored)
    return vectors_of(conn, model_id, sorted(missing))


def all_vectors(conn: sqlite3.Connection, model_id: str) -> list[tuple[str, bytes]]:
    return conn.execute(
        "SELECT text_hash, vector FROM embeddings WHERE model = ?", (model_id,)
    ).fetchall()


def vectors(conn: sqlite3.Connection, layout: ChunkLayout, model_id: str) -> np.ndarray:
    """All chunk vectors of ``model_id`` in layout order (zeros where a chunk has none), read
    at once: what the in-memory cache (``scale/vector_cache.py``) must always equal."""
    rows = conn.execute(
        "SELECT c.rowid, e.vector FROM chunks c JOIN embeddings e "
        "ON e.model = ? AND e.text_hash = c.text_hash",
        (model_id,),
    ).fetchall()
    if not rows:
        return np.zeros((len(layout.rowids), 1), dtype=np.float32)
    found = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    matrix = np.zeros((len(layout.rowids), found.shape[1]), dtype=np.float32)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix[layout.positions(ids)] = found
    return matrix


def filtered(conn: sqlite3.Connection, layout: ChunkLayout, filters: Filters) -> np.ndarray:
    where, args = where_clause(filters, "?")
    rows = conn.execute(f"SELECT c.rowid FROM chunks c WHERE {where}", args)
    return layout.mask(np.fromiter((r[0] for r in rows), dtype=np.int64))


def chunk_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, ChunkRow]:
    out: dict[int, ChunkRow] = {}
    for start in range(0, len(rowids), ROWS_PER_QUERY):
        part = list(rowids[start : start + ROWS_PER_QUERY])
        marks = ",".join("?" * len(part))
        for row in conn.execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE rowid IN ({marks})", part
        ):
            out[row[0]] = ChunkRow(*row)
    return out


def access_counts(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(keys), ROWS_PER_QUERY):
        part = list(keys[start : start + ROWS_PER_QUERY])
        marks = ",".join("?" * len(part))
        for key, count in conn.execute(
            f"SELECT key, count FROM access WHERE key IN ({marks})", part
        ):
            found[key] = count
    return found


def bump_access(conn: sqlite3.Connection, keys: Sequence[str], wait_s: float | None = None) -> bool:
    """Best effort: a busy or read-only index keeps its counts (False). ``wait_s``: wait at
    most that long for another writer (a read must not wait on a sync), else the connection's
    busy timeout."""
    now = dt.datetime.now().isoformat(timespec="seconds")
    if wait_s is not None:
        conn.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO access(key, count, last_access) VALUES (?, 1, ?) ON CONFLICT(key) "
            "DO UPDATE SET count = count + 1, last_access = excluded.last_access",
            [(key, now) for key in dict.fromkeys(keys)],
        )
        conn.execute("COMMIT")
        return True
    except Exception:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False
    finally:
        if wait_s is not None:
            conn.execute("PRAGMA busy_timeout=30000")


def counts(conn: sqlite3.Connection, model_id: str | None) -> tuple[int, int, int]:
    """(files, chunks, chunks with a vector of ``model_id``)."""
    files = conn.execute("SELECT count(*) FROM files").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    embedded = 0
    if model_id:
        embedded = conn.execute(
            "SELECT count(*) FROM chunks c WHERE EXISTS (SELECT 1 FROM embeddings e "
            "WHERE e.model = ? AND e.text_hash = c.text_hash)",
            (model_id,),
        ).fetchone()[0]
    return files, chunks, embedded


def relations(conn: sqlite3.Connection, entry_id: str | None, kind: str | None) -> list[Relation]:
    """Rows of the relations table (all, or from or to ``entry_id``; of ``kind`` or any), each
    with whether its target is a chunk's entry and archived, in file and line order."""
    rows = conn.execute(
        "SELECT r.source, r.kind, r.target, r.path, r.line, r.source_archived, "
        "(SELECT min(c.archived) FROM chunks c WHERE c.entry_id = r.target) "
        "FROM relations r WHERE (?1 IS NULL OR r.source = ?1 OR r.target = ?1) "
        "AND (?2 IS NULL OR r.kind = ?2) ORDER BY r.path, r.line, r.rowid",
        (entry_id, kind),
    ).fetchall()
    return [
        Relation(source, k, target, path, line, bool(src_arch), found is not None, bool(found))
        for source, k, target, path, line, src_arch, found in rows
    ]
