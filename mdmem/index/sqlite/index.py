"""The SQLite index of one workspace (``.mdmem/index.db``): an :class:`IndexBackend`.

The index heals itself: a file found damaged (truncated, garbled), deleted or replaced by another
process is reopened, or rebuilt from the files, and the operation runs once more. An index that
cannot be written (read-only mount, full disk) is searched as it is. One writer at a time,
across threads and processes (a file lock beside the database); readers use WAL snapshots.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from mdmem.config import FilesConfig
from mdmem.index import sync as neutral
from mdmem.index.backend import ChunkLayout, Forgotten, Scored, VectorScan
from mdmem.index.backend_base import BackendBase, SyncPlan
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.filters import Filters
from mdmem.index.sqlite import read, sqlite_writes
from mdmem.index.sqlite.db import (
    connect,
    damaged,
    healthy,
    identity,
    open_read_only,
    read_only,
    remove,
    unwritable,
)
from mdmem.index.sqlite.scale import float16_vectors
from mdmem.index.sqlite.scale.chunk_layout_cache import ChunkLayoutCache
from mdmem.index.sqlite.scale.float16_vectors import (
    Float16Scan,
    Float16Vectors,
    VectorChoice,
    Vectors,
    store_path,
)
from mdmem.index.sqlite.scale.keyword import TermCounts, keyword
from mdmem.index.sqlite.scale.vector_cache import ExactScan
from mdmem.index.sqlite.sqlite_writes import transaction
from mdmem.index.sync import Progress, SyncReport
from mdmem.layout import still_there
from mdmem.markdown.parse import Problem
from mdmem.memory.scan import FileStat
from mdmem.redact import DEFAULT, Redactor

HEAL_LOCK_WAIT_S = 60.0


class SqliteIndex(BackendBase[sqlite3.Connection]):
    """The SQLite index of one workspace. Parts it needs are passed in, nothing global."""

    read_sql = read
    store_sql = sqlite_writes
    RECOVERABLE = (sqlite3.DatabaseError,)
    LOOKUP_ERRORS = (sqlite3.Error,)

    def __init__(
        self,
        root: Path,
        db_path: Path,
        files: FilesConfig,
        embedder: Callable[[], Embedder | None],
        on_message: Callable[[str], None] | None = None,
        lock_path: Path | None = None,
        redactor: Redactor = DEFAULT,
        read_only: bool = False,
        float16_vectors_from: int = 250_000,
    ) -> None:
        """``redactor`` masks secrets in the chunks the index stores (the files stay as they
        are); changing what it masks rebuilds the index once. ``read_only``: another
        workspace's index (a parent's), opened read-only and never healed or synced here.
        ``float16_vectors_from``: chunks from which vectors live in the float16 store beside
        the index (:mod:`.scale.float16_vectors`), not in a float32 matrix."""
        super().__init__(root, files, embedder, redactor=redactor, on_message=on_message)
        self.lock_path = lock_path or db_path.with_suffix(".lock")
        self.db_path = db_path
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._read_only = False
        self._vector_choice = VectorChoice(store_path(db_path), float16_vectors_from, on_message)
        self._cache = ChunkLayoutCache(self._vector_choice)
        """The layout and vectors in memory, spliced after each change
        (``scale/chunk_layout_cache.py``)."""
        self._terms = TermCounts()
        self._pinned = read_only

    # ---- plumbing --------------------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._open(self._on_message)
        assert self._conn is not None
        return self._conn

    def _open(self, on_message: Callable[[str], None] | None) -> None:
        if self._pinned:
            self._conn = open_read_only(self.db_path)
            self._identity = identity(self.db_path)
            self._read_only = True
            return
        self._conn = connect(self.db_path, on_message)
        self._identity = identity(self.db_path)
        self._read_only = read_only(self._conn)

    def close(self) -> None:
        """Close the connection and forget what was cached from it."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        self._cache = ChunkLayoutCache(self._vector_choice)

    # ---- healing ---------------------------------------------------------------------------

    @property
    def where(self) -> str:
        return str(self.db_path)

    def _recovered(self, error: Exception) -> bool:
        """A file found damaged, deleted or replaced is reopened (rebuilt from the files if
        unusable); the check for a replaced file is one ``stat``."""
        if self._pinned:  # not ours to heal: its own workspace does that
            return False
        # any error once the file is gone or replaced (a deleted file gives I/O errors);
        # otherwise only those that say the file is damaged
        if not (damaged(error) or identity(self.db_path) != self._identity):
            return False
        self._heal(error)
        return True

    def _reopen_if_replaced(self) -> None:
        if self._conn is None:
            return
        if identity(self.db_path) != self._identity:
            self.close()
            self._open(self._on_message)
            self._say("was deleted or replaced by another process; reopened it")
        elif self._read_only and not self._pinned:
            self.close()  # opened as it was while unwritable: try a normal open again

    def _heal(self, error: Exception) -> None:
        """Under the sync lock, so two processes never rebuild the same file: a file another
        process replaced meanwhile is only reopened."""
        from mdmem.writes.file_lock import FileLock, Timeout

        seen = self._identity
        self.close()
        still_there(self.lock_path.parent)
        done: str | None
        try:
            with FileLock(str(self.lock_path), timeout=HEAL_LOCK_WAIT_S):
                done = self._mend(seen)
        except Timeout:
            self._open(self._on_message)
            done = "another process holds it; reopened it"
        except OSError as exc:  # the lock cannot even be created (read-only mount)
            if not unwritable(exc):
                raise
            self._open(self._on_message)
            done = f"it cannot be rebuilt here ({exc}); reopened it"
        if done is None:
            self._say("was deleted or replaced by another process; reopened it")
        else:
            self._say(f"was damaged ({error}); {done}")

    def _mend(self, seen: tuple[int, int] | None) -> str | None:
        """Reopen the index, rebuilding it if it is unusable. Says what it did; None when
        another process had already replaced the file (then it is only reopened)."""
        notes: list[str] = []
        if identity(self.db_path) != seen:
            self._open(notes.append)
            return "rebuilt it from the files" if notes else None
        self._open(notes.append)  # a file SQLite cannot open at all is rebuilt right here
        assert self._conn is not None
        if notes:
            return "rebuilt it from the files"
        if healthy(self._conn):
            return "reopened it"  # e.g. truncated to nothing: an empty index, synced anew
        self.close()
        remove(self.db_path)
        self._open(notes.append)
        return "rebuilt it from the files"

    def _say(self, what: str) -> None:
        if self._on_message:
            self._on_message(f"index {self.db_path} {what}")

    # ---- freshness -------------------------------------------------------------------------

    def changed_files(self) -> tuple[list[FileStat], list[str], list[Problem]]:
        """(new or modified files by mtime/size, removed paths, problems)."""
        fresh = self.freshness()
        return fresh.changed, fresh.removed, fresh.problems

    # ---- syncing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def indexer(self, timeout: float) -> Iterator[bool]:
        """A file lock beside the database: one writer across threads and processes."""
        from mdmem.writes.file_lock import FileLock, Timeout

        still_there(self.lock_path.parent)  # the lock would make a deleted workspace again
        lock = FileLock(str(self.lock_path), timeout=timeout)
        try:
            lock.acquire()
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def _unwritable(self, error: Exception) -> str | None:
        if isinstance(error, sqlite3.DatabaseError | OSError) and unwritable(error):
            return neutral.unwritable_reason(self.db_path, error)
        return None

    def _transaction(self) -> contextlib.AbstractContextManager[object]:
        return transaction(self.conn)

    def _write_changes(
        self,
        plan: SyncPlan,
        embedder: Embedder | None,
        report: SyncReport,
        progress: Progress | None,
    ) -> bool:
        """Files read, embedded and stored at once (:func:`~mdmem.index.sync.pipeline`)."""
        looked, checked = False, 0

        def store_files(
            touched: list[FileStat], parsed: list[neutral.ParsedFile]
        ) -> neutral.Missing:
            self._store_files(touched, parsed, plan, report)
            if embedder is None or not parsed:
                return []
            paths = [item.stat.path for item in parsed]
            return sqlite_writes.missing_vectors_of(self.conn, embedder.model_id, paths)

        def finish_files() -> neutral.Missing:
            nonlocal looked, checked
            self._remove_files(plan.removed, report)
            looked = self._look_for_missing(embedder, plan, report)
            if embedder is None or not looked:
                return []
            checked = read.last_change(self.conn)
            return self._missing_vectors(embedder.model_id, plan.new_model)

        writer = neutral.Writer(
            store_files=store_files,
            finish_files=finish_files,
            store_vectors=lambda hashes, vectors: self._store_vectors(embedder, hashes, vectors),
        )
        report.embedded = neutral.pipeline(
            plan.changed,
            lambda batch, side: self._read_files(batch, plan, side),
            writer,
            embedder,
            report,
            progress,
        )
        if looked:
            sqlite_writes.set_meta(self.conn, "embedded_seq", str(checked))
        return looked

    def _write_files(
        self, touched: list[FileStat], parsed: list[neutral.ParsedFile], now: str
    ) -> int:
        written = 0
        for stat in touched:
            sqlite_writes.touch_file(self.conn, stat)
        for item in parsed:
            written += sqlite_writes.replace_chunks(self.conn, item.stat.path, item.chunks)
            sqlite_writes.replace_relations(self.conn, item.stat.path, item.relations)
            sqlite_writes.put_file(self.conn, item.stat, item.digest, now)
        return written

    def _delete_paths(self, paths: Sequence[str]) -> None:
        for path in paths:
            sqlite_writes.delete_path(self.conn, path)

    def _store_vectors(
        self, embedder: Embedder | None, hashes: list[str], vectors: np.ndarray
    ) -> None:
        assert embedder is not None
        with transaction(self.conn):
            sqlite_writes.bump_generation(self.conn)
            sqlite_writes.put_vectors(self.conn, embedder.model_id, hashes, vectors)

    def _after_sync(self, built_with: str | None, report: SyncReport) -> None:
        self._finish_scrub(built_with, report.stale)
        report.generation = self.generation()

    def _finish_scrub(self, built_with: str | None, stale: list[str]) -> None:
        from mdmem.index.sqlite.purge import truncate_wal

        pending = self.meta("scrub")
        if (built_with is not None and built_with != self.chunker_key) or pending == "pages":
            self._scrub_rebuilt(stale)
        elif pending == "wal" and truncate_wal(self.conn, attempts=1):
            # rewritten; a reader kept the old WAL: one quick try per sync
            sqlite_writes.delete_meta(self.conn, "scrub")

    def _scrub_rebuilt(self, stale: list[str]) -> None:
        """After a rebuild that changed what is masked: no text from before survives in the
        chunks of unreadable files, cached vectors, free pages, FTS5 segments or the WAL.
        Until that is done, the next sync tries again."""
        from mdmem.index.sqlite.purge import drop_unused_vectors, mask_rows, scrub

        with transaction(self.conn):
            sqlite_writes.set_meta(self.conn, "scrub", "pages")
            if stale:
                mask_rows(self.conn, stale, self.redactor, sha)
            drop_unused_vectors(self.conn)
            sqlite_writes.bump_generation(self.conn)
        self._vectors_forgotten()
        try:
            truncated = scrub(self.conn, vacuum=True)
        except sqlite3.OperationalError as exc:  # another process busy with the file
            if self._on_message:
                self._on_message(f"index rebuilt; old pages not rewritten yet ({exc})")
            return
        if truncated:
            sqlite_writes.delete_meta(self.conn, "scrub")
        else:
            sqlite_writes.set_meta(self.conn, "scrub", "wal")
            if self._on_message:
                self._on_message("index rebuilt; a reader kept the WAL open (truncated later)")

    def _missing_vectors(self, model_id: str, new_model: bool) -> list[tuple[str, str]]:
        """Texts with no vector of ``model_id``: among the chunks of the files the change log
        names since the last complete pass (a few rows), else among all (100 ms at 100k)."""
        since = None if new_model else self.meta("embedded_seq")
        changes = read.changes_since(self.conn, int(since)) if since else None
        if changes is None:
            return sqlite_writes.missing_vectors(self.conn, model_id)
        return sqlite_writes.missing_vectors_of(self.conn, model_id, changes[1])

    # ---- reading for search ----------------------------------------------------------------

    def layout(self) -> ChunkLayout:
        """The chunk layout, in memory; after a change only the changed files are read."""
        with read.snapshot(self.conn):
            self._cache.refresh(self.conn)
        return self._cache.layout

    def vector_cache(self, model_id: str) -> Vectors:
        """The vectors of ``model_id``, in memory, in step with the layout: after a change
        only the texts it has not seen are read (see :mod:`.scale.vector_cache`)."""
        with read.snapshot(self.conn):
            return self._cache.vector_cache(self.conn, model_id)

    def vectors(self, model_id: str) -> np.ndarray:
        """All chunk vectors of ``model_id`` in layout order (zeros where a chunk has none)."""
        return self.vector_cache(model_id).layout_matrix()

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        """The most common words of a long query are scored last, or the query goes in two
        stages (see :mod:`.scale.keyword`). In one snapshot, so the layout and the FTS5 rows agree
        also when called outside a search."""
        with read.snapshot(self.conn):
            layout = self.layout()
            return keyword(self.conn, layout, query, limit, self._terms, self.generation())

    def vector_scan(self, model_id: str, *, filters: Filters | None = None) -> VectorScan:
        """Exact cosine against every chunk (the vectors are unit length); ranking applies
        ``filters`` to all of them. Above ``float16_vectors_from`` chunks: faiss's nearest
        among those ``filters`` allow, and exact scores for this search's keyword candidates
        (see :mod:`.scale.float16_vectors`)."""
        cache = self.vector_cache(model_id)
        if isinstance(cache, Float16Vectors):
            layout = self.layout()
            filters = filters or Filters()
            mask = layout.allowed(filters, lambda: self.filtered(filters))
            return Float16Scan(cache, layout, mask)
        return ExactScan(cache)

    # ---- status and forgetting -------------------------------------------------------------

    def _counts(self, model_id: str | None) -> tuple[int, int, int]:
        return read.counts(self.conn, model_id)

    def _size_bytes(self) -> int:
        files_of_db = self.db_path.parent.glob(self.db_path.name + "*")
        return sum(p.stat().st_size for p in files_of_db if p.is_file())

    def _forget(
        self, rows: list[tuple[int, str, str]], keys: list[str], hashes: list[str]
    ) -> Forgotten:
        """Leaves no copy in free pages, FTS5 segments or the WAL."""
        from mdmem.index.sqlite.purge import drop_unused_vectors, scrub

        with transaction(self.conn):
            for rowid, _, _ in rows:  # still there if a file could not be re-read
                sqlite_writes.delete_row(self.conn, rowid)
            vectors = drop_unused_vectors(self.conn, [h for _, _, h in rows])
            sqlite_writes.forget_keys(self.conn, keys, hashes)
            sqlite_writes.bump_generation(self.conn)
        self._vectors_forgotten()
        truncated = scrub(self.conn)
        return Forgotten(len(rows), vectors, truncated)

    def _vectors_forgotten(self) -> None:
        """The vector store beside the index drops what SQLite just dropped."""
        with read.snapshot(self.conn):
            self._cache.refresh(self.conn)
        float16_vectors.forgotten(self._cache.vectors, self._vector_choice.path)
