"""Keep the index equal to the files: cheap freshness check, incremental sync, embeddings.

Per file: mtime + size, then a content hash, then re-parse. Per chunk: a content hash. Per
embedding: (model id, hash of the embedded text), so unchanged, moved or renamed text is never
embedded twice. An unreadable file keeps its last indexed chunks and is reported as stale: an
unreadable file is not a deleted file.

The index heals itself: a file found damaged (truncated, garbled), deleted or replaced by another
process is reopened, or rebuilt from the files, and the operation runs once more. An index that
cannot be written (read-only mount, full disk) is searched as it is.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from mdmem.config import FilesConfig
from mdmem.errors import FileProblem
from mdmem.index.chunks import CHUNKER_VERSION, Chunk, chunk_document, sha
from mdmem.index.db import (
    connect,
    damaged,
    healthy,
    identity,
    read_only,
    remove,
    unwritable,
)
from mdmem.index.embed import Embedder
from mdmem.index.fts import segment
from mdmem.markdown.parse import Problem, parse_document
from mdmem.memory.files import read_markdown
from mdmem.memory.scan import FileStat, scan
from mdmem.redact import DEFAULT, Redactor

BATCH_FILES = 200
EMBED_BATCH = 64
"""Texts embedded (and committed) per step: a stopping watcher waits for one step at most."""
HEAL_LOCK_WAIT_S = 60.0
T = TypeVar("T")
Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stage is "files" or "embedding"."""


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    embedded: int = 0
    """Texts sent to the embedding model (cache misses)."""
    stale: list[str] = field(default_factory=list)
    """Files that could not be read: their last indexed version is still served."""
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0
    paths: list[str] = field(default_factory=list)
    """Files whose chunks were re-indexed or removed."""
    busy: bool = False
    """Another process held the index too long; nothing was synced (see ``stale``)."""
    readonly: str | None = None
    """Why the index could not be written (read-only mount, full disk), or None. Nothing was
    synced: the index is searched as it is and ``stale`` lists the files it lags behind."""

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


@dataclass(frozen=True)
class Layout:
    """Every chunk in file order, as arrays: what whole-index scoring needs, without SQL."""

    rowids: np.ndarray
    """Chunk rowids ordered by (path, start_line)."""
    file_starts: np.ndarray
    """Index of the first chunk of each file (for per-file maxima with ``reduceat``)."""
    file_of: np.ndarray
    """For each chunk, the number of its file in ``file_starts``."""
    prev: np.ndarray
    """Index of the previous chunk in the same file, or -1."""
    next: np.ndarray
    """Index of the next chunk in the same file, or -1."""
    stream: np.ndarray
    """True for chunks of event streams (session files), where neighbours share a topic."""
    archived: np.ndarray
    by_rowid: np.ndarray
    """argsort of ``rowids``: with ``np.searchsorted`` it maps rowids to positions."""

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        sorted_ids = self.rowids[self.by_rowid]
        return self.by_rowid[np.searchsorted(sorted_ids, rowids)]


@dataclass(frozen=True)
class Freshness:
    files: list[FileStat]
    changed: list[FileStat]
    """New or modified (mtime or size differ from the index)."""
    removed: list[str]
    problems: list[Problem]


