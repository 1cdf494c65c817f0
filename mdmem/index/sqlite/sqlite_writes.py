"""Writing the SQLite index: chunks and their FTS5 rows, files, vectors, meta, all in
transactions a reader never sees half of."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Sequence

import numpy as np

from mdmem.index.chunks import Chunk, sha
from mdmem.index.fts import segment
from mdmem.memory.relations import Relation
from mdmem.memory.scan import FileStat


class transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error (never hiding it)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except sqlite3.Error:  # a full disk fails at COMMIT: leave no transaction open
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        """Never hides the error that caused it (a damaged file may refuse the rollback too)."""
        if self.conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")


def meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def delete_meta(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))


def generation(conn: sqlite3.Connection) -> int:
    return int(meta(conn, "generation") or 0)


def bump_generation(conn: sqlite3.Connection) -> None:
    """In the same transaction as the change: a reader's cached layout and vectors are keyed
    by the generation, so it must never see new rows under an old one."""
    set_meta(conn, "generation", str(generation(conn) + 1))


def known_stats(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    return {
        path: (size, mtime)
        for path, size, mtime in conn.execute("SELECT path, size, mtime_ns FROM files")
    }


def known_stats_of(conn: sqlite3.Connection, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """:func:`known_stats` of these files only."""
    found = {}
    for path in paths:
        row = conn.execute("SELECT size, mtime_ns FROM files WHERE path = ?", (path,)).fetchone()
        if row is not None:
            found[path] = (row[0], row[1])
    return found


def known_hashes(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT path, hash FROM files").fetchall())


def touch_file(conn: sqlite3.Connection, stat: FileStat) -> None:
    conn.execute(
        "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
        (stat.size, stat.mtime_ns, stat.path),
    )


def put_file(conn: sqlite3.Connection, stat: FileStat, digest: str, now: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO files(path, size, mtime_ns, hash, indexed_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (stat.path, stat.size, stat.mtime_ns, digest, now),
    )


def replace_chunks(conn: sqlite3.Connection, path: str, chunks: list[Chunk]) -> int:
    """Swap a file's chunks, keeping rows whose content did not change."""
    existing = {
        cid: rowid
        for rowid, cid in conn.execute("SELECT rowid, id FROM chunks WHERE path = ?", (path,))
    }
    wanted = {c.id for c in chunks}
    for cid, rowid in existing.items():
        if cid not in wanted:
            delete_row(conn, rowid)
    today = dt.date.today().isoformat()
    written = 0
    for chunk in chunks:
        if chunk.id in existing:
            continue
        insert_chunk(conn, path, chunk, today)
        written += 1
    return written


def insert_chunk(conn: sqlite3.Connection, path: str, chunk: Chunk, today: str) -> None:
    plain = sha(chunk.text)
    conn.execute("INSERT OR IGNORE INTO first_seen(text_hash, seen) VALUES (?, ?)", (plain, today))
    created = (
        chunk.created
        or conn.execute("SELECT seen FROM first_seen WHERE text_hash = ?", (plain,)).fetchone()[0]
    )
    cursor = conn.execute(
        "INSERT INTO chunks(id, path, start_line, end_line, heading, text, embed_text, "
        "text_hash, kind, type, importance, created, entry_id, agent, session, archived, "
        "context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            chunk.id,
            path,
            chunk.start_line,
            chunk.end_line,
            chunk.heading,
            chunk.text,
            chunk.embed_text,
            chunk.text_hash,
            chunk.kind,
            chunk.type,
            chunk.importance,
            created,
            chunk.entry_id,
            chunk.agent,
            chunk.session,
            int(chunk.archived),
            chunk.context,
        ),
    )
    put_fts(conn, int(cursor.lastrowid or 0), chunk.text, chunk.heading, chunk.context)


def put_fts(conn: sqlite3.Connection, rowid: int, text: str, heading: str, context: str) -> None:
    conn.execute(
        "INSERT INTO chunks_fts(rowid, text, heading, context) VALUES (?, ?, ?, ?)",
        (rowid, segment(text), segment(heading), segment(context)),
    )


def delete_row(conn: sqlite3.Connection, rowid: int) -> None:
    conn.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
    conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))


def delete_path(conn: sqlite3.Connection, path: str) -> None:
    conn.execute(
        "DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)",
        (path,),
    )
    conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
    conn.execute("DELETE FROM relations WHERE path = ?", (path,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))


def replace_relations(conn: sqlite3.Connection, path: str, found: Sequence[Relation]) -> None:
    """Swap the relations a file's entries declare (in the transaction of its chunks)."""
    conn.execute("DELETE FROM relations WHERE path = ?", (path,))
    conn.executemany(
        "INSERT INTO relations(source, kind, target, path, line, source_archived) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(r.source, r.kind, r.target, path, r.line, int(r.source_archived)) for r in found],
    )


def missing_vectors(conn: sqlite3.Connection, model_id: str) -> list[tuple[str, str]]:
    """(text hash, embedded text) of every chunk text with no vector of ``model_id``."""
    return conn.execute(
        "SELECT text_hash, min(embed_text) FROM chunks WHERE text_hash NOT IN "
        "(SELECT text_hash FROM embeddings WHERE model = ?) GROUP BY text_hash",
        (model_id,),
    ).fetchall()


def missing_vectors_of(
    conn: sqlite3.Connection, model_id: str, paths: Sequence[str]
) -> list[tuple[str, str]]:
    """:func:`missing_vectors` among the chunks of ``paths`` only."""
    found: dict[str, str] = {}
    for start in range(0, len(paths), 500):
        part = list(paths[start : start + 500])
        marks = ",".join("?" * len(part))
        for text_hash, text in conn.execute(
            f"SELECT text_hash, min(embed_text) FROM chunks WHERE path IN ({marks}) AND "
            "text_hash NOT IN (SELECT text_hash FROM embeddings WHERE model = ?) "
            "GROUP BY text_hash",
            (*part, model_id),
        ):
            found.setdefault(text_hash, text)
    return list(found.items())


def put_vectors(
    conn: sqlite3.Connection, model_id: str, hashes: Sequence[str], vectors: np.ndarray
) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO embeddings(model, text_hash, dim, vector) VALUES (?, ?, ?, ?)",
        [
            (model_id, h, int(v.shape[0]), v.astype(np.float32).tobytes())
            for h, v in zip(hashes, vectors, strict=True)
        ],
    )


def entry_rows(conn: sqlite3.Connection, entry_ids: Sequence[str]) -> list[tuple[int, str, str]]:
    """(rowid, text, text_hash) of the chunks of these entries."""
    marks = ",".join("?" * len(entry_ids))
    return conn.execute(
        f"SELECT rowid, text, text_hash FROM chunks WHERE entry_id IN ({marks})",
        list(entry_ids),
    ).fetchall()


def forget_keys(
    conn: sqlite3.Connection, access_keys: Sequence[str], text_hashes: Sequence[str]
) -> None:
    """Drop the access counts and first-seen dates of forgotten text."""
    for key in access_keys:
        conn.execute("DELETE FROM access WHERE key = ?", (key,))
    for text_hash in text_hashes:
        conn.execute("DELETE FROM first_seen WHERE text_hash = ?", (text_hash,))
