"""The vectors of one model in memory, kept in step with the index by content, not reloaded.

Why: after a change it reads only the texts it has not seen, where a reload read every vector
(part of the 1-2 s a full read took at 100k chunks, against the splice's p50 2-5 ms:
``benchmarks/absorb.py``).

Each distinct chunk text (its ``text_hash``) in the layout has a slot in one float32 matrix (a
row of zeros until its vector is stored: it scores 0), and the layout's positions map to slots.
After a change the layout's splice (``chunk_layout_cache.py``) tells the cache which positions
were replaced by which texts: only texts not seen before are read from SQLite, and a text no
position holds any more has its slot zeroed and reused, so a forgotten vector does not linger in
memory. Keyed by content, not by row id: a row id SQLite reuses, or a row whose text is
rewritten in place, can never keep an old vector. The matrix is read whole only on the first
load, for a new model, or when most of it would change.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mdmem.index.backend import Scored
from mdmem.index.sqlite import read
from mdmem.index.sqlite.scale.cosine import cosines

RELOAD_SHARE = 0.25
"""Read everything at once when more than this share of the texts is new to the cache."""
HEADROOM = 0.125
"""Spare slots, as a share of those used, allocated with the matrix: a new text rarely makes it
copy the whole matrix (150 MB at 100k chunks) to grow."""
COMPACT_MIN_SLOTS = 1024
"""Freed slots are squeezed out (in memory) once they outnumber the used ones, above this."""


@dataclass(frozen=True)
class Span:
    """Layout positions ``start:stop`` (before the change) now hold the texts ``added``."""

    start: int
    stop: int
    removed: list[str]
    """The texts those positions held."""
    added: list[str]


class VectorCache:
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.matrix = np.zeros((1, 0), dtype=np.float32)
        """Slots × dimensions (0 columns until a first vector is read); slot 0 is unused."""
        self.used = 1
        self.slot_of: dict[str, int] = {}
        self.refs: dict[str, int] = {}
        """How many layout positions hold each text (a text may recur in several files)."""
        self.missing: set[str] = set()
        """Texts in the layout with no vector of this model yet."""
        self.free: list[int] = []
        self.order = np.zeros(0, dtype=np.int64)
        """The slot of each layout position."""
        self.reads = 0
        """Vectors read from SQLite so far (how much each update cost)."""

    def update(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> None:
        """In step with a layout whose positions hold these texts, in this order (the whole
        layout: its first load, or a reload)."""
        refs = Counter(hashes)
        new = refs.keys() - self.slot_of.keys()
        if not self.slot_of or len(new) > RELOAD_SHARE * len(refs):
            self._reset()
            self._claim(refs)
            self._fill(r for r in read.all_vectors(conn, self.model_id) if r[0] in refs)
        else:
            for text_hash in self.slot_of.keys() - refs.keys():
                self._release(text_hash)
            self._claim(sorted(new))
            self._fill(read.vectors_of(conn, self.model_id, sorted(self.missing)))
        self.refs = dict(refs)
        slot_of = self.slot_of
        self.order = np.fromiter((slot_of[h] for h in hashes), dtype=np.int64, count=len(hashes))

    def splice(
        self, conn: sqlite3.Connection, spans: Sequence[Span], stored: Sequence[int]
    ) -> None:
        """Follow a layout splice; ``stored``: row ids of vectors stored since (any model)."""
        fresh: list[str] = []
        for span in spans:  # claim before releasing: a text moved between files stays
            for text_hash in span.added:
                if text_hash in self.refs:
                    self.refs[text_hash] += 1
                else:
                    self.refs[text_hash] = 1
                    fresh.append(text_hash)
        self._claim(fresh)
        if fresh:
            self._fill(read.vectors_of(conn, self.model_id, fresh))
        self._fill(read.vectors_stored(conn, self.model_id, stored, self.missing))
        self.order = self._spliced_order(spans)
        for span in spans:
            for text_hash in span.removed:
                self.refs[text_hash] -= 1
                if not self.refs[text_hash]:
                    del self.refs[text_hash]
                    self._release(text_hash)
        if len(self.free) > max(COMPACT_MIN_SLOTS, self.used // 2):
            self._compact()

    def scores(self, query: np.ndarray) -> np.ndarray | None:
        """Cosine of every layout position to ``query`` (unit vectors); None when the cache
        holds no vectors of that size."""
        if self.matrix.shape[1] != query.shape[0]:
            return None
        return cosines(self.matrix[: self.used], query)[self.order]

    def layout_matrix(self) -> np.ndarray:
        """All vectors in layout order, zeros where a text has none (a copy)."""
        if self.matrix.shape[1] == 0:
            return np.zeros((len(self.order), 1), dtype=np.float32)
        return self.matrix[self.order]

    def _spliced_order(self, spans: Sequence[Span]) -> np.ndarray:
        slot_of = self.slot_of
        pieces: list[np.ndarray] = []
        kept = 0
        for span in spans:
            pieces.append(self.order[kept : span.start])
            pieces.append(np.fromiter((slot_of[h] for h in span.added), np.int64, len(span.added)))
            kept = span.stop
        pieces.append(self.order[kept:])
        return np.concatenate(pieces)

    def _reset(self) -> None:
        self.matrix = np.zeros((1, self.matrix.shape[1]), dtype=np.float32)
        self.used = 1
        self.slot_of = {}
        self.refs = {}
        self.missing = set()
        self.free = []

    def _claim(self, hashes: Iterable[str]) -> None:
        """A slot of zeros for each of these texts (new to the cache), until its vector is read."""
        hashes = list(hashes)
        reused = self.free[-len(hashes) :] if hashes and self.free else []
        del self.free[len(self.free) - len(reused) :]
        fresh = len(hashes) - len(reused)
        if self.used + fresh > len(self.matrix):
            size = int((self.used + fresh) * (1 + HEADROOM)) + 64
            grown = np.zeros((size, self.matrix.shape[1]), dtype=np.float32)
            grown[: self.used] = self.matrix[: self.used]
            self.matrix = grown
        slots = [*reused, *range(self.used, self.used + fresh)]
        self.used += fresh
        self.slot_of.update(zip(hashes, slots, strict=True))
        self.missing.update(hashes)

    def _fill(self, rows: Iterable[tuple[str, bytes]]) -> None:
        """Store the vectors of texts still missing one (rows of others are ignored)."""
        wanted = [r for r in rows if r[0] in self.missing]
        if not wanted:
            return
        self.reads += len(wanted)
        found = np.frombuffer(b"".join(r[1] for r in wanted), dtype=np.float32)
        found = found.reshape(len(wanted), -1)
        if self.matrix.shape[1] != found.shape[1]:  # the first vectors: now the size is known
            self.matrix = np.zeros((len(self.matrix), found.shape[1]), dtype=np.float32)
        self.matrix[[self.slot_of[h] for h, _ in wanted]] = found
        self.missing.difference_update(h for h, _ in wanted)

    def _release(self, text_hash: str) -> None:
        slot = self.slot_of.pop(text_hash)
        self.matrix[slot] = 0.0
        self.free.append(slot)
        self.missing.discard(text_hash)

    def _compact(self) -> None:
        """Squeeze the freed slots out, in memory (nothing is read again)."""
        hashes = list(self.slot_of)
        old = np.fromiter((self.slot_of[h] for h in hashes), np.int64, len(hashes))
        remap = np.zeros(self.used, dtype=np.int64)
        remap[old] = np.arange(1, len(hashes) + 1)
        size = int((len(hashes) + 1) * (1 + HEADROOM)) + 64
        matrix = np.zeros((size, self.matrix.shape[1]), dtype=np.float32)
        matrix[1 : len(hashes) + 1] = self.matrix[old]
        self.matrix, self.used, self.free = matrix, len(hashes) + 1, []
        self.slot_of = dict(zip(hashes, range(1, len(hashes) + 1), strict=True))
        self.order = remap[self.order]


class ExactScan:
    """A :class:`~mdmem.index.backend.VectorScan` of the float32 matrix: every position's
    cosine, all computed in :meth:`scan`."""

    def __init__(self, cache: VectorCache) -> None:
        self._cache = cache
        self._scores: np.ndarray | None = None

    def scan(self, query: np.ndarray) -> None:
        self._scores = self._cache.scores(query)

    def scored(self, keyword: Scored | None) -> Scored | None:
        return None if self._scores is None else Scored(None, self._scores)
