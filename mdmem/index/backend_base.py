"""What the SQLite and PostgreSQL backends share, written once: the reading methods that are one
call of a backend's ``read`` or ``store`` module (:class:`ConnectionReads`), and the index of a
workspace's files (:class:`BackendBase`): healing around each operation, the flow of a sync,
status, relations and the first half of ``forget``.

A backend supplies its connection, its two SQL modules (checked against :class:`ReadSQL` and
:class:`StoreSQL`) and the few steps that differ: its writer lock, how it heals, how it writes
a batch of files and embeds, and what ``forget`` must erase in its store.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from mdmem.index import sync as neutral
from mdmem.index.backend import ChunkLayout, ChunkRow, Forgotten, IndexStatus
from mdmem.index.chunks import CHUNKER_VERSION, sha
from mdmem.index.sync import Freshness, Progress, SyncReport

if TYPE_CHECKING:
    from mdmem.config import FilesConfig
    from mdmem.index.embed import Embedder
    from mdmem.index.filters import Filters
    from mdmem.memory.relations import Relation
    from mdmem.memory.scan import FileStat
    from mdmem.redact import Redactor

T = TypeVar("T")
C = TypeVar("C")
"""A backend's connection (``sqlite3.Connection``, ``psycopg.Connection``)."""
C_in = TypeVar("C_in", contravariant=True)

ACCESS_SINCE = "access_since"
"""Meta key: when this index began counting accesses (ISO time). Set when the index is made,
or at the first open of an index made before the key existed (its history starts then); a
deleted or rebuilt index starts again. Consolidation reads a memory with no access row as
never returned only once this history is long enough to have seen its returns."""


class ReadSQL(Protocol[C_in]):
    """What the shared code calls of a backend's ``read`` module."""

    def snapshot(self, conn: C_in, /) -> AbstractContextManager[None]: ...

    def filtered(self, conn: C_in, layout: ChunkLayout, filters: Filters, /) -> np.ndarray: ...

    def chunk_rows(self, conn: C_in, rowids: Sequence[int], /) -> dict[int, ChunkRow]: ...

    def access_counts(self, conn: C_in, keys: Sequence[str], /) -> dict[str, int]: ...

    def bump_access(
        self, conn: C_in, keys: Sequence[str], wait_s: float | None = None, /
    ) -> bool: ...

    def relations(
        self, conn: C_in, entry_id: str | None, kind: str | None, /
    ) -> list[Relation]: ...


class StoreSQL(Protocol[C_in]):
    """What the shared code calls of a backend's ``store`` module."""

    def meta(self, conn: C_in, key: str, /) -> str | None: ...

    def set_meta(self, conn: C_in, key: str, value: str, /) -> None: ...

    def generation(self, conn: C_in, /) -> int: ...

    def bump_generation(self, conn: C_in, /) -> None: ...

    def known_stats(self, conn: C_in, /) -> dict[str, tuple[int, int]]: ...

    def known_stats_of(self, conn: C_in, paths: Sequence[str], /) -> dict[str, tuple[int, int]]: ...

    def known_hashes(self, conn: C_in, /) -> dict[str, str]: ...

    def entry_rows(self, conn: C_in, entry_ids: Sequence[str], /) -> list[tuple[int, str, str]]: ...


class ConnectionReads(Generic[C]):
    """The reading methods of :class:`~mdmem.index.backend.IndexReader` that both backends
    answer the same way, through their own SQL modules on ``conn``."""

    read_sql: ReadSQL[Any]
    store_sql: StoreSQL[Any]

    @property
    def conn(self) -> C:
        raise NotImplementedError

    def layout(self) -> ChunkLayout:
        raise NotImplementedError

    def meta(self, key: str) -> str | None:
        return self.store_sql.meta(self.conn, key)

    def generation(self) -> int:
        return self.store_sql.generation(self.conn)

    def reading(self) -> AbstractContextManager[None]:
        return self.read_sql.snapshot(self.conn)

    def filtered(self, filters: Filters) -> np.ndarray:
        return self.read_sql.filtered(self.conn, self.layout(), filters)

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, ChunkRow]:
        return self.read_sql.chunk_rows(self.conn, rowids)

    def access_counts(self, keys: Sequence[str]) -> dict[str, int]:
        return self.read_sql.access_counts(self.conn, keys)

    def bump_access(self, keys: Sequence[str], *, wait_s: float | None = None) -> bool:
        return self.read_sql.bump_access(self.conn, keys, wait_s)

    def access_since(self) -> str | None:
        return self.meta(ACCESS_SINCE)


