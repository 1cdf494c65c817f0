"""The vectors of one model in memory, kept in step with the index by content, not reloaded.

Each distinct chunk text (its ``text_hash``) has a slot in one float32 matrix, and the layout's
positions map to slots. After a change only the texts not seen before are read from SQLite (a
changed file: a few rows), and the slots of texts no longer in the index are zeroed and reused,
so a forgotten vector does not linger in memory. Keyed by content, not by row id: a row id
SQLite reuses, or a row whose text is rewritten in place, can never keep an old vector. The
matrix is read whole only when most of it would change (the first load, a new model, a big
sync) or when freed slots outnumber used ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from mdmem.index.sqlite import read

ZERO_SLOT = 0
"""Slot 0 stays all zeros: positions whose text has no vector (yet) score 0."""
RELOAD_SHARE = 0.25
"""Read everything at once when more than this share of the texts is new to the cache."""


class VectorCache:
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.matrix = np.zeros((1, 0), dtype=np.float32)
        """Slots × dimensions; only the first ``used`` rows are slots."""
        self.used = 1
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.order = np.zeros(0, dtype=np.int64)
        """The slot of each layout position."""
        self.reads = 0
        """Texts read from SQLite so far (how much each update cost)."""

    def update(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> None:
        """In step with a layout whose positions hold these texts, in this order."""
        wanted = set(hashes)
        new = wanted.difference(self.slot_of)
        gone = self.slot_of.keys() - wanted
        if len(new) > RELOAD_SHARE * len(wanted) or len(self.free) + len(gone) > self.used // 2:
            self._reset()
            self._put([r for r in read.all_vectors(conn, self.model_id) if r[0] in wanted])
        else:
            for text_hash in gone:
                slot = self.slot_of.pop(text_hash)
                self.matrix[slot] = 0.0
                self.free.append(slot)
            if new:
                self._put(read.vectors_of(conn, self.model_id, sorted(new)))
        slot_of = self.slot_of
        self.order = np.fromiter(
            (slot_of.get(h, ZERO_SLOT) for h in hashes), dtype=np.int64, count=len(hashes)
        )

    def scores(self, query: np.ndarray) -> np.ndarray | None:
        """Cosine of every layout position to ``query`` (unit vectors); None when the cache
        holds no vectors of that size."""
        if self.matrix.shape[1] != query.shape[0]:
            return None
        return (self.matrix[: self.used] @ query)[self.order]

    def layout_matrix(self) -> np.ndarray:
        """All vectors in layout order, zeros where a text has none (a copy)."""
        if self.matrix.shape[1] == 0:
            return np.zeros((len(self.order), 1), dtype=np.float32)
        return self.matrix[self.order]

    def _reset(self) -> None:
        self.matrix = np.zeros((1, self.matrix.shape[1]), dtype=np.float32)
        self.used = 1
        self.slot_of = {}
        self.free = []

    def _put(self, rows: list[tuple[str, bytes]]) -> None:
        if not rows:
            return
        self.reads += len(rows)
        found = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        found = found.reshape(len(rows), -1)
        if self.matrix.shape[1] != found.shape[1]:  # the first vectors: now the size is known
            self._reset()
            self.matrix = np.zeros((1 + len(rows), found.shape[1]), dtype=np.float32)
        reused = self.free[-len(rows) :] if self.free else []
        del self.free[len(self.free) - len(reused) :]
        fresh = len(rows) - len(reused)
        if self.used + fresh > len(self.matrix):
            grown = np.zeros((max(2 * len(self.matrix), self.used + fresh), found.shape[1]),
                             dtype=np.float32)  # fmt: skip
            grown[: self.used] = self.matrix[: self.used]
            self.matrix = grown
        slots = [*reused, *range(self.used, self.used + fresh)]
        self.used += fresh
        self.matrix[slots] = found
        for (text_hash, _), slot in zip(rows, slots, strict=True):
            self.slot_of[text_hash] = slot
