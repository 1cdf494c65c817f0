"""The index database (``.mdmem/index.db``): schema, migrations, and recovery.

Derived and disposable: a missing, corrupt or foreign file is rebuilt (with a message), never a
traceback. WAL mode lets any number of readers search while one writer syncs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import sqlite_utils

from mdmem.discovery import private_file

SCHEMA_VERSION = 2
APP_ID = 0x6D646D6D  # "mdmm": tells our index apart from any other SQLite file
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
BM25_RANK = "bm25(1.0, 0.3)"
"""BM25 with the heading column weighted 0.3 of the text column."""


def _v1(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["files"].create(
        {"path": str, "size": int, "mtime_ns": int, "hash": str, "indexed_at": str},
        pk="path",
    )
    db["chunks"].create(
        {
            "rowid": int,
            "id": str,
            "path": str,
            "start_line": int,
            "end_line": int,
            "heading": str,
            "text": str,
            "embed_text": str,
            "text_hash": str,
            "kind": str,
            "type": str,
            "importance": float,
            "created": str,
            "entry_id": str,
            "agent": str,
            "session": str,
            "archived": int,
        },
        pk="rowid",
    )
    db["chunks"].create_index(["path"])
    db["chunks"].create_index(["text_hash"])
    db.execute(
        f"CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, tokenize='{FTS_TOKENIZER}')"
    )
    db["embeddings"].create(
        {"model": str, "text_hash": str, "dim": int, "vector": bytes},
        pk=("model", "text_hash"),
    )
    db["access"].create({"key": str, "count": int, "last_access": str}, pk="key")
    db["first_seen"].create({"text_hash": str, "seen": str}, pk="text_hash")


def _v2(db: sqlite_utils.Database) -> None:
    # FTS5 sorts by its configured `rank` faster than by an explicit bm25() call
    db.execute(f"INSERT INTO chunks_fts(chunks_fts, rank) VALUES('rank', '{BM25_RANK}')")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2]
"""Plain functions; MIGRATIONS[n] takes the schema from version n to n + 1."""


def connect(path: Path, on_message: Callable[[str], None] | None = None) -> sqlite3.Connection:
    """Open (creating, migrating or rebuilding as needed) the index at ``path``."""
    try:
        return _open(path)
    except sqlite3.DatabaseError as exc:
        reason = str(exc)
    except ForeignIndexError as exc:
        reason = str(exc)
    if on_message:
        on_message(f"{path}: index unusable ({reason}); rebuilding it from the files")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()
    return _open(path)


class ForeignIndexError(Exception):
    pass


def _open(path: Path) -> sqlite3.Connection:
    _owner_only(path)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    try:
        # deleted rows are zeroed, not left in free pages (the index holds every word)
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id != APP_ID and tables:
            raise ForeignIndexError("not an mdmem index")
        if version > SCHEMA_VERSION:
            raise ForeignIndexError(f"made by a newer mdmem (schema {version})")
        if version < SCHEMA_VERSION:
            _migrate(conn, version)
        conn.execute("SELECT count(*) FROM chunks").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _owner_only(path: Path) -> None:
    """The index holds every word of the workspace: 0600 in a 0700 ``.mdmem/``, made before
    SQLite opens it (SQLite gives the -wal and -shm files the database file's mode)."""
    private_file(path)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(OSError):
            side = Path(str(path) + suffix)
            if side.stat().st_mode & 0o077:
                side.chmod(0o600)


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        # re-read under the write lock: another process may have migrated meanwhile
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        db = sqlite_utils.Database(conn)
        for step in MIGRATIONS[version:SCHEMA_VERSION]:
            step(db)
        conn.execute(f"PRAGMA application_id={APP_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
