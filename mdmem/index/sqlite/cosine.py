"""The index's products of a query with stored vectors, in numpy's own loop rather than BLAS.

A hybrid search scores vectors on a thread of its own, beside the keyword search. A BLAS call
(numpy's ``@``, OpenBLAS) made from a thread other than the one that started OpenBLAS leaves
its worker spinning for 100 ms or more afterwards, even with the thread count lowered to one
for the call: on 2 cores that spinning took a core from the keyword search and the next query
embedding (at 1M chunks, hybrid p50 / p95 70-74 / 92-108 ms against 45-48 / 56-70 with
``OPENBLAS_NUM_THREADS=1``; docs/performance.md, "Speed and memory"). ``einsum`` runs on the
calling thread only, starts no worker, and multiplies a 100,000 × 384 float32 matrix by a vector
in 7.0 ms p50 where one BLAS thread took 14.4 (``benchmarks/cosine_kernels.py``).
"""

from __future__ import annotations

import numpy as np


def cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``vectors @ query`` (float32, unit vectors: their cosines), on this thread alone."""
    return np.einsum("ij,j->i", vectors, np.asarray(query, dtype=vectors.dtype))
