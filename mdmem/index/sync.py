"""Keeping an index equal to the files, the parts every backend shares: which files changed,
reading and chunking them, and what a sync reports.

Per file: mtime + size, then a content hash, then re-parse. Per chunk: a content hash. Per
embedding: (model id, hash of the embedded text), so unchanged, moved or renamed text is never
embedded twice. An unreadable file keeps its last indexed chunks and is reported as stale: an
unreadable file is not a deleted file.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import queue
import stat as stat_mode
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mdmem.config import FilesConfig
from mdmem.errors import FileProblem
from mdmem.index.chunks import Chunk, chunk_document
from mdmem.index.embed import Embedder
from mdmem.markdown.parse import Problem, parse_document
from mdmem.memory.relations import Relation, relations
from mdmem.memory.scan import ALWAYS_SKIPPED, FileStat, indexed_by, scan
from mdmem.paths import NAME_SKIPPED, name_problem, shown
from mdmem.redact import Redactor
from mdmem.writes.os_failures import disk_full
from mdmem.writes.own_writes import OwnWrites
from mdmem.writes.safe_writer import read_markdown

BATCH_FILES = 200
EMBED_BATCH = 64
"""Texts embedded (and committed) per step: a stopping watcher waits for one step at most."""
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
    generation: int | None = None
    """The index's generation when the sync ended (None: it did not run to the end). What a
    watcher gives: the index matched the files at this generation."""

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


@dataclass(frozen=True)
class CaughtUp:
    """A live watcher's word that the index matched the files at ``generation`` as of the
    moment it was asked (no change before that moment is left to index); ``problems``: what
    its last sync found wrong in them."""

    generation: int
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Freshness:
    files: list[FileStat]
    changed: list[FileStat]
    """New or modified (mtime or size differ from the index)."""
    removed: list[str]
    problems: list[Problem]


@dataclass(frozen=True)
class ParsedFile:
    """A changed file, read and chunked, ready to be stored."""

    stat: FileStat
    digest: str
    chunks: list[Chunk]
    relations: tuple[Relation, ...] = ()
    """What its entries declare (``refines=m-…``), for a backend's relations table."""


class _Derived(Protocol):
    chunker_key: str

    def meta(self, key: str) -> str | None: ...

    def freshness(self) -> Freshness: ...


def in_step(index: _Derived) -> bool:
    """The index holds the files as they are now, chunked as this code chunks them: a table
    it derives from them at sync (the relations) can answer for the files."""
    if index.meta("chunker_version") != index.chunker_key:
        return False
    fresh = index.freshness()
    return not (fresh.changed or fresh.removed)


def freshness(root: Path, files: FilesConfig, known: Mapping[str, tuple[int, int]]) -> Freshness:
    """The cheap check: every file's (size, mtime_ns) against ``known``, what the index holds."""
    result = scan(root, files)
    changed = [f for f in result.files if known.get(f.path) != (f.size, f.mtime_ns)]
    seen = {f.path for f in result.files}
    unreadable = [p.path for p in result.problems]
    removed = [path for path in known if path not in seen and not _under_any(path, unreadable)]
    return Freshness(list(result.files), changed, removed, list(result.problems))


def freshness_of(
    root: Path, files: FilesConfig, known: Mapping[str, tuple[int, int]], paths: Sequence[str]
) -> Freshness:
    """The cheap check for ``paths`` only (absolute, or relative to ``root``): a stat of each
    and of the ``.gitignore`` files above it, not of every file. A path the full scan would
    skip (outside, excluded, ignored) is left to it."""
    seen: list[FileStat] = []
    removed: list[str] = []
    problems: list[Problem] = []
    for rel in relative(root, paths):
        if not _indexable(root, files, rel):
            continue
        unfit = name_problem(rel)
        if unfit is not None:  # what the full scan says of it, never a row the index refuses
            problems.append(Problem(shown(rel), f"{unfit}; {NAME_SKIPPED}"))
            continue
        try:
            st = os.stat(root / rel)
        except FileNotFoundError:
            if rel in known:
                removed.append(rel)
            continue
        except OSError as exc:
            problems.append(Problem(rel, f"cannot stat: {exc.strerror}"))
            continue
        if stat_mode.S_ISREG(st.st_mode):
            seen.append(FileStat(rel, st.st_size, st.st_mtime_ns))
    changed = [f for f in seen if known.get(f.path) != (f.size, f.mtime_ns)]
    return Freshness(seen, changed, removed, problems)


