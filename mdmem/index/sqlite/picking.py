"""The nearest vectors of a large layout, picked by faiss's fast scan, and the positions a search
then scores exactly: shared by the float32 cache (from ``FAST_SCAN_FROM`` texts) and the compact
store (README, "Vectors at 1M chunks").

A search takes the ``NEAREST`` best slots (a slot holds one text's vector) among the allowed
ones, every slot the fast-scan copy does not hold as it is now, and the keyword candidates, with
the neighbours of all of them: their exact cosines are what fusion sees. Every other chunk
scores 0 for the vector side, where an exhaustive scan gives it a cosine that cannot rank.

The copy (``scanner``) holds each vector product-quantized to 4 bits per pair of dimensions,
which faiss's fast-scan kernel scans from SIMD registers: at 1M chunks 4 ms a query against 34
for float16 codes, and its best 2,000 held all of the exact top 10 for 300 random queries. Its
order is approximate, so it picks ``FAST_NEAREST`` times as many slots as a search keeps.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mdmem.index.backend import Layout, Scored
from mdmem.index.filters import Filters

if TYPE_CHECKING:
    import faiss

NEAREST = 1000
"""Slots a search keeps from the scan (the fused pool is ``search.candidates``, 100)."""
FAST_SCAN_FROM = 50_000
"""Slots from which the copy is built (below, an exhaustive scan takes about 2-3 ms)."""
FAST_NEAREST = 2
"""The copy picks this many times ``nearest`` slots: its order is approximate."""
SCAN_SAMPLE = 16 * 256
"""Vectors the copy's codebooks are trained on: faiss's k-means keeps at most 256 points per
centroid, and each of its codebooks has 16."""
BATCH = 16384
"""Vectors encoded per step while the copy is built (memory stays flat)."""


def load_faiss() -> Any:
    """faiss, imported on first use only (``mdmem --help`` never pays for it), on one thread
    in the thread that imports it."""
    import faiss

    one_faiss_thread(faiss)
    return faiss


def one_faiss_thread(faiss: Any) -> None:
    """faiss on one thread, set by each thread that searches (OpenMP keeps the setting per
    thread, and a search scans on a thread of its own): with the model loaded in the same
    process, its two OpenMP threads made a search's vector part take 2.4 times the CPU and
    2.2 times the wall time at 100k chunks (43.8 against 18.1 ms of CPU), and 1.6 times at
    1M (README, "Speed and memory")."""
    faiss.omp_set_num_threads(1)


@functools.cache
def has_faiss() -> bool:
    try:
        load_faiss()
    except ImportError:
        return False
    return True


def usable_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def fast_scan_copy(
    faiss: Any,
    dim: int,
    slots: int,
    vectors: Callable[[slice], np.ndarray],
    trained: faiss.IndexPQFastScan | None = None,
) -> faiss.IndexPQFastScan | None:
    """The copy of ``slots`` vectors (``vectors(part)``: float32 rows of that slice), codebooks
    trained on a sample: 5-6 s on two cores and 96 MB at 1M, 1.1 s at 100k. None for an odd
    size. ``trained``: an older copy whose codebooks are kept (emptied and refilled: 0.4 s of
    the 1.1 at 100k)."""
    if dim % 2:
        return None
    faiss.omp_set_num_threads(usable_cores())  # at 1M: 10.8 s on one core, 5.3 on two
    try:
        if trained is not None and trained.d == dim:
            scanner = trained
            scanner.reset()
        else:
            scanner = faiss.IndexPQFastScan(dim, dim // 2, 4, faiss.METRIC_INNER_PRODUCT)
            sample = vectors(slice(0, slots, max(1, slots // SCAN_SAMPLE)))
            scanner.train(np.ascontiguousarray(sample))
        for start in range(0, slots, BATCH):
            scanner.add(np.ascontiguousarray(vectors(slice(start, min(start + BATCH, slots)))))
    finally:
        one_faiss_thread(faiss)
    return scanner


def picked(
    scanner: faiss.IndexPQFastScan | None, query: np.ndarray, ok: np.ndarray, k: int
) -> np.ndarray | None:
    """The copy's nearest ``ok`` slots (``ok``: one flag per slot it holds), ``FAST_NEAREST *
    k`` of them in approximate order; None where an exact scan must decide: no copy, or a mask
    that hides more than half the slots or the ones nearest the query (the fast scan takes no
    selector, so it asks for more and drops the rest)."""
    if scanner is None or not k:
        return None
    slots = len(ok)
    alive = int(np.count_nonzero(ok))
    if 2 * alive < slots:
        return None
    wanted = FAST_NEAREST * k
    if alive < slots:
        wanted = -(-wanted * slots // alive) + k
    _, found = scanner.search(query[None, :], min(wanted, slots))
    found = found[0]
    found = found[found >= 0]
    if alive < slots:
        found = found[ok[found]]
    if len(found) < min(FAST_NEAREST * k, alive):
        return None
    return found[: FAST_NEAREST * k]


def allowed_slots(order: np.ndarray, allowed: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Slots held by a live position ``allowed`` keeps (``alive``: held by any position)."""
    if allowed.all():
        return alive
    ok = np.zeros(len(alive), dtype=bool)
    held = order[allowed]
    ok[held[held < len(alive)]] = True
    return ok & alive