class Index:
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
    ) -> None:
        """``redactor`` masks secrets in the chunks the index stores (the files stay as they
        are); changing what it masks rebuilds the index once."""
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
        self._layout: tuple[int, Layout] | None = None
        self._vectors: tuple[tuple[str, int], np.ndarray] | None = None
        self._lock = threading.RLock()
        self._recovering = False

    # ---- plumbing --------------------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._open(self._on_message)
        assert self._conn is not None
        return self._conn

    def _open(self, on_message: Callable[[str], None] | None) -> None:
        self._conn = connect(self.db_path, on_message)
        self._identity = identity(self.db_path)
        self._read_only = read_only(self._conn)

    def close(self) -> None:
        """Close the connection and forget what was cached from it."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        self._layout = None
        self._vectors = None

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
        elif self._read_only:
            self.close()  # opened as it was while unwritable: try a normal open again

    def _heal(self, error: sqlite3.DatabaseError) -> None:
        """Under the sync lock, so two processes never rebuild the same file: a file another
        process replaced meanwhile is only reopened."""
        from filelock import FileLock, Timeout

        seen = self._identity
        self.close()
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
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def generation(self) -> int:
        return int(self.meta("generation") or 0)

    # ---- freshness -------------------------------------------------------------------------

    def freshness(self) -> Freshness:
        """The cheap check: every file's mtime and size against what the index holds."""
        result = scan(self.root, self.files)
        known = {
            path: (size, mtime)
            for path, size, mtime in self.conn.execute("SELECT path, size, mtime_ns FROM files")
        }
        changed = [f for f in result.files if known.get(f.path) != (f.size, f.mtime_ns)]
        seen = {f.path for f in result.files}
        unreadable = [p.path for p in result.problems]
        removed = [path for path in known if path not in seen and not _under_any(path, unreadable)]
        return Freshness(list(result.files), changed, removed, list(result.problems))

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

    def _sync_once(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        lock_timeout: float,
        defer_bytes: int | None,
    ) -> SyncReport:
        from filelock import FileLock, Timeout

        report = SyncReport()
        try:
            with FileLock(str(self.lock_path), timeout=lock_timeout):
                self._sync_locked(full, embed, progress, report, defer_bytes)
        except Timeout:
            return self._as_is(SyncReport(busy=True))
        except (sqlite3.DatabaseError, OSError) as exc:
            if not unwritable(exc):
                raise
            return self._as_is(SyncReport(readonly=f"{self.db_path} cannot be written ({exc})"))
        return report

    def _as_is(self, report: SyncReport) -> SyncReport:
        """What a search must say when it answers from the index as it is: only reads here."""
        fresh = self.freshness()
        report.stale = [f.path for f in fresh.changed] + fresh.removed
        report.problems = list(fresh.problems)
        return report

    def _sync_locked(
        self,
        full: bool,
        embed: bool,
        progress: Progress | None,
        report: SyncReport,
        defer_bytes: int | None = None,
    ) -> None:
        embedder = self.embedder() if embed else None
        built_with = self.meta("chunker_version")
        if built_with != self.chunker_key:
            full = True
        fresh = self.freshness()
        report.problems = fresh.problems
        changed, removed = (fresh.files if full else fresh.changed), fresh.removed
        if defer_bytes is not None:
            changed = self._defer_big(changed, defer_bytes, report)
        known = dict(self.conn.execute("SELECT path, hash FROM files").fetchall())
        total = len(changed)
        for start in range(0, total, BATCH_FILES):
            batch = changed[start : start + BATCH_FILES]
            self._sync_batch(batch, known, full, report)
            if progress:
                progress("files", min(start + BATCH_FILES, total), total)
        if removed:
            with _transaction(self.conn):
                for path in removed:
                    self._delete_path(path)
                self._bump_generation()
            report.removed = len(removed)
            report.paths.extend(removed)
        new_model = embedder is not None and self.meta("embed_model") != embedder.model_id
        # Looking for chunks without a vector scans the whole index: only when something
        # was written since the last complete embedding pass, or the model changed.
        looked = embedder is not None and (
            new_model
            or report.chunks_written
            or self.meta("embedded_generation") != str(self.generation())
        )
        if embedder is not None and looked:
            report.embedded = self._embed_missing(embedder, progress)
        if looked and not (report.changed or report.embedded or full or new_model):
            self._set_meta("embedded_generation", str(self.generation()))  # nothing was missing
        elif report.changed or report.embedded or full or new_model or not self.meta("last_sync"):
            # a search that finds nothing to do writes nothing
            with _transaction(self.conn):
                generation = str(self.generation() + 1)
                self._set_meta("generation", generation)
                if embedder is not None:
                    self._set_meta("embed_model", embedder.model_id)
                    self._set_meta("embedded_generation", generation)
                self._set_meta("chunker_version", self.chunker_key)
                self._set_meta("last_sync", dt.datetime.now().isoformat(timespec="seconds"))
        pending = self.meta("scrub")
        if (built_with is not None and built_with != self.chunker_key) or pending == "pages":
            self._scrub_rebuilt(report.stale)
        elif pending == "wal":  # rewritten; a reader kept the old WAL: one quick try per sync
            from mdmem.index.purge import truncate_wal

            if truncate_wal(self.conn, attempts=1):
                self.conn.execute("DELETE FROM meta WHERE key = 'scrub'")

    def _scrub_rebuilt(self, stale: list[str]) -> None:
        """After a rebuild that changed what is masked: no text from before survives in the
        chunks of unreadable files, cached vectors, free pages, FTS5 segments or the WAL.
        Until that is done, the next sync tries again."""
        from mdmem.index.purge import drop_unused_vectors, mask_rows, scrub

        with _transaction(self.conn):
            self._set_meta("scrub", "pages")
            if stale:
                mask_rows(self.conn, stale, self.redactor, sha)
            drop_unused_vectors(self.conn)
            self._bump_generation()
        try:
            truncated = scrub(self.conn, vacuum=True)
        except sqlite3.OperationalError as exc:  # another process busy with the file
            if self._on_message:
                self._on_message(f"index rebuilt; old pages not rewritten yet ({exc})")
            return
        if truncated:
            self.conn.execute("DELETE FROM meta WHERE key = 'scrub'")
        else:
            self._set_meta("scrub", "wal")
            if self._on_message:
                self._on_message("index rebuilt; a reader kept the WAL open (truncated later)")

    def _defer_big(
        self, changed: list[FileStat], defer_bytes: int, report: SyncReport
    ) -> list[FileStat]:
        """The changed files small enough to index now; the others are reported stale."""
        keep = []
        for stat in changed:
            if stat.size <= defer_bytes or stat.size > self.max_bytes:
                keep.append(stat)  # (a file over max_file_mb is reported as too large)
                continue
            report.stale.append(stat.path)
            report.problems.append(
                Problem(
                    stat.path,
                    f"changed ({stat.size / 1e6:.1f} MB): too big to re-index before a search; "
                    "`mdmem index` or `mdmem watch` indexes it",
                )
            )
        return keep

    def _sync_batch(
        self, batch: list[FileStat], known: dict[str, str], full: bool, report: SyncReport
    ) -> None:
        parsed: list[tuple[FileStat, str, list[Chunk]]] = []
        touched: list[FileStat] = []
        for stat in batch:
            try:
                data, text = read_markdown(self.root / stat.path, stat.path, self.max_bytes)
            except FileProblem as exc:  # unreadable right now: keep what we had
                report.problems.append(Problem(exc.path, exc.reason, exc.line))
                report.stale.append(stat.path)
                continue
            digest = hashlib.sha256(data).hexdigest()
            if not full and known.get(stat.path) == digest:
                touched.append(stat)  # same bytes, new mtime
                continue
            doc = parse_document(stat.path, text)
            report.problems.extend(doc.problems)
            parsed.append((stat, digest, chunk_document(doc, self.redactor)))
        now = dt.datetime.now().isoformat(timespec="seconds")
        with _transaction(self.conn):
            for stat in touched:
                self.conn.execute(
                    "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                    (stat.size, stat.mtime_ns, stat.path),
                )
                report.unchanged += 1
            for stat, digest, chunks in parsed:
                if stat.path in known:
                    report.updated += 1
                else:
                    report.added += 1
                report.chunks_written += self._replace_chunks(stat.path, chunks)
                report.paths.append(stat.path)
                self.conn.execute(
                    "INSERT OR REPLACE INTO files(path, size, mtime_ns, hash, indexed_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (stat.path, stat.size, stat.mtime_ns, digest, now),
                )
            if parsed:
                self._bump_generation()

    def _replace_chunks(self, path: str, chunks: list[Chunk]) -> int:
        """Swap a file's chunks, keeping rows whose content did not change."""
        existing = {
            cid: rowid
            for rowid, cid in self.conn.execute(
                "SELECT rowid, id FROM chunks WHERE path = ?", (path,)
            )
        }
        wanted = {c.id for c in chunks}
        for cid, rowid in existing.items():
            if cid not in wanted:
                self.conn.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
                self.conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
        today = dt.date.today().isoformat()
        written = 0
        for chunk in chunks:
            if chunk.id in existing:
                continue
            plain = sha(chunk.text)
            self.conn.execute(
                "INSERT OR IGNORE INTO first_seen(text_hash, seen) VALUES (?, ?)", (plain, today)
            )
            created = (
                chunk.created
                or self.conn.execute(
                    "SELECT seen FROM first_seen WHERE text_hash = ?", (plain,)
                ).fetchone()[0]
            )
            cursor = self.conn.execute(
                "INSERT INTO chunks(id, path, start_line, end_line, heading, text, embed_text, "
                "text_hash, kind, type, importance, created, entry_id, agent, session, archived) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                ),
            )
            self.conn.execute(
                "INSERT INTO chunks_fts(rowid, text, heading) VALUES (?, ?, ?)",
                (cursor.lastrowid, segment(chunk.text), segment(chunk.heading)),
            )
            written += 1
        return written

    def _bump_generation(self) -> None:
        """In the same transaction as the change: a reader's cached layout and vectors are
        keyed by the generation, so it must never see new rows under an old one."""
        self._set_meta("generation", str(self.generation() + 1))

    def _delete_path(self, path: str) -> None:
        self.conn.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE path = ?)",
            (path,),
        )
        self.conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def _embed_missing(self, embedder: Embedder, progress: Progress | None) -> int:
        missing = self.conn.execute(
            "SELECT text_hash, min(embed_text) FROM chunks WHERE text_hash NOT IN "
            "(SELECT text_hash FROM embeddings WHERE model = ?) GROUP BY text_hash",
            (embedder.model_id,),
        ).fetchall()
        if not missing:
            return 0
        done = 0
        step = EMBED_BATCH
        for start in range(0, len(missing), step):
            part = missing[start : start + step]
            vectors = embedder.embed([text for _, text in part])
            with _transaction(self.conn):
                self._bump_generation()
                self.conn.executemany(
                    "INSERT OR REPLACE INTO embeddings(model, text_hash, dim, vector) "
                    "VALUES (?, ?, ?, ?)",
                    [
                        (embedder.model_id, h, int(v.shape[0]), v.astype(np.float32).tobytes())
                        for (h, _), v in zip(part, vectors, strict=True)
                    ],
                )
            done += len(part)
            if progress:
                progress("embedding", done, len(missing))
        return done

    # ---- reading for search ----------------------------------------------------------------

    def searching(self) -> threading.RLock:
        """Held while one thread syncs and searches, so threads share one connection safely."""
        return self._lock

    def layout(self) -> Layout:
        """The chunk layout, cached in memory until the index changes."""
        key = self.generation()
        if self._layout is not None and self._layout[0] == key:
            return self._layout[1]
        rows = self.conn.execute(
            "SELECT rowid, path, session IS NOT NULL AND path LIKE '.sessions/%', archived "
            "FROM chunks ORDER BY path, start_line, end_line, rowid"
        ).fetchall()
        n = len(rows)
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        paths = [r[1] for r in rows]
        new_file = np.array([i == 0 or paths[i] != paths[i - 1] for i in range(n)], dtype=bool)
        file_starts = np.flatnonzero(new_file)
        file_of = np.cumsum(new_file) - 1
        index = np.arange(n)
        prev = np.where(new_file, -1, index - 1)
        last = np.append(new_file[1:], True) if n else new_file
        nxt = np.where(last, -1, index + 1)
        layout = Layout(
            rowids=rowids,
            file_starts=file_starts,
            file_of=file_of,
            prev=prev,
            next=nxt,
            stream=np.fromiter((bool(r[2]) for r in rows), dtype=bool, count=n),
            archived=np.fromiter((bool(r[3]) for r in rows), dtype=bool, count=n),
            by_rowid=np.argsort(rowids, kind="stable"),
        )
        self._layout = (key, layout)
        return layout

    def vectors(self, model_id: str) -> np.ndarray:
        """All chunk vectors of ``model_id`` in layout order (zeros where a chunk has none),
        cached in memory until the index changes."""
        key = (model_id, self.generation())
        if self._vectors is not None and self._vectors[0] == key:
            return self._vectors[1]
        layout = self.layout()
        rows = self.conn.execute(
            "SELECT c.rowid, e.vector FROM chunks c JOIN embeddings e "
            "ON e.model = ? AND e.text_hash = c.text_hash",
            (model_id,),
        ).fetchall()
        if not rows:
            matrix = np.zeros((len(layout.rowids), 1), dtype=np.float32)
        else:
            found = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(
                len(rows), -1
            )
            matrix = np.zeros((len(layout.rowids), found.shape[1]), dtype=np.float32)
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            matrix[layout.positions(ids)] = found
        self._vectors = (key, matrix)
        return matrix


