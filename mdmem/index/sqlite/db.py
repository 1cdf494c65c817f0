"""The index database (``.mdmem/index.db``): schema, migrations, and recovery.

Derived and disposable: a missing, corrupt or foreign file is rebuilt (with a message), never a
traceback. WAL mode lets any number of readers search while one writer syncs.

Tables and indexes are made with sqlite-utils' API; SQL is written out only for what it cannot
express: the FTS5 table (``enable_fts`` makes only external-content tables over another table,
and this one keeps its own content, which keyword search reads back, with its own rank setting)
and the change log (an ``AUTOINCREMENT`` key and the triggers that fill it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mdmem.errors import MdmemError
from mdmem.index.backend_base import ACCESS_SINCE
from mdmem.layout import private_file

if TYPE_CHECKING:  # imported where an index is made or migrated: it costs an open ~0.1 s
    import sqlite_utils

SCHEMA_VERSION = 5
APP_ID = 0x6D646D6D  # "mdmm": tells our index apart from any other SQLite file
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
BM25_WEIGHTS = (1.0, 0.3, 0.6)
"""BM25 weights of the keyword columns (text, heading, file context): the heading counts 0.3
of the text, the file's context (title, date in words, participants, tags) 0.6. Chosen on
LoCoMo conversations 0-4 (``benchmarks/locomo.py --sweep fts``: 0.6 and 1.0 tie at rec@2000
0.900 over the three renderings, 0.3 gives 0.899, none 0.892)."""


def bm25_rank(weights: tuple[float, ...] = BM25_WEIGHTS) -> str:
    return f"bm25({', '.join(str(float(w)) for w in weights)})"


def set_rank(conn: sqlite3.Connection, weights: tuple[float, ...] = BM25_WEIGHTS) -> None:
    """FTS5 sorts by its configured ``rank`` faster than by an explicit bm25() call."""
    conn.execute(f"INSERT INTO chunks_fts(chunks_fts, rank) VALUES('rank', '{bm25_rank(weights)}')")


def _v1(db: sqlite_utils.Database) -> None:
    db.table("meta").create({"key": str, "value": str}, pk="key")
    db.table("files").create(
        {"path": str, "size": int, "mtime_ns": int, "hash": str, "indexed_at": str},
        pk="path",
    )
    db.table("chunks").create(
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
    db.table("chunks").create_index(["path"])
    db.table("chunks").create_index(["text_hash"])
    db.execute(
        f"CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, tokenize='{FTS_TOKENIZER}')"
    )
    db.table("embeddings").create(
        {"model": str, "text_hash": str, "dim": int, "vector": bytes},
        pk=("model", "text_hash"),
    )
    db.table("access").create({"key": str, "count": int, "last_access": str}, pk="key")
    db.table("first_seen").create({"text_hash": str, "seen": str}, pk="text_hash")


def _v2(db: sqlite_utils.Database) -> None:
    # (the weights of version 2; version 3 sets its own)
    db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('rank', 'bm25(1.0, 0.3)')")


def _v3(db: sqlite_utils.Database) -> None:
    """The file's context in a keyword column of its own. FTS5 tables cannot gain a column:
    the keyword table is made anew from the chunks. (The chunker version that came with it
    re-chunks every file at the next sync, which fills in the context; vectors whose
    embedded text did not change are kept.)"""
    from mdmem.index.sqlite.sqlite_writes import put_fts

    if "context" not in db["chunks"].columns_dict:
        db.table("chunks").add_column("context", str, not_null_default="")
    db.execute("DROP TABLE chunks_fts")
    db.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, context, "
        f"tokenize='{FTS_TOKENIZER}')"
    )
    set_rank(db.conn)
    for rowid, text, heading, context in db.execute(
        "SELECT rowid, text, heading, context FROM chunks"
    ).fetchall():
        put_fts(db.conn, rowid, text, heading, context)


CHANGES_KEPT = 65_536
"""Rows of the change log kept; a reader further behind than that reloads the layout whole."""


def _v4(db: sqlite_utils.Database) -> None:
    """The change log: which files' chunks changed and which vectors were stored, in commit
    order, so a reader splices only those into its in-memory layout
    (``scale/chunk_layout_cache.py``).
    Written by triggers, so no writer (whatever its code path) can change a chunk unlogged.
    A row with neither column set says "everything may have changed" (a VACUUM renumbers
    the vectors' row ids)."""
    log_old = "INSERT INTO changes(path) VALUES (old.path);"
    log_new = "INSERT INTO changes(path) VALUES (new.path);"
    trigger = "CREATE TRIGGER IF NOT EXISTS"
    for statement in (
        "CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "path TEXT, embedding INTEGER)",
        f"{trigger} chunks_logged_insert AFTER INSERT ON chunks BEGIN {log_new} END",
        f"{trigger} chunks_logged_delete AFTER DELETE ON chunks BEGIN {log_old} END",
        f"{trigger} chunks_logged_update AFTER UPDATE ON chunks BEGIN {log_old} {log_new} END",
        f"{trigger} embeddings_logged AFTER INSERT ON embeddings BEGIN "
        "INSERT INTO changes(embedding) VALUES (new.rowid); END",
        f"{trigger} changes_pruned AFTER INSERT ON changes WHEN new.seq % 1024 = 0 BEGIN "
        f"DELETE FROM changes WHERE seq <= new.seq - {CHANGES_KEPT}; END",
    ):
        db.execute(statement)


