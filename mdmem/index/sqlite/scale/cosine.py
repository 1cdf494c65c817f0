"""The index's products of a query with stored vectors, in numpy's own loop rather than BLAS.

Why: a BLAS product on the vector scan's thread left OpenBLAS's worker spinning beside the
keyword search (at 1M chunks hybrid p50 70-74 ms against 45-48 without it); ``einsum`` starts no
worker and takes 7.0 ms p50 for 100,000 × 384 where one BLAS thread took 14.4
(``benchmarks/cosine_kernels.py``).

A hybrid search scores vectors on a thread of its own, beside the keyword search. A BLAS call
(numpy's ``@``, OpenBLAS) made from a thread other than the one that started OpenBLAS leaves its
worker spinning for 100 ms or more afterwards, even with the thread count lowered to one for the
call; ``einsum`` runs on the calling thread only.
"""

from __future__ import annotations

import numpy as np


def cosines(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``vectors @ query`` (float32, unit vectors: their cosines), on this thread alone."""
    return np.einsum("ij,j->i", vectors, np.asarray(query, dtype=vectors.dtype))
