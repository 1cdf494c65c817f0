"""Which copy of the float16 store picks a search's nearest rows: scan time and how much of the
float16 scan's top 10 each copy's best rows hold (``index/sqlite/scale/fast_scan.py``).

Usage:  .venv/bin/python benchmarks/fast_scan.py [--size 1000000] [--queries 300]

It reads the store file of ``million.py``'s workspace (``.bench/speed/search-N/.mdmem/
index.db-vectors``: random unit vectors under the real model's id; run ``million.py --sizes N
--only store`` first). Each copy is built from the float16 codes, as the store builds its
scanner when it loads, and timed for that. Then every query (random unit vectors, seeded) is
scanned by every copy on one faiss thread, in an order that rotates per query; "top 10 kept"
is the share of the exact float16 scan's top 10 that the copy's best ``k`` rows hold (the
store then scores those rows exactly from the float16 codes, so that share is what a search
can lose).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from rich.console import Console
from rich.table import Table
from speed import WORK, ms

from mdmem.index.sqlite.scale.faiss_threads import load_faiss
from mdmem.index.sqlite.scale.fast_scan import SCAN_SAMPLE
from mdmem.index.sqlite.scale.float16_vectors import BATCH, Float16Vectors, _codes_view, store_path

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def copies(faiss: Any, dim: int) -> dict[str, Callable[[], Any]]:
    """The candidate copies, by name: each a new, untrained faiss index."""

    def fast(dims: int) -> Callable[[], Any]:
        return lambda: faiss.IndexPQFastScan(dim, dim // dims, 4, faiss.METRIC_INNER_PRODUCT)

    def scalar(kind: int) -> Callable[[], Any]:
        return lambda: faiss.IndexScalarQuantizer(dim, kind, faiss.METRIC_INNER_PRODUCT)

    named = {f"fast scan, 4 bits per {dims} dims": fast(dims) for dims in (4, 3)}
    named["fast scan, 4 bits per 2 dims (shipped)"] = fast(2)
    named["8-bit scalar"] = scalar(faiss.ScalarQuantizer.QT_8bit_uniform)
    return named


def build(make: Callable[[], Any], base: Any, codes: np.ndarray, faiss: Any) -> Any:
    """Trained on a sample and filled from the decoded float16 codes, as the store does."""
    index = make()
    step = max(1, len(codes) // SCAN_SAMPLE)
    index.train(base.sa_decode(np.ascontiguousarray(codes[::step])))
    for start in range(0, len(codes), BATCH):
        index.add(base.sa_decode(codes[start : start + BATCH]))
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", default="1000,2000", help="rows each copy picks")
    args = parser.parse_args()
    log = Console(stderr=True)
    path = store_path(WORK / f"search-{args.size}" / ".mdmem" / "index.db")
    if not path.exists():
        sys.exit(f"{path} is missing: run benchmarks/million.py --sizes {args.size} first")
    faiss = load_faiss()
    store = Float16Vectors(MODEL, path, fast_scan_from=10**12)  # the float16 base alone
    store._load()
    base, rows, dim = store.base, store.rows, store.dim
    codes = _codes_view(faiss, base, rows, store._code_size())
    faiss.omp_set_num_threads(2)  # building, as the store does; scanning on one thread
    built: dict[str, tuple[Any, float]] = {}
    for name, make in copies(faiss, dim).items():
        started = time.perf_counter()
        built[name] = (build(make, base, codes, faiss), time.perf_counter() - started)
        log.log(f"{name}: built in {built[name][1]:.1f} s")
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(20261124)
    queries = rng.standard_normal((args.queries, dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ks = [int(k) for k in args.k.split(",")]
    before = "float16 codes, exhaustive (before)"
    variants = [(before, 1000)] + [(n, k) for n in built for k in ks]  # 1,000: as before
    built[before] = (base, 0.0)
    times: dict[tuple[str, int], list[float]] = {v: [] for v in variants}
    kept: dict[tuple[str, int], list[float]] = {v: [] for v in variants}
    for i, query in enumerate(queries):
        _, top = base.search(query[None, :], 10)  # the truth, untimed
        truth = set(top[0].tolist())
        for n, k in variants[i % len(variants) :] + variants[: i % len(variants)]:
            started = time.perf_counter()
            _, picked = built[n][0].search(query[None, :], k)
            times[(n, k)].append(time.perf_counter() - started)
            kept[(n, k)].append(len(truth & set(picked[0].tolist())) / 10)
    table = Table(title=f"Picking the nearest rows of {rows:,} vectors ({args.queries} queries)")
    for column in ("copy", "k", "scan ms p50 / p95", "top 10 kept", "built s", "MB"):
        table.add_column(column, justify="left" if column == "copy" else "right")
    for n, k in variants:
        index, took = built[n]
        table.add_row(
            n, f"{k:,}", ms(times[(n, k)]), f"{statistics.mean(kept[(n, k)]):.4f}",
            f"{took:.1f}" if took else "", f"{index.code_size * rows / 1e6:.0f}",
        )  # fmt: skip
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