def _v5(db: sqlite_utils.Database) -> None:
    """The relations the entries declare in their metadata (``refines=m-…``), one row each,
    so ``related`` and the contradiction lookup need not parse every file. The files stay the
    truth: forgetting the chunker version makes the next sync read every file once (as a
    chunker change does; unchanged chunks and vectors are kept), which fills the table."""
    columns = {"source": str, "kind": str, "target": str, "path": str, "line": int}
    columns["source_archived"] = int
    relations = db.table("relations")
    relations.create(columns, not_null=set(columns), if_not_exists=True)
    for column in ("source", "target", "path"):
        relations.create_index([column], index_name=f"relations_{column}", if_not_exists=True)
    db.table("chunks").create_index(  # the relations' targets
        ["entry_id"], index_name="chunks_entry_id", if_not_exists=True
    )
    db.execute("DELETE FROM meta WHERE key = 'chunker_version'")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2, _v3, _v4, _v5]
"""Plain functions; MIGRATIONS[n] takes the schema from version n to n + 1."""


def start_access_history(conn: sqlite3.Connection) -> None:
    """Record when the index began counting accesses, unless it already says (idempotent)."""
    conn.execute(
        "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
        (ACCESS_SINCE, dt.datetime.now().isoformat(timespec="seconds")),
    )


def connect(path: Path, on_message: Callable[[str], None] | None = None) -> sqlite3.Connection:
    """Open (creating, migrating or rebuilding as needed) the index at ``path``."""
    check_openable(path)
    try:
        return _open(path)
    except sqlite3.DatabaseError as exc:
        if not damaged(exc):
            return open_unwritable(path, exc)
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


class IndexUnavailableError(MdmemError):
    """The index file cannot be opened at all (a folder in its place, an unreadable folder)."""


DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_READONLY_DBMOVED")
"""SQLite error codes (and their extended forms) that say the file under a connection is
broken or gone: reopening or rebuilding helps. Busy, locked, read-only, full or an I/O error
(a full disk can give one) do not count: rebuilding would not help, and would lose the index."""
UNWRITABLE_CODES = (
    "SQLITE_READONLY",
    "SQLITE_FULL",
    "SQLITE_CANTOPEN",  # a WAL index on a read-only mount, without its -shm file
    "SQLITE_IOERR_SHMSIZE",  # a full disk has no room for the -shm file
    "SQLITE_IOERR_SHMOPEN",
    "SQLITE_IOERR_WRITE",
)
UNWRITABLE_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM})