def relative(root: Path, paths: Sequence[str]) -> list[str]:
    """Workspace-relative POSIX forms of ``paths`` (absolute or relative) inside ``root``."""
    real_root = os.path.realpath(root)
    found = set()
    for given in paths:
        if os.path.isabs(given):  # a writer's real path: symlinks resolved
            rel = os.path.relpath(os.path.realpath(given), real_root)
        else:
            rel = os.path.normpath(given)
        rel = rel.replace(os.sep, "/")
        if rel != ".." and not rel.startswith("../"):
            found.add(rel)
    return sorted(found)


def _indexable(root: Path, files: FilesConfig, rel: str) -> bool:
    """Whether the full scan would index ``rel``: selected by ``files``, in no always-skipped
    folder, ignored by no ``.gitignore`` on its way."""
    parts = rel.split("/")
    if not indexed_by(files, rel) or any(part in ALWAYS_SKIPPED for part in parts[:-1]):
        return False
    for depth in range(len(parts)):
        prefix = "".join(part + "/" for part in parts[:depth])
        try:
            lines = (root / prefix / ".gitignore").read_text(errors="replace").splitlines()
        except OSError:
            continue
        import pathspec  # (here: a search with no .gitignore on its way needs none of it)

        if pathspec.GitIgnoreSpec.from_lines(lines).match_file(rel[len(prefix) :]):
            return False
    return True


class PathSyncing(Protocol):
    """What :func:`read_own_writes` needs of an ``IndexBackend``."""

    def generation(self) -> int: ...

    def sync_paths(
        self,
        paths: Sequence[str],
        *,
        embed: bool = True,
        lock_timeout: float = 600.0,
        defer_bytes: int | None = None,
    ) -> SyncReport: ...


def read_own_writes(
    index: PathSyncing,
    caught_up: Callable[[], CaughtUp | None] | None,
    own: OwnWrites | None,
    *,
    embed: bool,
    lock_timeout: float,
    defer_bytes: int | None,
) -> tuple[CaughtUp | None, int | None]:
    """A live watcher's word, and the mark of this workspace's writes no sync has
    indexed yet (None: none), for a search about to run.

    While a watcher says the index caught up, the files this workspace wrote are indexed here,
    by path (a stat of each): the search then trusts the watcher for the rest, with no stat
    of every file. Any sync only brings the index nearer the files, so the watcher's word
    holds at the generation this one leaves. Without a watcher, or when the files written
    are not known or could not be indexed, the mark is returned and the search checks
    every file, as before. The watcher's word stays carried past these syncs for the searches
    after, while no other sync moves the index."""
    word = caught_up() if caught_up is not None else None
    if own is None:
        return word, None
    said = word.generation if word is not None else 0  # the watcher's word as it gave it
    if word is not None:
        carried = own.carried(said)
        if carried is not None and carried == index.generation():
            word = replace(word, generation=carried)  # only our own syncs since its word
    pending = own.pending()
    if pending is None:
        return word, None
    mark, paths = pending
    if word is None or word.generation != index.generation() or paths is None:
        return word, mark
    report = index.sync_paths(
        paths, embed=embed, lock_timeout=lock_timeout, defer_bytes=defer_bytes
    )
    if report.generation is None or report.busy or report.readonly:
        return word, mark
    own.indexed(mark)
    synced = set(report.paths) | {p.path for p in report.problems}
    problems = tuple(p for p in word.problems if p.path not in synced) + tuple(report.problems)
    own.carry(said, report.generation)
    return replace(word, generation=report.generation, problems=problems), None


NEARLY_FULL_BYTES = 1 << 20
"""Less room than this where an index that failed to write lives: the disk is full for it (a
page, its WAL and its ``-shm`` file need more)."""


