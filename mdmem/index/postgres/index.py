"""The PostgreSQL index of one workspace: an :class:`IndexBackend` many machines share.

The files stay the truth; the machine that holds them writes (one indexer per workspace at a
time, held by an advisory lock), any number of processes read. Each sync batch is one
transaction, so a reader never sees half of it, and bumps the index generation in it.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from mdmem.config import FilesConfig
from mdmem.index import sync as neutral
from mdmem.index.backend import Forgotten
from mdmem.index.backend_base import BackendBase, SyncPlan
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.postgres import db, postgres_writes, read
from mdmem.index.postgres.view import ChunkLayouts, View, settle
from mdmem.index.sync import Progress, SyncReport
from mdmem.memory.scan import FileStat
from mdmem.redact import DEFAULT, Redactor

LOCK_POLL_S = 0.05


def default_name(root: Path) -> str:
    """A workspace's name on the server unless configured: its folder's name and a hash of
    host and path, so two folders never share a schema by accident."""
    return f"{root.name}_{sha(origin(root))[:8]}"


def origin(root: Path) -> str:
    return f"{socket.gethostname()}:{root.resolve()}"


class PostgresIndex(View, BackendBase[psycopg.Connection[Any]]):
    """The PostgreSQL index of one workspace (schema ``mdmem_<name>``)."""

    RECOVERABLE = (psycopg.OperationalError,)
    LOOKUP_ERRORS = (psycopg.Error, db.IndexServerError)
    SHARED = True

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
        super().__init__(root, files, embedder, redactor=redactor, on_message=on_message)
        self.url = url
        self.name = name or default_name(root)
        self.schema = db.schema_name(self.name)
        self.candidates = candidates
        self._conn: psycopg.Connection[Any] | None = None
        self.layouts = ChunkLayouts()

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

    def _recovered(self, error: Exception) -> bool:
        """A broken connection (a restarted server, a dropped link) is opened again; a server
        that stays away is a one-line error."""
        if self._conn is not None and not self._conn.closed:
            return False
        self.close()
        if self._on_message:
            self._on_message(f"index {self.where} lost its connection ({error})")
        return True

    @property
    def where(self) -> str:
        return f"{db.where(self.url)} schema {self.schema}"

    # ---- syncing ---------------------------------------------------------------------------

    def _written_elsewhere(self) -> str | None:
        owner = self.meta("origin")
        if owner is not None and owner != origin(self.root):
            return (
                f"{self.where} is indexed from {owner}; this copy only reads it (give it an "
                "index.workspace of its own to index it here)"
            )
        return None

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

    def _transaction(self) -> contextlib.AbstractContextManager[object]:
        return self.conn.transaction()

    def _write_changes(
        self,
        plan: SyncPlan,
        embedder: Embedder | None,
        report: SyncReport,
        progress: Progress | None,
    ) -> bool:
        """A batch of files at a time, then the vectors missing."""
        total = len(plan.changed)
        for start in range(0, total, neutral.BATCH_FILES):
            batch = plan.changed[start : start + neutral.BATCH_FILES]
            touched, parsed = self._read_files(batch, plan, report)
            self._store_files(touched, parsed, plan, report)
            if progress:
                progress("files", min(start + neutral.BATCH_FILES, total), total)
        self._remove_files(plan.removed, report)
        looked = self._look_for_missing(embedder, plan, report)
        if embedder is not None and looked:
            report.embedded = self._embed_missing(embedder, progress)
        return looked

    def _write_files(
        self, touched: list[FileStat], parsed: list[neutral.ParsedFile], now: str
    ) -> int:
        postgres_writes.touch_files(self.conn, touched)
        written = postgres_writes.replace_chunks(
            self.conn, [(item.stat.path, item.chunks) for item in parsed]
        )
        postgres_writes.replace_relations(
            self.conn, [(item.stat.path, item.relations) for item in parsed]
        )
        postgres_writes.put_files(self.conn, [(item.stat, item.digest) for item in parsed], now)
        return written

    def _delete_paths(self, paths: Sequence[str]) -> None:
        postgres_writes.delete_paths(self.conn, paths)

    def _owner_meta(self) -> dict[str, str]:
        return {"origin": origin(self.root)}

    def _embed_missing(self, embedder: Embedder, progress: Progress | None) -> int:
        """Embed every chunk text without a vector of this model; vectors go to the table of
        the dimension the model gives (a new one when that changed: then all are embedded)."""
        table = self._model_table(embedder.model_id)
        missing = postgres_writes.missing_vectors(self.conn, table)
        done = 0
        while done < len(missing):
            part = missing[done : done + neutral.EMBED_BATCH]
            vectors = embedder.embed([text for _, text in part])
            with self.conn.transaction():
                name = db.create_vector_table(self.conn, embedder.model_id, vectors.shape[1])
                postgres_writes.bump_generation(self.conn)
                postgres_writes.put_vectors(self.conn, name, [h for h, _ in part], vectors)
                postgres_writes.set_meta(self.conn, "embed_table", name)
            done += len(part)
            if name != table:  # the first vectors, or a new dimension: what is missing there
                table = name
                missing = missing[:done] + postgres_writes.missing_vectors(self.conn, name)
            if progress:
                progress("embedding", done, len(missing))
        return done

    def _model_table(self, model_id: str) -> str | None:
        """The vector table the last sync with this model wrote to."""
        if self.meta("embed_model") == model_id and (name := self.meta("embed_table")):
            return name
        dims = db.vector_dims(self.conn, model_id)
        return db.vector_table(self.conn, model_id, dims[0]) if len(dims) == 1 else None

    # ---- status and forgetting -------------------------------------------------------------

    def _counts(self, model_id: str | None) -> tuple[int, int, int]:
        table = self._model_table(model_id) if model_id else None
        return read.counts(self.conn, table)

    def _size_bytes(self) -> int:
        return read.size_bytes(self.conn, self.schema)

    def _forget(
        self, rows: list[tuple[int, str, str]], keys: list[str], hashes: list[str]
    ) -> Forgotten:
        """The server keeps dead row versions until VACUUM reuses their space (and its WAL
        until a checkpoint), so ``truncated`` is False."""
        tables = [str(r[0]) for r in self.conn.execute("SELECT name FROM vector_tables").fetchall()]
        with self.conn.transaction():
            postgres_writes.delete_rows(self.conn, [rowid for rowid, _, _ in rows])
            vectors = postgres_writes.drop_unused_vectors(
                self.conn, tables, [h for _, _, h in rows]
            )
            postgres_writes.forget_keys(self.conn, keys, hashes)
            postgres_writes.bump_generation(self.conn)
        for table in ("chunks", "first_seen", "access", *tables):
            self.conn.execute(f"VACUUM {table}")  # type: ignore[arg-type]
        return Forgotten(len(rows), vectors, False)
