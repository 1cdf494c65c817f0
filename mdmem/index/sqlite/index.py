"""The SQLite index of one workspace (``.mdmem/index.db``): an :class:`IndexBackend`.

The index heals itself: a file found damaged (truncated, garbled), deleted or replaced by another
process is reopened, or rebuilt from the files, and the operation runs once more. An index that
cannot be written (read-only mount, full disk) is searched as it is. One writer at a time,
across threads and processes (a file lock beside the database); readers use WAL snapshots.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from mdmem.config import FilesConfig
from mdmem.index import sync as neutral
from mdmem.index.backend import ChunkRow, Forgotten, IndexStatus, Layout, Scored, VectorScan
from mdmem.index.chunks import CHUNKER_VERSION, sha
from mdmem.index.embed import Embedder
from mdmem.index.filters import Filters
from mdmem.index.sqlite import read, store, vector_store
from mdmem.index.sqlite.db import (
    ACCESS_SINCE,
    connect,
    damaged,
    healthy,
    identity,
    open_read_only,
    read_only,
    remove,
    unwritable,
)
from mdmem.index.sqlite.keyword import TermCounts, keyword
from mdmem.index.sqlite.layout_cache import LayoutCache
from mdmem.index.sqlite.store import transaction
from mdmem.index.sqlite.vector_cache import ExactScan
from mdmem.index.sqlite.vector_store import (
    CompactScan,
    CompactVectors,
    VectorChoice,
    Vectors,
    store_path,
)
from mdmem.index.sync import Freshness, Progress, SyncReport
from mdmem.layout import still_there
from mdmem.markdown.parse import Problem
from mdmem.memory.relations import Relation
from mdmem.memory.scan import FileStat
from mdmem.redact import DEFAULT, Redactor

HEAL_LOCK_WAIT_S = 60.0
T = TypeVar("T")


class SqliteIndex:
    """The SQLite index of one workspace. Parts it needs are passed in, nothing global."""

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
        compact_vectors_from: int = 250_000,
    ) -> None:
        """``redactor`` masks secrets in the chunks the index stores (the files stay as they
        are); changing what it masks rebuilds the index once. ``read_only``: another
        workspace's index (a parent's), opened read-only and never healed or synced here.
        ``compact_vectors_from``: chunks from which vectors live in the float16 store beside
        the index (:mod:`.vector_store`), not in a float32 matrix."""
        self.root = root
        self.redactor = redactor
        self.chunker_key = f"{CHUNKER_VERSION}+{redactor.key}"
        self.lock_path = lock_path or db_path.with_suffix(".lock")
        self.db_path = db_path
        self.files = files
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._on_message = on_message
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._read_only = False
        self._vector_choice = VectorChoice(store_path(db_path), compact_vectors_from, on_message)
        self._cache = LayoutCache(self._vector_choice)
        """The layout and vectors in memory, spliced after each change (``layout_cache.py``)."""
        self._terms = TermCounts()
        self._lock = threading.RLock()
        self._recovering = False
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
        self._cache = LayoutCache(self._vector_choice)

    # ---- healing ---------------------------------------------------------------------------

    def recover(self, op: Callable[[], T]) -> T:
        """Run ``op`` on the index; when the file turns out damaged, deleted or replaced, reopen
        it (rebuilt from the files if unusable), say so in one line, and run ``op`` once more.

        The check for a replaced file is one ``stat``. Nested calls leave healing to the
        outermost, so an operation is retried once, not once per level.
        """
        with self._lock:
            if self._recovering:
                return op()
            self._recovering = True
            try:
                self._reopen_if_replaced()
                try:
                    return op()
                except sqlite3.DatabaseError as exc:
                    if self._pinned:  # not ours to heal: its own workspace does that
                        raise
                    # any error once the file is gone or replaced (a deleted file gives I/O
                    # errors); otherwise only those that say the file is damaged
                    if not (damaged(exc) or identity(self.db_path) != self._identity):
                        raise
                    self._heal(exc)
                return op()
            finally:
                self._recovering = False

    def _reopen_if_replaced(self) -> None:
        if self._conn is None:
            return
        if identity(self.db_path) != self._identity:
            self.close()
            self._open(self._on_message)
            self._say("was deleted or replaced by another process; reopened it")
        elif self._read_only and not self._pinned:
            self.close()  # opened as it was while unwritable: try a normal open again

    def _heal(self, error: sqlite3.DatabaseError) -> None:
        """Under the sync lock, so two processes never rebuild the same file: a file another
        process replaced meanwhile is only reopened."""
        from filelock import FileLock, Timeout

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

    def embedder(self) -> Embedder | None:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    @property
    def max_bytes(self) -> int:
        return int(self.files.max_file_mb * 1_000_000)

    def meta(self, key: str) -> str | None:
        return store.meta(self.conn, key)

    def generation(self) -> int:
        return store.generation(self.conn)

    # ---- freshness -------------------------------------------------------------------------

    def freshness(self) -> Freshness:
        """The cheap check: every file's mtime and size against what the index holds."""
        return neutral.freshness(self.root, self.files, store.known_stats(self.conn))

    def changed_files(self) -> tuple[list[FileStat], list[str], list[Problem]]:
        """(new or modified files by mtime/size, removed paths, problems)."""
        fresh = self.freshness()
        return fresh.changed, fresh.removed, fresh.problems

    # ---- syncing ---------------------------------------------------------------------------

    def sync(
        self,
        *,
        full: bool = False,
        embed: bool = True,
        progress: Progress | None = None,
        lock_timeout: float = 600.0,
        defer_bytes: int | None = None,
    ) -> SyncReport:
        """Bring the index up to date with the files; embed what is missing when ``embed``.

        One writer at a time, across threads and processes. If another process holds the
        index for longer than ``lock_timeout`` (a watcher embedding a big change), nothing is
        written: the report is ``busy`` and lists the files not yet indexed as ``stale``.
        Changed files larger than ``defer_bytes`` are left for a later sync (a search must
        not wait seconds for one big file): they are listed as ``stale``, with a problem.
        """
        started = time.perf_counter()
        report = self.recover(
            lambda: self._sync_once(full, embed, progress, lock_timeout, defer_bytes)
        )
        report.seconds = time.perf_counter() - started
        return report

    def sync_paths(
        self,
        paths: Sequence[str],
        *,
        embed: bool = True,
        lock_timeout: float = 600.0,
        defer_bytes: int | None = None,
    ) -> SyncReport:
        """:meth:`sync` for these files only (a workspace's own writes): a stat of each."""
        started = time.perf_counter()
        only = list(paths)
        report = self.recover(
            lambda: self._sync_once(False, embed, None, lock_timeout, defer_bytes, only)
        )
        report.seconds = time.perf_counter() - started
        return report

    def _sync_once(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        lock_timeout: float,
        defer_bytes: int | None,
        only: list[str] | None = None,
    ) -> SyncReport:
        from filelock import FileLock, Timeout

        report = SyncReport()
        still_there(self.lock_path.parent)  # filelock would make a deleted workspace again
        try:
            with FileLock(str(self.lock_path), timeout=lock_timeout):
                self._sync_locked(full, embed, progress, report, defer_bytes, only)
        except Timeout:
            return neutral.stale_report(SyncReport(busy=True), self.freshness())
        except (sqlite3.DatabaseError, OSError) as exc:
            if not unwritable(exc):
                raise
            readonly = neutral.unwritable_reason(self.db_path, exc)
            return neutral.stale_report(SyncReport(readonly=readonly), self.freshness())
        return report

    def _sync_locked(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        report: SyncReport,
        defer_bytes: int | None = None,
        only: list[str] | None = None,
    ) -> None:
        embedder = self.embedder() if embed else None
        built_with = self.meta("chunker_version")
        if built_with != self.chunker_key:
            full, only = True, None  # a rebuild: every file
        if only is None:
            fresh = self.freshness()
        else:
            stats = store.known_stats_of(self.conn, neutral.relative(self.root, only))
            fresh = neutral.freshness_of(self.root, self.files, stats, only)
        report.problems = fresh.problems
        changed, removed = (fresh.files if full else fresh.changed), fresh.removed
        if defer_bytes is not None:
            changed = neutral.defer_big(changed, defer_bytes, self.max_bytes, report)
        known = store.known_hashes(self.conn)
        new_model = embedder is not None and self.meta("embed_model") != embedder.model_id
        looked, checked = False, 0

        def finish_files() -> neutral.Missing:
            nonlocal looked, checked
            if removed:
                with transaction(self.conn):
                    for path in removed:
                        store.delete_path(self.conn, path)
                    store.bump_generation(self.conn)
                report.removed = len(removed)
                report.paths.extend(removed)
            # Looking for chunks without a vector scans the whole index: only when something
            # was written since the last complete embedding pass, or the model changed.
            looked = embedder is not None and bool(
                new_model
                or report.chunks_written
                or self.meta("embedded_generation") != str(self.generation())
            )
            if embedder is None or not looked:
                return []
            checked = read.last_change(self.conn)
            return self._missing_vectors(embedder.model_id, new_model)

        def read_files(
            batch: list[FileStat], side: SyncReport
        ) -> tuple[list[FileStat], list[neutral.ParsedFile]]:
            return neutral.read_batch(
                self.root,
                batch,
                known,
                full=full,
                max_bytes=self.max_bytes,
                redactor=self.redactor,
                report=side,
            )

        writer = neutral.Writer(
            store_files=lambda touched, parsed: self._store_batch(
                touched, parsed, known, report, embedder
            ),
            finish_files=finish_files,
            store_vectors=lambda hashes, vectors: self._store_vectors(embedder, hashes, vectors),
        )
        report.embedded = neutral.pipeline(changed, read_files, writer, embedder, report, progress)
        if looked:
            store.set_meta(self.conn, "embedded_seq", str(checked))
        if looked and not (report.changed or report.embedded or full or new_model):
            # nothing was missing
            store.set_meta(self.conn, "embedded_generation", str(self.generation()))
        elif report.changed or report.embedded or full or new_model or not self.meta("last_sync"):
            # a search that finds nothing to do writes nothing
            self._mark_synced(embedder)
        self._finish_scrub(built_with, report.stale)
        report.generation = self.generation()

    def _mark_synced(self, embedder: Embedder | None) -> None:
        with transaction(self.conn):
            generation = str(self.generation() + 1)
            store.set_meta(self.conn, "generation", generation)
            if embedder is not None:
                store.set_meta(self.conn, "embed_model", embedder.model_id)
                store.set_meta(self.conn, "embedded_generation", generation)
            store.set_meta(self.conn, "chunker_version", self.chunker_key)
            now = dt.datetime.now().isoformat(timespec="seconds")
            store.set_meta(self.conn, "last_sync", now)

    def _finish_scrub(self, built_with: str | None, stale: list[str]) -> None:
        from mdmem.index.sqlite.purge import truncate_wal

        pending = self.meta("scrub")
        if (built_with is not None and built_with != self.chunker_key) or pending == "pages":
            self._scrub_rebuilt(stale)
        elif pending == "wal" and truncate_wal(self.conn, attempts=1):
            # rewritten; a reader kept the old WAL: one quick try per sync
            store.delete_meta(self.conn, "scrub")

    def _scrub_rebuilt(self, stale: list[str]) -> None:
        """After a rebuild that changed what is masked: no text from before survives in the
        chunks of unreadable files, cached vectors, free pages, FTS5 segments or the WAL.
        Until that is done, the next sync tries again."""
        from mdmem.index.sqlite.purge import drop_unused_vectors, mask_rows, scrub

        with transaction(self.conn):
            store.set_meta(self.conn, "scrub", "pages")
            if stale:
                mask_rows(self.conn, stale, self.redactor, sha)
            drop_unused_vectors(self.conn)
            store.bump_generation(self.conn)
        self._vectors_forgotten()
        try:
            truncated = scrub(self.conn, vacuum=True)
        except sqlite3.OperationalError as exc:  # another process busy with the file
            if self._on_message:
                self._on_message(f"index rebuilt; old pages not rewritten yet ({exc})")
            return
        if truncated:
            store.delete_meta(self.conn, "scrub")
        else:
            store.set_meta(self.conn, "scrub", "wal")
            if self._on_message:
                self._on_message("index rebuilt; a reader kept the WAL open (truncated later)")

    def _store_batch(
        self,
        touched: list[FileStat],
        parsed: list[neutral.ParsedFile],
        known: dict[str, str],
        report: SyncReport,
        embedder: Embedder | None,
    ) -> neutral.Missing:
        """One transaction per batch of files; returns their texts without a vector."""
        now = dt.datetime.now().isoformat(timespec="seconds")
        with transaction(self.conn):
            for stat in touched:
                store.touch_file(self.conn, stat)
                report.unchanged += 1
            for item in parsed:
                if item.stat.path in known:
                    report.updated += 1
                else:
                    report.added += 1
                report.chunks_written += store.replace_chunks(
                    self.conn, item.stat.path, item.chunks
                )
                store.replace_relations(self.conn, item.stat.path, item.relations)
                report.paths.append(item.stat.path)
                store.put_file(self.conn, item.stat, item.digest, now)
            if parsed:
                store.bump_generation(self.conn)
        if embedder is None or not parsed:
            return []
        paths = [item.stat.path for item in parsed]
        return store.missing_vectors_of(self.conn, embedder.model_id, paths)

    def _store_vectors(
        self, embedder: Embedder | None, hashes: list[str], vectors: np.ndarray
    ) -> None:
        assert embedder is not None
        with transaction(self.conn):
            store.bump_generation(self.conn)
            store.put_vectors(self.conn, embedder.model_id, hashes, vectors)

    def _missing_vectors(self, model_id: str, new_model: bool) -> list[tuple[str, str]]:
        """Texts with no vector of ``model_id``: among the chunks of the files the change log
        names since the last complete pass (a few rows), else among all (100 ms at 100k)."""
        since = None if new_model else self.meta("embedded_seq")
        changes = read.changes_since(self.conn, int(since)) if since else None
        if changes is None:
            return store.missing_vectors(self.conn, model_id)
        return store.missing_vectors_of(self.conn, model_id, changes[1])

    # ---- reading for search ----------------------------------------------------------------

    def searching(self) -> threading.RLock:
        """Held while one thread syncs and searches, so threads share one connection safely."""
        return self._lock

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return read.snapshot(self.conn)

    def layout(self) -> Layout:
        """The chunk layout, in memory; after a change only the changed files are read."""
        with read.snapshot(self.conn):
            self._cache.refresh(self.conn)
        return self._cache.layout

    def vector_cache(self, model_id: str) -> Vectors:
        """The vectors of ``model_id``, in memory, in step with the layout: after a change
        only the texts it has not seen are read (see :mod:`.vector_cache`)."""
        with read.snapshot(self.conn):
            return self._cache.vector_cache(self.conn, model_id)

    def vectors(self, model_id: str) -> np.ndarray:
        """All chunk vectors of ``model_id`` in layout order (zeros where a chunk has none)."""
        return self.vector_cache(model_id).layout_matrix()

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        """The most common words of a long query are scored last, or the query goes in two
        stages (see :mod:`.keyword`). In one snapshot, so the layout and the FTS5 rows agree
        also when called outside a search."""
        with read.snapshot(self.conn):
            layout = self.layout()
            return keyword(self.conn, layout, query, limit, self._terms, self.generation())

    def vector_scan(self, model_id: str, *, filters: Filters | None = None) -> VectorScan:
        """Exact cosine against every chunk (the vectors are unit length); ranking applies
        ``filters`` to all of them. Above ``compact_vectors_from`` chunks: faiss's nearest
        among those ``filters`` allow, and exact scores for this search's keyword candidates
        (see :mod:`.vector_store`)."""
        cache = self.vector_cache(model_id)
        if isinstance(cache, CompactVectors):
            layout = self.layout()
            filters = filters or Filters()
            mask = vector_store.allowed(layout, filters, lambda: self.filtered(filters))
            return CompactScan(cache, layout, mask)
        return ExactScan(cache)

    def filtered(self, filters: Filters) -> np.ndarray:
        return read.filtered(self.conn, self.layout(), filters)

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        return read.chunk_rows(self.conn, rowids)

    def access_counts(self, keys: Sequence[str]) -> dict[str, int]:
        return read.access_counts(self.conn, keys)

    def bump_access(self, keys: Sequence[str], *, wait_s: float | None = None) -> bool:
        return read.bump_access(self.conn, keys, wait_s)

    def access_since(self) -> str | None:
        return self.meta(ACCESS_SINCE)

    def relations(
        self, entry_id: str | None = None, kind: str | None = None
    ) -> list[Relation] | None:
        """The relations the entries declare (from or to ``entry_id``, of ``kind``), read from
        the relations table; None when the index cannot vouch for them (a file changed or was
        removed since the last sync, or none has run with this schema): read the files."""

        def lookup() -> list[Relation] | None:
            with read.snapshot(self.conn):
                return read.relations(self.conn, entry_id, kind) if neutral.in_step(self) else None

        try:
            return self.recover(lookup)
        except sqlite3.Error:  # busy beyond the timeout, unreadable: the files answer
            return None

    # ---- status and forgetting -------------------------------------------------------------

    def status(self, model_id: str | None) -> IndexStatus:
        """What the index holds and how fresh it is (healing the file first if need be)."""
        return self.recover(lambda: self._status(model_id))

    def _status(self, model_id: str | None) -> IndexStatus:
        files, chunks, embedded = read.counts(self.conn, model_id)
        fresh = self.freshness()
        files_of_db = self.db_path.parent.glob(self.db_path.name + "*")
        size = sum(p.stat().st_size for p in files_of_db if p.is_file())
        return IndexStatus(
            files=files,
            chunks=chunks,
            embedded=embedded,
            model=model_id,
            index_bytes=size,
            stale=[f.path for f in fresh.changed],
            removed=fresh.removed,
            problems=[str(p) for p in fresh.problems],
            last_sync=self.meta("last_sync"),
            db_path=str(self.db_path),
        )

    def forget(self, entry_ids: Collection[str], texts: Sequence[str]) -> Forgotten:
        """Re-sync the changed files, then remove what is left of these entries (rows of a
        file that could not be re-read), their vectors, access counts and first-seen dates,
        and leave no copy in free pages, FTS5 segments or the WAL."""
        from mdmem.index.sqlite.purge import drop_unused_vectors, scrub

        with self.searching():
            rows = store.entry_rows(self.conn, sorted(entry_ids))
            self.sync(embed=False)  # the files changed: their chunks are replaced
            plain = [sha(text) for _, text, _ in rows] + [sha(text) for text in texts]
            with transaction(self.conn):
                for rowid, _, _ in rows:  # still there if a file could not be re-read
                    store.delete_row(self.conn, rowid)
                vectors = drop_unused_vectors(self.conn, [h for _, _, h in rows])
                store.forget_keys(self.conn, [*entry_ids, *plain], plain)
                store.bump_generation(self.conn)
            self._vectors_forgotten()
            truncated = scrub(self.conn)
        return Forgotten(len(rows), vectors, truncated)

    def _vectors_forgotten(self) -> None:
        """The vector store beside the index drops what SQLite just dropped."""
        with read.snapshot(self.conn):
            self._cache.refresh(self.conn)
        vector_store.forgotten(self._cache.vectors, self._vector_choice.path)
