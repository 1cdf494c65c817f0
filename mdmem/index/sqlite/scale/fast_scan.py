"""The float16 store's fast-scan copy: its float16 base again in 4 bits per pair of dimensions
(codebooks trained on a sample of rows), which faiss's fast-scan kernel scans from SIMD
registers. It only picks a search's nearest rows; their cosines still come from the float16
codes.

Why: at 1M chunks it scans a query in 4 ms against 34 for the float16 codes, and its best 2,000
rows held all of the float16 scan's top 10 for 300 random queries (``benchmarks/million.py``,
``benchmarks/fast_scan.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from mdmem.index.sqlite.scale.faiss_threads import one_faiss_thread

if TYPE_CHECKING:
    import faiss

FAST_SCAN_FROM = 50_000
"""Base rows from which the copy is built (below, the float16 scan takes about 2 ms)."""
FAST_NEAREST = 2
"""The copy picks this many times ``nearest`` rows: its order is approximate."""
SCAN_SAMPLE = 16 * 256
"""Rows the codebooks are trained on: faiss's k-means keeps at most 256 points per centroid,
and each of its codebooks has 16."""
BATCH = 16384
"""Rows decoded and added per step (memory stays flat)."""


def build(faiss: Any, base: Any, codes: np.ndarray) -> faiss.IndexPQFastScan:
    """The copy of ``base`` (a float16 ``IndexScalarQuantizer`` of an even dimension), whose
    raw ``codes`` are given. Built when the base loads: 5-6 s on two cores and 96 MB at 1M
    chunks."""
    rows, dim = base.ntotal, base.d
    scanner = faiss.IndexPQFastScan(dim, dim // 2, 4, faiss.METRIC_INNER_PRODUCT)
    step = max(1, rows // SCAN_SAMPLE)
    faiss.omp_set_num_threads(_usable_cores())  # training takes half as long on two cores
    try:
        scanner.train(base.sa_decode(np.ascontiguousarray(codes[::step])))
        for start in range(0, rows, BATCH):
            scanner.add(base.sa_decode(codes[start : start + BATCH]))
    finally:
        one_faiss_thread(faiss)
    return scanner


def pick(scanner: Any, query: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray | None:
    """The copy's ``FAST_NEAREST * k`` nearest rows among the ``ok`` ones, or None where the
    float16 scan must decide: a mask that hides more than half the rows or the ones nearest
    the query (the fast scan takes no row selector, so it asks for more and drops the rest)."""
    nb = len(ok)
    if not k:
        return None
    alive = int(np.count_nonzero(ok))
    if 2 * alive < nb:
        return None
    wanted = FAST_NEAREST * k
    if alive < nb:
        wanted = -(-wanted * nb // alive) + k
    _, rows = scanner.search(query[None, :], min(wanted, nb))
    rows = rows[0]
    rows = rows[rows >= 0]
    if alive < nb:
        rows = rows[ok[rows]]
    if len(rows) < min(FAST_NEAREST * k, alive):
        return None
    return rows[: FAST_NEAREST * k]


def _usable_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
