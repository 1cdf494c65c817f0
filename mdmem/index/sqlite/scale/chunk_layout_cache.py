"""The chunk layout in memory, kept in step with the index by splicing in only what changed.

Why: reading the layout and vectors whole after a change took 1-2 s at 100k chunks; splicing in
one changed file takes p50 2-5 ms, p95 4-16 (``benchmarks/absorb.py``).

Triggers log every chunk written or deleted (by path) and every vector stored (by row id) in the
index's ``changes`` table (``db._v4``). After a change, the next reader reads the log since the
entry it last saw, re-reads only those files' chunks, and splices them into its arrays in place
of the old ones; the vector cache follows the same splice. The cost is a few small queries plus
array copies, not a reread of every chunk. Everything is read in one snapshot, so the layout
always equals what a full read would give at that moment. The layout is read whole on the first
call, when the log no longer reaches back far enough, after a VACUUM, or when many files changed
at once.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Sequence

import numpy as np

from mdmem.index.backend import ChunkLayout
from mdmem.index.sqlite import read, sqlite_writes
from mdmem.index.sqlite.scale.float16_vectors import VectorChoice, Vectors
from mdmem.index.sqlite.scale.vector_cache import Span, VectorCache

RELOAD_FILES_SHARE = 0.2
"""Read the layout whole when more than this share of the files changed at once."""
RELOAD_FILES_MIN = 256


class ChunkLayoutCache:
    """One connection's layout, texts and vectors, in step with one generation of the index."""

    def __init__(self, choice: VectorChoice | None = None) -> None:
        """``choice``: the float16 store for large layouts (none: always the float32 cache)."""
        self.choice = choice
        self.generation: int | None = None
        self.seq = 0
        """The change log's entry this layout includes."""
        self.layout = ChunkLayout.build([])
        self.texts: list[str] = []
        """The ``text_hash`` of each position."""
        self.vectors: Vectors | None = None
        self.loads = 0
        self.splices = 0

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Bring the layout (and vectors) in step with the index. Call inside a snapshot."""
        generation = sqlite_writes.generation(conn)
        if generation == self.generation:
            return
        changes = None if self.generation is None else read.changes_since(conn, self.seq)
        limit = max(RELOAD_FILES_MIN, RELOAD_FILES_SHARE * len(self.layout.file_paths))
        if changes is None or len(changes[1]) > limit:
            self._load(conn)
        else:
            try:
                self._splice(conn, changes[1], changes[2])
            except BaseException:
                self.generation = None  # half spliced: the next call reads it whole
                raise
            self.seq = changes[0]
        self.generation = generation

    def vector_cache(self, conn: sqlite3.Connection, model_id: str) -> Vectors:
        """The vectors of ``model_id``; from now on they follow every splice."""
        self.refresh(conn)
        n = len(self.texts)
        if (
            self.vectors is None
            or self.vectors.model_id != model_id
            or (self.choice is not None and not self.choice.fits(self.vectors, n))
        ):
            self.vectors = None  # the old one's memory goes before the new one is read
            made = self.choice.make(model_id, n) if self.choice else VectorCache(model_id)
            made.update(conn, self.texts)
            self.vectors = made
        return self.vectors

    def _load(self, conn: sqlite3.Connection) -> None:
        self.seq = read.last_change(conn)
        self.layout, self.texts = read.layout_and_texts(conn)
        if self.vectors is not None:
            self.vectors.update(conn, self.texts)
        self.loads += 1

    def _splice(self, conn: sqlite3.Connection, paths: list[str], stored: list[int]) -> None:
        spans: list[Span] = []
        if paths:
            rows = read.layout_rows_of(conn, paths)
            self.layout, self.texts, spans = spliced(self.layout, self.texts, paths, rows)
            self.splices += 1
        if self.vectors is not None and (spans or stored):
            self.vectors.splice(conn, spans, stored)


def spliced(
    layout: ChunkLayout,
    texts: list[str],
    paths: Sequence[str],
    rows: dict[str, list[read.ChunkLayoutRow]],
) -> tuple[ChunkLayout, list[str], list[Span]]:
    """The layout with the chunks of ``paths`` (sorted) replaced by ``rows`` (none: the file is
    gone), and the spans replaced (in the old positions). ``texts`` is changed in place to
    follow (slice assignments: a memmove, not a copy of every reference)."""
    n = len(texts)
    starts = layout.file_starts
    files = layout.file_paths
    sizes = np.diff(np.append(starts, n))
    parts: list[slice | list[read.ChunkLayoutRow]] = []
    file_parts: list[tuple[slice, tuple[str, ...], list[int]]] = []
    spans: list[Span] = []
    kept_file = kept = 0
    for path in paths:
        f = bisect.bisect_left(files, path)
        present = f < len(files) and files[f] == path
        start = int(starts[f]) if f < len(files) else n
        stop = start + int(sizes[f]) if present else start
        new = rows.get(path, [])
        parts += [slice(kept, start), new]
        file_parts.append((slice(kept_file, f), (path,) if new else (), [len(new)] if new else []))
        spans.append(Span(start, stop, texts[start:stop], [r[4] for r in new]))
        kept, kept_file = stop, f + 1 if present else f
    parts.append(slice(kept, n))
    for span in reversed(spans):
        texts[span.start : span.stop] = span.added
    file_paths: list[str] = []
    file_sizes: list[np.ndarray] = []
    for kept_files, path_new, size_new in file_parts:
        file_paths.extend(files[kept_files])
        file_paths.extend(path_new)
        file_sizes += [sizes[kept_files], np.array(size_new, dtype=np.int64)]
    file_paths.extend(files[kept_file:])
    file_sizes.append(sizes[kept_file:])
    rowids, stream, archived = _columns(layout, parts)
    arranged = _arranged(rowids, stream, archived, tuple(file_paths), np.concatenate(file_sizes))
    return arranged, texts, spans


def _columns(
    layout: ChunkLayout, parts: list[slice | list[read.ChunkLayoutRow]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rowids, stream and archived: kept positions (slices) and new rows, in order."""
    rowids, stream, archived = [], [], []
    for part in parts:
        if isinstance(part, slice):
            rowids.append(layout.rowids[part])
            stream.append(layout.stream[part])
            archived.append(layout.archived[part])
        else:
            rowids.append(np.array([r[0] for r in part], dtype=np.int64))
            stream.append(np.array([bool(r[2]) for r in part], dtype=bool))
            archived.append(np.array([bool(r[3]) for r in part], dtype=bool))
    return np.concatenate(rowids), np.concatenate(stream), np.concatenate(archived)


def _arranged(
    rowids: np.ndarray,
    stream: np.ndarray,
    archived: np.ndarray,
    file_paths: tuple[str, ...],
    file_sizes: np.ndarray,
) -> ChunkLayout:
    """A layout from its columns and its files' sizes (what ``ChunkLayout.build`` derives)."""
    n = len(rowids)
    ends = np.cumsum(file_sizes, dtype=np.int64)
    file_starts = ends - file_sizes
    prev = np.arange(-1, n - 1, dtype=np.int64)
    prev[file_starts] = -1
    nxt = np.arange(1, n + 1, dtype=np.int64)
    nxt[ends - 1] = -1
    return ChunkLayout(
        rowids=rowids,
        file_starts=file_starts,
        file_of=np.repeat(np.arange(len(file_sizes), dtype=np.int64), file_sizes),
        file_paths=file_paths,
        prev=prev,
        next=nxt,
        stream=stream,
        archived=archived,
        by_rowid=np.argsort(rowids, kind="stable"),
    )
