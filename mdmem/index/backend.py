"""What an index backend does, and the values it hands to ranking.

The backend stores chunks, vectors and counters and generates candidates; ranking
(:mod:`mdmem.index.search`) fuses and reranks them without knowing where they came from.
Chunking, embedding and keyword tokenization are shared by every backend. SQLite
(:mod:`mdmem.index.sqlite`) is the embedded default; PostgreSQL (:mod:`mdmem.index.postgres`)
is a sibling package implementing this same protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    from mdmem.index.embed import Embedder
    from mdmem.index.filters import Filters
    from mdmem.index.sync import Freshness, Progress, SyncReport

T = TypeVar("T")


@dataclass(frozen=True)
class ChunkLayout:
    """Every chunk in file order, as arrays: what whole-index scoring needs, without a query
    language. Positions (0..n-1) in these arrays are how candidates name chunks."""

    rowids: np.ndarray
    """Chunk ids (the backend's integer row ids) ordered by (path, start_line)."""
    file_starts: np.ndarray
    """Index of the first chunk of each file (for per-file maxima with ``reduceat``)."""
    file_of: np.ndarray
    """For each chunk, the number of its file in ``file_starts``."""
    file_paths: tuple[str, ...]
    """The path of each file in ``file_starts``."""
    prev: np.ndarray
    """Index of the previous chunk in the same file, or -1."""
    next: np.ndarray
    """Index of the next chunk in the same file, or -1."""
    stream: np.ndarray
    """True for chunks of event streams (session files), where neighbours share a topic."""
    archived: np.ndarray
    by_rowid: np.ndarray
    """argsort of ``rowids``: with ``np.searchsorted`` it maps rowids to positions."""

    @cached_property
    def stream_files(self) -> np.ndarray:
        """For each file in ``file_starts``, whether it holds an event-stream chunk (whose
        score the rest of the file lifts): computed once per layout, not per search."""
        if not len(self.file_starts):
            return np.zeros(0, dtype=bool)
        return np.logical_or.reduceat(self.stream, self.file_starts)

    @cached_property
    def sorted_rowids(self) -> np.ndarray:
        """``rowids`` in ascending order, kept per layout: at 1M chunks sorting them again for
        each lookup cost a millisecond or two, several times a search."""
        return self.rowids[self.by_rowid]

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        return self.by_rowid[np.searchsorted(self.sorted_rowids, rowids)]

    def mask(self, rowids: np.ndarray) -> np.ndarray:
        """True at the positions of these rowids, False elsewhere."""
        mask = np.zeros(len(self.rowids), dtype=bool)
        if rowids.size:
            mask[self.positions(rowids)] = True
        return mask

    def allowed(self, filters: Filters, filtered: Callable[[], np.ndarray]) -> np.ndarray:
        """Which chunks ``filters`` let through: the stored columns by ``filtered`` (the
        backend's, called only when such a filter is set), the path glob here, once per file."""
        if filters.on_columns():
            mask = filtered()
        elif filters.include_archived:
            mask = np.ones(len(self.rowids), dtype=bool)
        else:
            mask = ~self.archived
        if filters.path is not None:
            files_ok = np.fromiter(
                (filters.path_ok(p) for p in self.file_paths), bool, len(self.file_paths)
            )
            mask = mask & files_ok[self.file_of]
        return mask

    @classmethod
    def build(cls, rows: Sequence[tuple[int, str, bool, bool]]) -> ChunkLayout:
        """From (rowid, path, is_stream, archived) rows already in (path, start_line) order."""
        n = len(rows)
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        paths = [r[1] for r in rows]
        new_file = np.array([i == 0 or paths[i] != paths[i - 1] for i in range(n)], dtype=bool)
        file_starts = np.flatnonzero(new_file)
        index = np.arange(n)
        last = np.append(new_file[1:], True) if n else new_file
        return cls(
            rowids=rowids,
            file_starts=file_starts,
            file_of=np.cumsum(new_file) - 1,
            file_paths=tuple(paths[i] for i in file_starts),
            prev=np.where(new_file, -1, index - 1),
            next=np.where(last, -1, index + 1),
            stream=np.fromiter((bool(r[2]) for r in rows), dtype=bool, count=n),
            archived=np.fromiter((bool(r[3]) for r in rows), dtype=bool, count=n),
            by_rowid=np.argsort(rowids, kind="stable"),
        )


@dataclass(frozen=True)
class Scored:
    """Candidate scores from one retriever (higher is better), by layout position."""

    positions: np.ndarray | None
    """Positions the scores belong to; None when ``scores`` covers every chunk in order."""
    scores: np.ndarray

    def dense(self, n: int) -> np.ndarray:
        """The scores of all ``n`` chunks (0 for chunks that are not candidates)."""
        if self.positions is None:
            return self.scores.astype(np.float64, copy=False)
        out = np.zeros(n)
        out[self.positions] = self.scores
        return out

    def found(self, n: int) -> np.ndarray:
        """True for the chunks that are candidates."""
        if self.positions is None:
            return np.ones(n, dtype=bool)
        mask = np.zeros(n, dtype=bool)
        mask[self.positions] = True
        return mask


class VectorScan(Protocol):
    """One vector search in two halves, so that its costly half can run on a second thread
    while the keyword search runs on the connection's thread (torch, faiss, numpy and SQLite
    release the GIL): :meth:`scan` touches no database connection; :meth:`scored` runs after
    it, on the connection's thread, and may also score the keyword candidates exactly. The
    caller holds the index's search lock and read snapshot throughout, so no sync changes the
    layout or vectors while :meth:`scan` runs."""

    def scan(self, query: np.ndarray) -> None:
        """Compare ``query`` (a unit vector) with the stored vectors."""
        ...

    def scored(self, keyword: Scored | None) -> Scored | None:
        """Cosine similarities of the candidates (every chunk, or the nearest and
        ``keyword``'s); None when the index holds no vectors of the query's size."""
        ...


def vector_candidates(
    index: IndexBackend,
    model_id: str,
    query: np.ndarray,
    *,
    filters: Filters | None = None,
    keyword: Scored | None = None,
) -> Scored | None:
    """A whole vector search on this thread."""
    scan = index.vector_scan(model_id, filters=filters)
    scan.scan(query)
    return scan.scored(keyword)


@dataclass(frozen=True)
class ChunkRow:
    """What ranking and a hit need of one stored chunk."""

    rowid: int
    id: str
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    kind: str
    type: str
    importance: float
    created: str | None
    entry_id: str | None
    agent: str | None
    session: str | None


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
    generation: int | None = None
    """A shared index (PostgreSQL): its generation, which each search hit carries too."""

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class Forgotten:
    """What :meth:`IndexBackend.forget` removed."""

    rows: int
    """Chunks deleted (beyond those the re-sync replaced)."""
    vectors: int
    truncated: bool
    """Whether no copy is left in a write-ahead log (False: a reader kept it; it goes at the
    next checkpoint)."""


class IndexReader(Protocol):
    """What ranking reads of an index: an :class:`IndexBackend`, or a remote reader's view
    over one pooled connection (which neither syncs nor owns the index)."""

    def reading(self) -> AbstractContextManager[None]:
        """One consistent view for a whole ranking: layout, candidates and rows agree."""
        ...

    def generation(self) -> int:
        """Changes whenever the chunks or vectors change (caches are keyed by it)."""
        ...

    def layout(self) -> ChunkLayout: ...

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        """Up to ``limit`` best keyword (BM25-like) matches of the user's ``query``."""
        ...

    def vector_scan(self, model_id: str, *, filters: Filters | None = None) -> VectorScan:
        """A search of ``model_id``'s vectors, prepared on this thread (the connection's).
        A backend that returns only the nearest chunks takes them among those that pass
        ``filters``."""
        ...

    def filtered(self, filters: Filters) -> np.ndarray:
        """Boolean mask over the layout: chunks that pass the stored-column filters (type,
        agent, session, dates, archived). The path glob is applied by ranking."""
        ...

    def chunk_rows(self, rowids: Sequence[int]) -> dict[int, ChunkRow]: ...

    def access_counts(self, keys: Sequence[str]) -> dict[str, int]: ...

    def bump_access(self, keys: Sequence[str], *, wait_s: float | None = None) -> bool:
        """Count one more access of each key; best effort (a read-only index skips it: False).
        ``wait_s`` bounds the wait for another writer (a read never waits on a sync)."""
        ...

    def access_since(self) -> str | None:
        """When this index began counting accesses (ISO time; None: it does not say). A key
        with no count was not returned since then."""
        ...


class IndexBackend(IndexReader, Protocol):
    """One workspace's index. Every method is safe to call from one thread at a time while
    holding :meth:`searching`; other processes may read and write the same index."""

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
        Never waits longer than ``lock_timeout`` for another writer (then ``busy``)."""
        ...

    def sync_paths(
        self,
        paths: Sequence[str],
        *,
        embed: bool = True,
        lock_timeout: float = 600.0,
        defer_bytes: int | None = None,
    ) -> SyncReport:
        """:meth:`sync` for these files only (absolute, or relative to the workspace): a
        stat of each, not of every file. What a workspace does after its own writes while a
        watcher says the rest caught up."""
        ...

    def recover(self, op: Callable[[], T]) -> T:
        """Run ``op``; when the store turns out damaged or replaced, repair it and run once
        more."""
        ...

    def searching(self) -> AbstractContextManager[object]:
        """Held while one thread syncs and searches."""
        ...

    def embedder(self) -> Embedder | None: ...

    def status(self, model_id: str | None) -> IndexStatus: ...

    def freshness(self) -> Freshness:
        """The cheap check: every file's mtime and size against what the index holds."""
        ...

    def forget(self, entry_ids: Collection[str], texts: Sequence[str]) -> Forgotten:
        """Re-sync, then remove every row, vector, access count and first-seen date of these
        entries and texts, leaving no copy in the store's files."""
        ...

    def close(self) -> None: ...
