"""The PostgreSQL index of one workspace: an :class:`IndexBackend` many machines share.

The files stay the truth; the machine that holds them writes (one indexer per workspace at a
time, held by an advisory lock), any number of processes read. Each sync batch is one
transaction, so a reader never sees half of it, and bumps the index generation in it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from mdmem.config import FilesConfig
from mdmem.index import sync as neutral
from mdmem.index.backend import Forgotten, IndexStatus
from mdmem.index.chunks import CHUNKER_VERSION, sha
from mdmem.index.embed import Embedder
from mdmem.index.postgres import db, read, store
from mdmem.index.postgres.view import Layouts, View, settle
from mdmem.index.sync import Freshness, Progress, SyncReport
from mdmem.memory.relations import Relation
from mdmem.memory.scan import FileStat
from mdmem.redact import DEFAULT, Redactor

T = TypeVar("T")
LOCK_POLL_S = 0.05


def default_name(root: Path) -> str:
    """A workspace's name on the server unless configured: its folder's name and a hash of
    host and path, so two folders never share a schema by accident."""
    return f"{root.name}_{sha(origin(root))[:8]}"


def origin(root: Path) -> str:
    return f"{socket.gethostname()}:{root.resolve()}"


class PostgresIndex(View):
    """The PostgreSQL index of one workspace (schema ``mdmem_<name>``)."""

    def __init__(
        self,
        root: Path,
        files: FilesConfig,
        embedder: Callable[[], Embedder | None],
        *,
        url: str,
        name: str = "",
        candidates: int = 400,
        on_message: Callable[[str], None] | None = None,
        redactor: Redactor = DEFAULT,
    ) -> None:
        self.root = root
        self.files = files
        self.url = url
        self.name = name or default_name(root)
        self.schema = db.schema_name(self.name)
        self.candidates = candidates
        self.redactor = redactor
        self.chunker_key = f"{CHUNKER_VERSION}+{redactor.key}"
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._on_message = on_message
        self._conn: psycopg.Connection[Any] | None = None
        self.layouts = Layouts()
        self._lock = threading.RLock()
        self._recovering = False

    # ---- plumbing --------------------------------------------------------------------------

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = db.connect(self.url, self.schema)
            settle(self._conn, self.candidates)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
        self.layouts.clear()

    def recover(self, op: Callable[[], T]) -> T:
        """Run ``op``; when the connection broke (a restarted server, a dropped link), connect
        again and run it once more. A server that stays away is a one-line error."""
        with self._lock:
            if self._recovering:
                return op()
            self._recovering = True
            try:
                try:
                    return op()
                except psycopg.OperationalError as exc:
                    if self._conn is not None and not self._conn.closed:
                        raise
                    self.close()
                    if self._on_message:
                        self._on_message(f"index {self.where} lost its connection ({exc})")
                return op()
            finally:
                self._recovering = False

    @property
    def where(self) -> str:
        return f"{db.where(self.url)} schema {self.schema}"

    def embedder(self) -> Embedder | None:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    @property
    def max_bytes(self) -> int:
        return int(self.files.max_file_mb * 1_000_000)

    def freshness(self) -> Freshness:
        return neutral.freshness(self.root, self.files, store.known_stats(self.conn))

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
        Past ``lock_timeout`` waiting for another indexer, nothing is written (``busy``)."""
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
        owner = self.meta("origin")
        if owner is not None and owner != origin(self.root):
            readonly = (
                f"{self.where} is indexed from {owner}; this copy only reads it (give it an "
                "index.workspace of its own to index it here)"
            )
            return neutral.stale_report(SyncReport(readonly=readonly), self.freshness())
        with self.indexer(lock_timeout) as held:
            if not held:
                return neutral.stale_report(SyncReport(busy=True), self.freshness())
            report = SyncReport()
            self._sync_locked(full, embed, progress, report, defer_bytes, only)
            return report

    @contextlib.contextmanager
    def indexer(self, timeout: float) -> Iterator[bool]:
        """Held while this process writes: one indexer per workspace, on any machine (a
        session advisory lock, which the server drops if this process dies). Yields False
        when another held it for ``timeout`` seconds."""
        key = db.lock_key("indexer", self.schema)
        deadline = time.monotonic() + timeout
        while self.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() != (True,):
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(LOCK_POLL_S)
        try:
            yield True
        finally:
            if self._conn is not None and not self._conn.closed:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _sync_locked(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        report: SyncReport,
        defer_bytes: int | None,
        only: list[str] | None = None,
    ) -> None:
        embedder = self.embedder() if embed else None
        if self.meta("chunker_version") != self.chunker_key:
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
        total = len(changed)
        for start in range(0, total, neutral.BATCH_FILES):
            batch = changed[start : start + neutral.BATCH_FILES]
            self._sync_batch(batch, known, full, report)
            if progress:
                progress("files", min(start + neutral.BATCH_FILES, total), total)
        if removed:
            with self.conn.transaction():
                store.delete_paths(self.conn, removed)
                store.bump_generation(self.conn)
            report.removed = len(removed)
            report.paths.extend(removed)
        new_model = embedder is not None and self.meta("embed_model") != embedder.model_id
        looked = embedder is not None and (
            new_model
            or report.chunks_written
            or self.meta("embedded_generation") != str(self.generation())
        )
        if embedder is not None and looked:
            report.embedded = self._embed_missing(embedder, progress)
        if looked and not (report.changed or report.embedded or full or new_model):
            store.set_meta(self.conn, "embedded_generation", str(self.generation()))
        elif report.changed or report.embedded or full or new_model or not self.meta("last_sync"):
            self._mark_synced(embedder)

    def _mark_synced(self, embedder: Embedder | None) -> None:
        with self.conn.transaction():
            generation = str(self.generation() + 1)
            store.set_meta(self.conn, "generation", generation)
            if embedder is not None:
                store.set_meta(self.conn, "embed_model", embedder.model_id)
                store.set_meta(self.conn, "embedded_generation", generation)
            store.set_meta(self.conn, "chunker_version", self.chunker_key)
            store.set_meta(self.conn, "origin", origin(self.root))
            now = dt.datetime.now().isoformat(timespec="seconds")
            store.set_meta(self.conn, "last_sync", now)

    def _sync_batch(
        self, batch: list[FileStat], known: dict[str, str], full: bool, report: SyncReport
    ) -> None:
        touched, parsed = neutral.read_batch(
            self.root,
            batch,
            known,
            full=full,
            max_bytes=self.max_bytes,
            redactor=self.redactor,
            report=report,
        )
        now = dt.datetime.now().isoformat(timespec="seconds")
        with self.conn.transaction():
            store.touch_files(self.conn, touched)
            report.unchanged += len(touched)
            for item in parsed:
                if item.stat.path in known:
                    report.updated += 1
                else:
                    report.added += 1
                report.paths.append(item.stat.path)
            report.chunks_written += store.replace_chunks(
                self.conn, [(item.stat.path, item.chunks) for item in parsed]
            )
            store.replace_relations(
                self.conn, [(item.stat.path, item.relations) for item in parsed]
            )
            store.put_files(self.conn, [(item.stat, item.digest) for item in parsed], now)
            if parsed:
                store.bump_generation(self.conn)

    def _embed_missing(self, embedder: Embedder, progress: Progress | None) -> int:
        """Embed every chunk text without a vector of this model; vectors go to the table of
        the dimension the model gives (a new one when that changed: then all are embedded)."""
        table = self._model_table(embedder.model_id)
        missing = store.missing_vectors(self.conn, table)
        done = 0
        while done < len(missing):
            part = missing[done : done + neutral.EMBED_BATCH]
            vectors = embedder.embed([text for _, text in part])
            with self.conn.transaction():
                name = db.create_vector_table(self.conn, embedder.model_id, vectors.shape[1])
                store.bump_generation(self.conn)
                store.put_vectors(self.conn, name, [h for h, _ in part], vectors)
                store.set_meta(self.conn, "embed_table", name)
            done += len(part)
            if name != table:  # the first vectors, or a new dimension: what is missing there
                table = name
                missing = missing[:done] + store.missing_vectors(self.conn, name)
            if progress:
                progress("embedding", done, len(missing))
        return done

    def _model_table(self, model_id: str) -> str | None:
        """The vector table the last sync with this model wrote to."""
        if self.meta("embed_model") == model_id and (name := self.meta("embed_table")):
            return name
        dims = db.vector_dims(self.conn, model_id)
        return db.vector_table(self.conn, model_id, dims[0]) if len(dims) == 1 else None

    # ---- reading for search ----------------------------------------------------------------

    def searching(self) -> threading.RLock:
        return self._lock

    def relations(
        self, entry_id: str | None = None, kind: str | None = None
    ) -> list[Relation] | None:
        """The relations the entries declare (from or to ``entry_id``, of ``kind``), read from
        the relations table; None when the index cannot vouch for them (a file changed or was
        removed since the last sync, none has run with this schema, or the server fails):
        read the files."""

        def lookup() -> list[Relation] | None:
            with read.snapshot(self.conn):
                return read.relations(self.conn, entry_id, kind) if neutral.in_step(self) else None

        try:
            with self._lock:
                return self.recover(lookup)
        except (psycopg.Error, db.IndexServerError):
            return None

    # ---- status and forgetting -------------------------------------------------------------

    def status(self, model_id: str | None) -> IndexStatus:
        return self.recover(lambda: self._status(model_id))

    def _status(self, model_id: str | None) -> IndexStatus:
        table = self._model_table(model_id) if model_id else None
        files, chunks, embedded = read.counts(self.conn, table)
        fresh = self.freshness()
        return IndexStatus(
            files=files,
            chunks=chunks,
            embedded=embedded,
            model=model_id,
            index_bytes=read.size_bytes(self.conn, self.schema),
            stale=[f.path for f in fresh.changed],
            removed=fresh.removed,
            problems=[str(p) for p in fresh.problems],
            last_sync=self.meta("last_sync"),
            db_path=self.where,
            generation=self.generation(),
        )

    def forget(self, entry_ids: Collection[str], texts: Sequence[str]) -> Forgotten:
        """Re-sync, then remove what is left of these entries, their vectors, access counts and
        first-seen dates. The server keeps dead row versions until VACUUM reuses their space
        (and its WAL until a checkpoint), so ``truncated`` is False."""
        with self.searching():
            rows = store.entry_rows(self.conn, sorted(entry_ids))
            self.sync(embed=False)
            plain = [sha(text) for _, text, _ in rows] + [sha(text) for text in texts]
            tables = [
                str(r[0]) for r in self.conn.execute("SELECT name FROM vector_tables").fetchall()
            ]
            with self.conn.transaction():
                store.delete_rows(self.conn, [rowid for rowid, _, _ in rows])
                vectors = store.drop_unused_vectors(self.conn, tables, [h for _, _, h in rows])
                store.forget_keys(self.conn, [*entry_ids, *plain], plain)
                store.bump_generation(self.conn)
            for table in ("chunks", "first_seen", "access", *tables):
                self.conn.execute(f"VACUUM {table}")  # type: ignore[arg-type]
        return Forgotten(len(rows), vectors, False)