@dataclass(frozen=True)
class Inverse:
    """From slots back to layout positions, kept until the layout changes so that a search
    never goes over the whole layout."""

    first: np.ndarray
    """A position holding each slot."""
    held: np.ndarray
    """Whether any position holds the slot."""
    many: np.ndarray
    """Whether several positions hold the slot (a text that recurs)."""
    shared: np.ndarray
    """The positions of those slots."""
    always: np.ndarray
    """Positions whose slot every search scores: vectors the scan does not hold as they are."""

    @classmethod
    def of(cls, order: np.ndarray, slots: int, always: np.ndarray) -> Inverse:
        """``always``: one flag per slot."""
        first = np.zeros(slots, dtype=np.int64)
        first[order] = np.arange(len(order))
        held = np.bincount(order, minlength=slots)
        many = held > 1
        shared, kept = np.flatnonzero(many[order]), np.flatnonzero(always[order])
        return cls(first, held > 0, many, shared, kept)

    def positions(self, found: np.ndarray, order: np.ndarray) -> np.ndarray:
        """The positions of the ``found`` slots and of the slots always scored."""
        positions = [self.first[found], self.always]
        held = found[self.many[found]]
        if held.size:  # texts several chunks hold: every position of each
            positions.append(self.shared[np.isin(order[self.shared], held)])
        return np.concatenate(positions)


class Picker(Protocol):
    """What :class:`NearestScan` needs of the vectors it scans."""

    def inverse(self) -> Inverse: ...

    def nearest(
        self, query: np.ndarray, allowed: np.ndarray | None, nearest: int = NEAREST
    ) -> np.ndarray | None: ...

    def slot_cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray: ...

    @property
    def order(self) -> np.ndarray: ...


def around(picker: Picker, query: np.ndarray, found: np.ndarray, layout: Layout) -> Scored:
    """The positions of the ``found`` slots, of those always scored, and their neighbours,
    with their cosines."""
    near = with_neighbours(picker.inverse().positions(found, picker.order), layout)
    return Scored(near, picker.slot_cosines(query, near))


def with_also(
    picker: Picker, query: np.ndarray, near: Scored, layout: Layout, also: np.ndarray
) -> Scored:
    """``near`` (from :func:`around`) and the cosines of ``also`` (the keyword candidates) and
    their neighbours."""
    assert near.positions is not None
    more = with_neighbours(also.astype(np.int64, copy=False), layout)
    more = more[~np.isin(more, near.positions, assume_unique=True)]
    if not more.size:
        return near
    positions = np.concatenate([near.positions, more])
    scores = np.concatenate([near.scores, picker.slot_cosines(query, more)])
    order = np.argsort(positions, kind="stable")
    return Scored(positions[order], scores[order])


def with_neighbours(positions: np.ndarray, layout: Layout) -> np.ndarray:
    """These positions and the chunks before and after each, sorted, once each."""
    picked = np.unique(positions)
    near = np.concatenate([picked, layout.prev[picked], layout.next[picked]])
    return np.unique(near[near >= 0])


class NearestScan:
    """A :class:`~mdmem.index.backend.VectorScan` that picks: in :meth:`scan`, the nearest
    slots and the exact cosines of them and their neighbours; in :meth:`scored`, those of the
    keyword candidates and their neighbours, which the keyword search beside it found."""

    def __init__(self, picker: Picker, layout: Layout, allowed: np.ndarray) -> None:
        self._picker = picker
        self._layout = layout
        self._allowed = allowed
        self._query: np.ndarray | None = None
        self._near: Scored | None = None
        picker.inverse()  # built here, on the connection's thread: the scan's only reads it

    def scan(self, query: np.ndarray) -> None:
        self._query = query
        found = self._picker.nearest(query, self._allowed)
        self._near = None if found is None else around(self._picker, query, found, self._layout)

    def scored(self, keyword: Scored | None) -> Scored | None:
        if self._query is None or self._near is None:
            return None
        if keyword is None or keyword.positions is None:
            return self._near
        return with_also(self._picker, self._query, self._near, self._layout, keyword.positions)


def allowed(layout: Layout, filters: Filters, filtered: Callable[[], np.ndarray]) -> np.ndarray:
    """The positions ranking will keep (as ``search._allowed`` decides): the nearest are
    taken among them, so a filter never leaves the vector side empty."""
    if filters.on_columns():
        mask = filtered()
    elif filters.include_archived:
        mask = np.ones(len(layout.rowids), dtype=bool)
    else:
        mask = ~layout.archived
    if filters.path is not None:
        files_ok = np.fromiter(
            (filters.path_ok(p) for p in layout.file_paths), bool, len(layout.file_paths)
        )
        mask = mask & files_ok[layout.file_of]
    return mask