def unwritable_reason(path: Path, exc: BaseException) -> str:
    """Why the index file ``path`` cannot be written, in words a person can act on. The cause is
    read from the file system as well as from ``exc``: SQLite, once it has reopened a full
    disk's index read-only, says only "attempt to write a readonly database"."""
    if disk_full(exc) or _room(path.parent) < NEARLY_FULL_BYTES:
        cause = "the disk is full (no space left on device); free some space"
    elif _read_only_mount(path.parent):
        cause = "the file system is mounted read-only"
    else:
        cause = str(getattr(exc, "strerror", None) or exc)
    return (
        f"{path} cannot be written: {cause}. Searches answer from the index as it is; it "
        "catches up once it can be written"
    )


def _room(folder: Path) -> float:
    try:
        info = os.statvfs(folder)
    except OSError:
        return float("inf")  # (not known: never say full on a guess)
    return info.f_bavail * info.f_frsize


def _read_only_mount(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def stale_report(report: SyncReport, fresh: Freshness) -> SyncReport:
    """What a search must say when it answers from the index as it is."""
    report.stale = [f.path for f in fresh.changed] + fresh.removed
    report.problems = list(fresh.problems)
    return report


def defer_big(
    changed: list[FileStat], defer_bytes: int, max_bytes: int, report: SyncReport
) -> list[FileStat]:
    """The changed files small enough to index now; the others are reported stale."""
    keep = []
    for stat in changed:
        if stat.size <= defer_bytes or stat.size > max_bytes:
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


def read_batch(
    root: Path,
    batch: list[FileStat],
    known: Mapping[str, str],
    *,
    full: bool,
    max_bytes: int,
    redactor: Redactor,
    report: SyncReport,
) -> tuple[list[FileStat], list[ParsedFile]]:
    """Read and chunk ``batch``. Returns (files whose bytes did not change, only their mtime,
    parsed files). ``known`` maps paths to the content hash the index holds; an unreadable
    file is reported stale and keeps what the index holds."""
    touched: list[FileStat] = []
    parsed: list[ParsedFile] = []
    for stat in batch:
        try:
            data, text = read_markdown(root / stat.path, stat.path, max_bytes)
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
        declared = tuple(relations(doc.entries))
        parsed.append(ParsedFile(stat, digest, chunk_document(doc, redactor), declared))
    return touched, parsed


def _under_any(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


# ---- the pipeline: reading files, the model and the writer at once ---------------------------

FIRST_BATCH_FILES = 8
"""The first batch of files read is small, so the model starts early; batches then double up to
``BATCH_FILES``."""
MODEL_AHEAD = 2
"""Batches of texts handed to the model at once: while it embeds one, the writer stores the
vectors of the one before and the next batch waits ready."""
READ_AHEAD = 2
"""Batches of parsed files the reader keeps ready for the writer: memory stays bounded."""

Missing = list[tuple[str, str]]
"""(text hash, embedded text) of texts with no vector of the model yet."""


@dataclass(frozen=True)
class Writer:
    """What a backend does on the syncing thread (its connection's own), each step in one
    transaction, so a killed process leaves whole steps behind."""

    store_files: Callable[[list[FileStat], list[ParsedFile]], Missing]
    """Store a batch of read files (``touched``: same bytes, new mtime); returns the texts of
    the stored chunks that have no vector (only asked when there is a model)."""
    finish_files: Callable[[], Missing]
    """After the last batch of files: anything left to do with them (removed files); returns
    every text still without a vector, older syncs' included (only asked with a model)."""
    store_vectors: Callable[[list[str], np.ndarray], None]


def file_batches(changed: Sequence[FileStat]) -> Iterator[list[FileStat]]:
    size, start = FIRST_BATCH_FILES, 0
    while start < len(changed):
        yield list(changed[start : start + size])
        start += size
        size = min(size * 2, BATCH_FILES)


def pipeline(
    changed: Sequence[FileStat],
    read: Callable[[list[FileStat], SyncReport], tuple[list[FileStat], list[ParsedFile]]],
    writer: Writer,
    embedder: Embedder | None,
    report: SyncReport,
    progress: Progress | None = None,
) -> int:
    """Index ``changed`` and embed what has no vector; returns the number of texts embedded.

    Three threads, so the model never waits: a reader reads and chunks files a bounded queue
    ahead; the model (torch releases the GIL in its kernels) embeds batches of texts, the
    shortest known first, across files; this thread stores files and vectors in between. An
    error on any thread stops the others and is raised here, as it was raised there."""
    side = SyncReport()  # the reader's problems and stale files, merged at the end
    reader = _Reader(file_batches(changed), lambda batch: read(batch, side))
    model = _Model(embedder) if embedder is not None else None
    pool = _Shortest()
    stored = 0
    try:
        while not reader.finished:
            if model is not None and model.room() and len(pool) >= EMBED_BATCH:
                model.submit(pool.take(EMBED_BATCH))
                continue
            busy = model is not None and not model.room()
            item = reader.next(block=not busy)
            if item is None:  # the model is busy and no files are ready: store its vectors
                _store_oldest(model, writer, pool, progress)
                continue
            if item is _END:
                break
            count, (touched, parsed) = item
            missing = writer.store_files(touched, parsed)
            if model is not None:
                pool.add(missing)
            stored += count
            if progress:
                progress("files", stored, len(changed))
        backlog = writer.finish_files()
        if model is None:
            return 0
        pool.add(backlog)
        while pool or model.waiting():
            if pool and model.room():
                model.submit(pool.take(EMBED_BATCH))
            else:
                _store_oldest(model, writer, pool, progress)
        return model.done
    finally:
        reader.close()
        if model is not None:
            model.close()
        report.problems.extend(side.problems)
        report.stale.extend(side.stale)


def _store_oldest(
    model: _Model | None, writer: Writer, pool: _Shortest, progress: Progress | None
) -> None:
    assert model is not None
    hashes, vectors = model.oldest()
    writer.store_vectors(hashes, vectors)
    if progress:
        progress("embedding", model.done, model.done + model.waiting() + len(pool))


_END = object()


class _Reader:
    """Reads and chunks batches of files on a thread of its own, ``READ_AHEAD`` ahead."""

    def __init__(
        self,
        batches: Iterator[list[FileStat]],
        read: Callable[[list[FileStat]], tuple[list[FileStat], list[ParsedFile]]],
    ) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=READ_AHEAD)
        self._stop = threading.Event()
        self.finished = False
        self._thread = threading.Thread(
            target=self._run, args=(batches, read), name="mdmem-read", daemon=True
        )
        self._thread.start()

    def _run(
        self,
        batches: Iterator[list[FileStat]],
        read: Callable[[list[FileStat]], tuple[list[FileStat], list[ParsedFile]]],
    ) -> None:
        try:
            for batch in batches:
                if not self._put((len(batch), read(batch))):
                    return
        except BaseException as exc:  # raised again on the syncing thread
            self._put(exc)
            return
        self._put(_END)

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def next(self, *, block: bool) -> Any:
        """The next batch read, or ``_END``; None when ``block`` is false and none is ready."""
        try:
            item = self._queue.get(block=block)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        if item is _END:
            self.finished = True
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class _Model:
    """The embedding model on a thread of its own, ``MODEL_AHEAD`` batches at most."""

    def __init__(self, embedder: Embedder) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._embedder = embedder
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mdmem-embed")
        self._queued: deque[tuple[list[str], Future[np.ndarray]]] = deque()
        self.done = 0

    def room(self) -> bool:
        return len(self._queued) < MODEL_AHEAD

    def waiting(self) -> int:
        return sum(len(hashes) for hashes, _ in self._queued)

    def submit(self, part: Missing) -> None:
        texts = [text for _, text in part]
        future = self._pool.submit(self._embedder.embed, texts)
        self._queued.append(([h for h, _ in part], future))

    def oldest(self) -> tuple[list[str], np.ndarray]:
        """The vectors of the oldest batch handed over (waiting for them); an error the model
        raised is raised here."""
        hashes, future = self._queued.popleft()
        vectors = future.result()
        self.done += len(hashes)
        return hashes, vectors

    def close(self) -> None:
        """Waits for the batch the model is on (never two models' runs at once)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class _Shortest:
    """Texts waiting for the model, shortest first; each text once per sync."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, str, str]] = []
        self._seen: set[str] = set()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, missing: Missing) -> None:
        for text_hash, text in missing:
            if text_hash not in self._seen:
                self._seen.add(text_hash)
                heapq.heappush(self._heap, (len(text), text_hash, text))

    def take(self, n: int) -> Missing:
        taken = [heapq.heappop(self._heap) for _ in range(min(n, len(self._heap)))]
        return [(text_hash, text) for _, text_hash, text in taken]