@dataclass(frozen=True)
class IndexStatus:
    files: int
    chunks: int
    embedded: int
    """Chunks with a vector of ``model``."""
    model: str | None
    index_bytes: int
    stale: list[str]
    """Files changed on disk since the last sync (the next search re-indexes them)."""
    removed: list[str]
    problems: list[str]
    last_sync: str | None
    db_path: str
    watcher: dict[str, object] | None = None
    """The watcher's heartbeat (pid, age, running), or None when none has run."""

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def index_status(index: Index, model_id: str | None) -> IndexStatus:
    conn = index.conn
    files = conn.execute("SELECT count(*) FROM files").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    embedded = 0
    if model_id:
        embedded = conn.execute(
            "SELECT count(*) FROM chunks c WHERE EXISTS (SELECT 1 FROM embeddings e "
            "WHERE e.model = ? AND e.text_hash = c.text_hash)",
            (model_id,),
        ).fetchone()[0]
    changed, removed, problems = index.changed_files()
    size = sum(
        p.stat().st_size for p in index.db_path.parent.glob(index.db_path.name + "*") if p.is_file()
    )
    return IndexStatus(
        files=files,
        chunks=chunks,
        embedded=embedded,
        model=model_id,
        index_bytes=size,
        stale=[f.path for f in changed],
        removed=removed,
        problems=[str(p) for p in problems],
        last_sync=index.meta("last_sync"),
        db_path=str(index.db_path),
    )


class _transaction:
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


def _under_any(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)
