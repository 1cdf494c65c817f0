"""The chunk layout in memory, kept in step with the index by splicing in only what changed.

Triggers log every chunk written or deleted (by path) and every vector stored (by row id) in
the index's ``changes`` table (``db._v4``). After a change, the next reader reads the log since
the entry it last saw, re-reads only those files' chunks, and splices them into its arrays in
place of the old ones; the vector cache follows the same splice. The cost is a few small
queries plus array copies, not a reread of every chunk (seconds at 100k chunks). Everything is
read in one snapshot, so the layout always equals what a full read would give at that moment.
The layout is read whole on the first call, when the log no longer reaches back far enough,
after a VACUUM, or when many files changed at once.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Sequence

import numpy as np

from mdmem.index.backend import Layout
from mdmem.index.sqlite import read, store
from mdmem.index.sqlite.vector_cache import Span, VectorCache

RELOAD_FILES_SHARE = 0.2
"""Read the layout whole when more than this share of the files changed at once."""
RELOAD_FILES_MIN = 256


class LayoutCache:
    """One connection's layout, texts and vectors, in step with one generation of the index."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.seq = 0
        """The change log's entry this layout includes."""
        self.layout = Layout.build([])
        self.texts: list[str] = []
        """The ``text_hash`` of each position."""
        self.vectors: VectorCache | None = None
        self.loads = 0
        self.splices = 0

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Bring the layout (and vectors) in step with the index. Call inside a snapshot."""
        generation = store.generation(conn)
        if generation == self.generation:
            return
        changes = None if self.generation is None else read.changes_since(conn, self.seq)
        limit = max(RELOAD_FILES_MIN, RELOAD_FILES_SHARE * len(self.layout.file_paths))
        if changes is None or len(changes[1]) > limit:
            self._load(conn)
        else:
            self.seq, paths, stored = changes
            self._splice(conn, paths, stored)
        self.generation = generation

    def vector_cache(self, conn: sqlite3.Connection, model_id: str) -> VectorCache:
        """The vectors of ``model_id``; from now on they follow every splice."""
        self.refresh(conn)
        if self.vectors is None or self.vectors.model_id != model_id:
            self.vectors = VectorCache(model_id)
            self.vectors.update(conn, self.texts)
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
    layout: Layout,
    texts: list[str],
    paths: Sequence[str],
    rows: dict[str, list[read.LayoutRow]],
) -> tuple[Layout, list[str], list[Span]]:
    """The layout with the chunks of ``paths`` (sorted) replaced by ``rows`` (none: the file is
    gone), the texts likewise, and the spans replaced (in the old positions)."""
    n = len(texts)
    starts = layout.file_starts
    files = layout.file_paths
    sizes = np.diff(np.append(starts, n))
    pieces: dict[str, list] = {"rows": [], "texts": [], "paths": [], "sizes": []}
    spans: list[Span] = []
    kept_file = kept = 0
    for path in paths:
        f = bisect.bisect_left(files, path)
        present = f < len(files) and files[f] == path
        start = int(starts[f]) if f < len(files) else n
        stop = start + int(sizes[f]) if present else start
        new = rows.get(path, [])
        pieces["rows"].append(np.arange(kept, start))
        pieces["texts"].append(texts[kept:start])
        pieces["paths"].append(files[kept_file:f])
        pieces["sizes"].append(sizes[kept_file:f])
        pieces["rows"].append(new)
        pieces["texts"].append([r[4] for r in new])
        if new:
            pieces["paths"].append((path,))
            pieces["sizes"].append(np.array([len(new)]))
        spans.append(Span(start, stop, texts[start:stop], [r[4] for r in new]))
        kept, kept_file = stop, f + 1 if present else f
    pieces["rows"].append(np.arange(kept, n))
    pieces["texts"].append(texts[kept:])
    pieces["paths"].append(files[kept_file:])
    pieces["sizes"].append(sizes[kept_file:])
    new_texts = [t for part in pieces["texts"] for t in part]
    file_paths = tuple(p for part in pieces["paths"] for p in part)
    file_sizes = np.concatenate([np.asarray(s, dtype=np.int64) for s in pieces["sizes"]])
    rowids, stream, archived = _columns(layout, pieces["rows"])
    return _arranged(rowids, stream, archived, file_paths, file_sizes), new_texts, spans


def _columns(
    layout: Layout, parts: list[np.ndarray | list[read.LayoutRow]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rowids, stream and archived: kept positions (index arrays) and new rows, in order."""
    rowids, stream, archived = [], [], []
    for part in parts:
        if isinstance(part, np.ndarray):
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
) -> Layout:
    """A layout from its columns and its files' sizes (what ``Layout.build`` derives)."""
    n = len(rowids)
    file_starts = np.concatenate([[0], np.cumsum(file_sizes)[:-1]]).astype(np.int64)
    new_file = np.zeros(n, dtype=bool)
    new_file[file_starts[file_sizes > 0] if n else []] = True
    index = np.arange(n)
    last = np.append(new_file[1:], True) if n else new_file
    return Layout(
        rowids=rowids,
        file_starts=file_starts if n else np.zeros(0, dtype=np.int64),
        file_of=np.cumsum(new_file) - 1,
        file_paths=file_paths,
        prev=np.where(new_file, -1, index - 1),
        next=np.where(last, -1, index + 1),
        stream=stream,
        archived=archived,
        by_rowid=np.argsort(rowids, kind="stable"),
    )
