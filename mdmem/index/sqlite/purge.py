"""Deleted text gone for good: no copy left in free pages, FTS5 segments, the WAL or the cache.

SQLite normally leaves deleted rows in free pages and the WAL, and FTS5 keeps deleted terms in
old segments until they are merged. The index connection runs with ``secure_delete`` (freed
content is zeroed); after a rebuild that masked secrets, or after ``forget``, these functions
merge the FTS5 segments, drop cached vectors no chunk uses, rewrite the file (VACUUM) where
pages freed before ``secure_delete`` may remain, and truncate the WAL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable

from mdmem.index.sqlite.sqlite_writes import put_fts

CHECKPOINT_ATTEMPTS = 40
CHECKPOINT_PAUSE_S = 0.05


def scrub(conn: sqlite3.Connection, *, vacuum: bool = False) -> bool:
    """Leave no deleted text in the database file or its WAL. ``vacuum`` also rewrites the
    file (for pages freed before ``secure_delete`` was on). False when a reader in another
    process kept the WAL from being truncated (it is truncated at the next checkpoint)."""
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
    if vacuum:
        conn.execute("PRAGMA temp_store=MEMORY")  # VACUUM's copy stays out of /tmp
        # it may renumber the vectors' row ids the change log names: readers reload whole
        conn.execute("INSERT INTO changes(path, embedding) VALUES (NULL, NULL)")
        conn.execute("VACUUM")
    return truncate_wal(conn)


def truncate_wal(conn: sqlite3.Connection, attempts: int = CHECKPOINT_ATTEMPTS) -> bool:
    """Checkpoint everything into the database file and truncate the WAL to zero bytes (False
    when a reader in another process still uses it after ``attempts`` tries)."""
    for attempt in range(attempts):
        if attempt:
            time.sleep(CHECKPOINT_PAUSE_S)
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return True
    return False


def drop_unused_vectors(conn: sqlite3.Connection, hashes: Iterable[str] | None = None) -> int:
    """Delete cached vectors no chunk uses (of ``hashes`` only, when given)."""
    if hashes is None:
        cursor = conn.execute(
            "DELETE FROM embeddings WHERE text_hash NOT IN (SELECT text_hash FROM chunks)"
        )
        return cursor.rowcount
    dropped = 0
    for text_hash in set(hashes):
        cursor = conn.execute(
            "DELETE FROM embeddings WHERE text_hash = ? AND NOT EXISTS "
            "(SELECT 1 FROM chunks WHERE text_hash = ?)",
            (text_hash, text_hash),
        )
        dropped += cursor.rowcount
    return dropped


def mask_rows(
    conn: sqlite3.Connection,
    paths: Iterable[str],
    mask: Callable[[str], str],
    text_hash: Callable[[str], str],
) -> int:
    """Mask secrets in place in the chunks of ``paths`` (files that could not be re-read
    during a rebuild keep their chunks: those must not keep their secrets). Returns the rows
    changed."""
    changed = 0
    for path in paths:
        rows = conn.execute(
            "SELECT rowid, text, heading, embed_text, context FROM chunks WHERE path = ?", (path,)
        ).fetchall()
        for rowid, *old in rows:
            new = [mask(part) for part in old]
            if new == old:
                continue
            text, heading, embed_text, context = new
            conn.execute(
                "UPDATE chunks SET text = ?, heading = ?, embed_text = ?, text_hash = ?, "
                "context = ? WHERE rowid = ?",
                (text, heading, embed_text, text_hash(embed_text), context, rowid),
            )
            conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
            put_fts(conn, rowid, text, heading, context)
            changed += 1
    return changed
