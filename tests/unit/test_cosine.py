"""The index's query-by-vectors product (mdmem/index/sqlite/scale/cosine.py): numpy's own loop, no
BLAS, so no BLAS worker is left spinning beside the keyword search."""

from __future__ import annotations

import numpy as np

from mdmem.index.sqlite.scale.cosine import cosines


def test_equals_the_exact_product_and_keeps_float32() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = rng.standard_normal(384)  # float64, as a caller may pass it
    query /= np.linalg.norm(query)
    got = cosines(vectors, query)
    assert got.dtype == np.float32 and got.shape == (1000,)
    truth = vectors.astype(np.float64) @ query.astype(np.float32).astype(np.float64)
    assert np.abs(got - truth).max() < 1e-6


def test_an_empty_matrix_gives_no_scores() -> None:
    assert cosines(np.zeros((0, 384), dtype=np.float32), np.ones(384)).shape == (0,)