def damaged(exc: BaseException) -> bool:
    """True when ``exc`` says the index file is damaged, replaced or deleted under us."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(DAMAGE_CODES):
        return True
    message = str(exc)
    return (
        "malformed" in message
        or "not a database" in message
        or message.startswith("no such table")  # another file (an empty one) in its place
    )


def unwritable(exc: BaseException) -> bool:
    """True when ``exc`` says the index cannot be written now (read-only mount, full disk)."""
    if isinstance(exc, sqlite3.DatabaseError):
        name = getattr(exc, "sqlite_errorname", "") or ""
        return name.startswith(UNWRITABLE_CODES) and not damaged(exc)
    return isinstance(exc, OSError) and exc.errno in UNWRITABLE_ERRNOS


def check_openable(path: Path) -> None:
    """A clear error for what SQLite would only call "unable to open database file"."""
    if path.is_dir():
        raise IndexUnavailableError(
            f"{path} is a folder, not an index file; move it away and mdmem rebuilds the index"
        )


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``, or None when it is gone: tells a replaced file apart."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def healthy(conn: sqlite3.Connection) -> bool:
    """SQLite's quick check: every page readable and well formed (not the indexes' contents)."""
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False


def remove(path: Path) -> None:
    """Delete the index and its WAL files (it is derived: the next sync rebuilds it)."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()


def open_unwritable(path: Path, error: sqlite3.DatabaseError) -> sqlite3.Connection:
    """Open an index that cannot be written (read-only mount, full disk) for reading, as it is.

    SQLite cannot open a WAL database without its ``-shm`` file, which it can neither create on
    a read-only mount nor size on a full disk; with no ``-wal`` content beside it, the main file
    holds every page, so it is opened as immutable.
    """
    wal = Path(str(path) + "-wal")
    if not path.is_file() or not unwritable(error):
        raise IndexUnavailableError(f"cannot open the index {path}: {error}") from error
    immutable = "&immutable=1" if not (wal.exists() and wal.stat().st_size) else ""
    try:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro{immutable}",
            uri=True,
            timeout=30,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA query_only = ON")  # marks it: see read_only()
        conn.execute("SELECT count(*) FROM chunks").fetchone()
    except sqlite3.DatabaseError as exc:
        raise IndexUnavailableError(f"cannot open the index {path}: {exc}") from exc
    return conn


def open_read_only(path: Path) -> sqlite3.Connection:
    """Another workspace's index (a parent's), read and never written: ``mode=ro`` and
    ``query_only``. IndexUnavailableError when there is none, or one of another schema."""
    if not path.is_file():
        raise IndexUnavailableError(f"{path}: no index yet (`mdmem index` in that workspace)")
    try:
        conn = sqlite3.connect(
            path.absolute().as_uri() + "?mode=ro",
            uri=True,
            timeout=30,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA busy_timeout=30000")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise IndexUnavailableError(f"cannot read the index {path}: {exc}") from exc
    if app_id != APP_ID or version != SCHEMA_VERSION:
        conn.close()
        raise IndexUnavailableError(
            f"{path}: not an index of this mdmem's schema ({version}, not {SCHEMA_VERSION}); "
            "`mdmem index` in that workspace rebuilds it"
        )
    return conn


def read_only(conn: sqlite3.Connection) -> bool:
    """True for a connection :func:`open_unwritable` made (to be retried once writable)."""
    try:
        return bool(conn.execute("PRAGMA query_only").fetchone()[0])
    except sqlite3.Error:
        return False


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
        _access_history(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _owner_only(path: Path) -> None:
    """The index holds every word of the workspace: 0600 in a 0700 ``.mdmem/``, made before
    SQLite opens it (SQLite gives the -wal and -shm files the database file's mode). On a
    read-only mount an existing index is left as it is (and opened read-only)."""
    try:
        private_file(path)
    except OSError:
        if not path.exists():
            raise
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
        import sqlite_utils

        db = sqlite_utils.Database(conn)
        for step in MIGRATIONS[version:SCHEMA_VERSION]:
            step(db)
        start_access_history(conn)  # a new index: its history starts with it
        conn.execute(f"PRAGMA application_id={APP_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _access_history(conn: sqlite3.Connection) -> None:
    """An index made before :data:`ACCESS_SINCE` existed gets it at its first open: one read
    at each open, one write in its life. Best effort and never waiting long: a writer holding
    the index (or a read-only one) leaves it for the next open."""
    if conn.execute("SELECT 1 FROM meta WHERE key = ?", (ACCESS_SINCE,)).fetchone():
        return
    conn.execute("PRAGMA busy_timeout=100")
    try:
        start_access_history(conn)
    except sqlite3.OperationalError:
        pass
    finally:
        conn.execute("PRAGMA busy_timeout=30000")