@dataclass(frozen=True)
class SyncPlan:
    """What one sync writes: the files to read (all of them in a full one), the paths gone,
    the content hash the index holds of each file, and whether the model is new to it."""

    changed: list[FileStat]
    removed: list[str]
    known: dict[str, str]
    full: bool
    new_model: bool


class BackendBase(ConnectionReads[C]):
    """The index of one workspace's files (an :class:`~mdmem.index.backend.IndexBackend`),
    with what differs between backends left to the methods that raise NotImplementedError."""

    RECOVERABLE: ClassVar[tuple[type[Exception], ...]] = ()
    """Errors :meth:`recover` asks :meth:`_recovered` about."""
    LOOKUP_ERRORS: ClassVar[tuple[type[Exception], ...]] = ()
    """Errors on which :meth:`relations` leaves the answer to the files."""
    SHARED: ClassVar[bool] = False
    """A shared index (a server's): its status shows its generation."""

    def __init__(
        self,
        root: Path,
        files: FilesConfig,
        embedder: Callable[[], Embedder | None],
        *,
        redactor: Redactor,
        on_message: Callable[[str], None] | None,
    ) -> None:
        self.root = root
        self.files = files
        self.redactor = redactor
        self.chunker_key = f"{CHUNKER_VERSION}+{redactor.key}"
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._on_message = on_message
        self._lock = threading.RLock()
        self._recovering = False

    # ---- what each backend supplies ----------------------------------------------------------

    @property
    def where(self) -> str:
        """The index's file, or server and schema, for messages."""
        raise NotImplementedError

    def _reopen_if_replaced(self) -> None:
        """Before each outermost operation: reopen a store another process replaced."""

    def _recovered(self, error: Exception) -> bool:
        """After ``error`` (one of :attr:`RECOVERABLE`): repair the store and say so, True when
        the operation may run once more; False re-raises ``error``."""
        raise NotImplementedError

    def indexer(self, timeout: float) -> AbstractContextManager[bool]:
        """Held while this process writes: one writer per index. Yields False when another
        held it for ``timeout`` seconds."""
        raise NotImplementedError

    def _written_elsewhere(self) -> str | None:
        """Why this process may not write the index at all (None: it may)."""
        return None

    def _unwritable(self, error: Exception) -> str | None:
        """Why the index cannot be written now when ``error`` says so (read-only mount, full
        disk), else None (``error`` is raised)."""
        return None

    def _transaction(self) -> AbstractContextManager[object]:
        raise NotImplementedError

    def _write_changes(
        self,
        plan: SyncPlan,
        embedder: Embedder | None,
        report: SyncReport,
        progress: Progress | None,
    ) -> bool:
        """Store the changed files (:meth:`_store_files`), remove the removed ones
        (:meth:`_remove_files`), embed what has no vector; whether it looked for texts
        without one (:meth:`_look_for_missing`)."""
        raise NotImplementedError

    def _write_files(
        self, touched: list[FileStat], parsed: list[neutral.ParsedFile], now: str
    ) -> int:
        """In :meth:`_store_files`'s transaction: the new mtimes of ``touched``, and the chunks,
        relations and hashes of ``parsed``; the chunks written."""
        raise NotImplementedError

    def _delete_paths(self, paths: Sequence[str]) -> None:
        raise NotImplementedError

    def _after_sync(self, built_with: str | None, report: SyncReport) -> None:
        """At the end of a sync, under the writer lock (``built_with``: the chunker key the
        index held before it)."""

    def _owner_meta(self) -> dict[str, str]:
        """Meta a sync records besides the shared keys."""
        return {}

    def _counts(self, model_id: str | None) -> tuple[int, int, int]:
        """(files, chunks, chunks with a vector of ``model_id``)."""
        raise NotImplementedError

    def _size_bytes(self) -> int:
        raise NotImplementedError

    def _forget(
        self, rows: list[tuple[int, str, str]], keys: list[str], hashes: list[str]
    ) -> Forgotten:
        """Delete ``rows`` (rowid, text, text hash) and the vectors no chunk uses any more,
        the access counts of ``keys`` and the first-seen dates of ``hashes``, and leave no
        copy the store can remove."""
        raise NotImplementedError

    # ---- healing -----------------------------------------------------------------------------

    def recover(self, op: Callable[[], T]) -> T:
        """Run ``op``; when the store turns out damaged, replaced or gone (a lost connection,
        a file deleted under it), repair it, say so in one line, and run ``op`` once more.

        Nested calls leave healing to the outermost, so an operation is retried once, not once
        per level.
        """
        with self._lock:
            if self._recovering:
                return op()
            self._recovering = True
            try:
                self._reopen_if_replaced()
                try:
                    return op()
                except self.RECOVERABLE as exc:
                    if not self._recovered(exc):
                        raise
                return op()
            finally:
                self._recovering = False

    def searching(self) -> threading.RLock:
        """Held while one thread syncs and searches, so threads share one connection safely."""
        return self._lock

    def embedder(self) -> Embedder | None:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    @property
    def max_bytes(self) -> int:
        return int(self.files.max_file_mb * 1_000_000)

    def freshness(self) -> Freshness:
        """The cheap check: every file's mtime and size against what the index holds."""
        return neutral.freshness(self.root, self.files, self.store_sql.known_stats(self.conn))

    # ---- syncing -----------------------------------------------------------------------------

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

        One writer at a time, across threads, processes (and machines, for a server). If
        another holds the index for longer than ``lock_timeout`` (a watcher embedding a big
        change), nothing is written: the report is ``busy`` and lists the files not yet
        indexed as ``stale``. Changed files larger than ``defer_bytes`` are left for a later
        sync (a search must not wait seconds for one big file): they are listed as ``stale``,
        with a problem.
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
        refused = self._written_elsewhere()
        if refused is not None:
            return neutral.stale_report(SyncReport(readonly=refused), self.freshness())
        report = SyncReport()
        try:
            with self.indexer(lock_timeout) as held:
                if held:
                    self._sync_locked(full, embed, progress, report, defer_bytes, only)
        except Exception as exc:
            readonly = self._unwritable(exc)
            if readonly is None:
                raise
            return neutral.stale_report(SyncReport(readonly=readonly), self.freshness())
        if not held:
            return neutral.stale_report(SyncReport(busy=True), self.freshness())
        return report

    def _sync_locked(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        report: SyncReport,
        defer_bytes: int | None,
        only: list[str] | None,
    ) -> None:
        embedder = self.embedder() if embed else None
        built_with = self.meta("chunker_version")
        if built_with != self.chunker_key:
            full, only = True, None  # a rebuild: every file
        if only is None:
            fresh = self.freshness()
        else:
            stats = self.store_sql.known_stats_of(self.conn, neutral.relative(self.root, only))
            fresh = neutral.freshness_of(self.root, self.files, stats, only)
        report.problems = fresh.problems
        changed, removed = (fresh.files if full else fresh.changed), fresh.removed
        if defer_bytes is not None:
            changed = neutral.defer_big(changed, defer_bytes, self.max_bytes, report)
        known = self.store_sql.known_hashes(self.conn)
        new_model = embedder is not None and self.meta("embed_model") != embedder.model_id
        plan = SyncPlan(changed, removed, known, full, new_model)
        looked = self._write_changes(plan, embedder, report, progress)
        if looked and not (report.changed or report.embedded or full or new_model):
            # nothing was missing
            self.store_sql.set_meta(self.conn, "embedded_generation", str(self.generation()))
        elif report.changed or report.embedded or full or new_model or not self.meta("last_sync"):
            # a search that finds nothing to do writes nothing
            self._mark_synced(embedder)
        self._after_sync(built_with, report)

    def _mark_synced(self, embedder: Embedder | None) -> None:
        with self._transaction():
            generation = str(self.generation() + 1)
            written = {"generation": generation, "chunker_version": self.chunker_key}
            if embedder is not None:
                written |= {"embed_model": embedder.model_id, "embedded_generation": generation}
            written |= self._owner_meta()
            written["last_sync"] = dt.datetime.now().isoformat(timespec="seconds")
            for key, value in written.items():
                self.store_sql.set_meta(self.conn, key, value)

    def _read_files(
        self, batch: list[FileStat], plan: SyncPlan, report: SyncReport
    ) -> tuple[list[FileStat], list[neutral.ParsedFile]]:
        return neutral.read_batch(
            self.root,
            batch,
            plan.known,
            full=plan.full,
            max_bytes=self.max_bytes,
            redactor=self.redactor,
            report=report,
        )

    def _store_files(
        self,
        touched: list[FileStat],
        parsed: list[neutral.ParsedFile],
        plan: SyncPlan,
        report: SyncReport,
    ) -> None:
        """One transaction per batch of files read."""
        now = dt.datetime.now().isoformat(timespec="seconds")
        with self._transaction():
            report.chunks_written += self._write_files(touched, parsed, now)
            report.unchanged += len(touched)
            for item in parsed:
                if item.stat.path in plan.known:
                    report.updated += 1
                else:
                    report.added += 1
                report.paths.append(item.stat.path)
            if parsed:
                self.store_sql.bump_generation(self.conn)

    def _remove_files(self, removed: list[str], report: SyncReport) -> None:
        if removed:
            with self._transaction():
                self._delete_paths(removed)
                self.store_sql.bump_generation(self.conn)
            report.removed = len(removed)
            report.paths.extend(removed)

    def _look_for_missing(
        self, embedder: Embedder | None, plan: SyncPlan, report: SyncReport
    ) -> bool:
        """Whether to look for chunks without a vector, which scans the whole index: only when
        something was written since the last complete embedding pass, or the model changed."""
        return embedder is not None and bool(
            plan.new_model
            or report.chunks_written
            or self.meta("embedded_generation") != str(self.generation())
        )

    # ---- relations, status and forgetting ----------------------------------------------------

    def relations(
        self, entry_id: str | None = None, kind: str | None = None
    ) -> list[Relation] | None:
        """The relations the entries declare (from or to ``entry_id``, of ``kind``), read from
        the relations table; None when the index cannot word for them (a file changed or was
        removed since the last sync, none has run with this schema, or the store fails): read
        the files."""

        def lookup() -> list[Relation] | None:
            with self.read_sql.snapshot(self.conn):
                if not neutral.in_step(self):
                    return None
                return self.read_sql.relations(self.conn, entry_id, kind)

        try:
            return self.recover(lookup)
        except self.LOOKUP_ERRORS:  # busy beyond the timeout, unreadable: the files answer
            return None

    def status(self, model_id: str | None) -> IndexStatus:
        """What the index holds and how fresh it is (healing the store first if need be)."""
        return self.recover(lambda: self._status(model_id))

    def _status(self, model_id: str | None) -> IndexStatus:
        files, chunks, embedded = self._counts(model_id)
        fresh = self.freshness()
        return IndexStatus(
            files=files,
            chunks=chunks,
            embedded=embedded,
            model=model_id,
            index_bytes=self._size_bytes(),
            stale=[f.path for f in fresh.changed],
            removed=fresh.removed,
            problems=[str(p) for p in fresh.problems],
            last_sync=self.meta("last_sync"),
            db_path=self.where,
            generation=self.generation() if self.SHARED else None,
        )

    def forget(self, entry_ids: Collection[str], texts: Sequence[str]) -> Forgotten:
        """Re-sync the changed files, then remove what is left of these entries (rows of a file
        that could not be re-read), their vectors, access counts and first-seen dates."""
        with self.searching():
            rows = self.store_sql.entry_rows(self.conn, sorted(entry_ids))
            self.sync(embed=False)  # the files changed: their chunks are replaced
            plain = [sha(text) for _, text, _ in rows] + [sha(text) for text in texts]
            return self._forget(rows, [*entry_ids, *plain], plain)
