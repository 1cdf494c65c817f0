"""The query-by-vectors product the index runs in every vector search: numpy's ``@``
(OpenBLAS) on its threads, on one BLAS thread (threadpoolctl, as mdmem did until issue 15's
fix), and ``einsum`` (numpy's own loop, ``mdmem/index/sqlite/scale/cosine.py``).

Usage:  .venv/bin/python benchmarks/cosine_kernels.py [--sizes 6000,100000,250000]

(threadpoolctl, for the "one BLAS thread" column, comes with sentence-transformers through
scikit-learn; mdmem itself no longer uses it.)

Two tables:
- time per product, p50 / p95 ms over 40 rounds, each kernel in turn within a round, on random
  unit 384-d float32 vectors, and the largest difference from the float64 product;
- the CPU the process spends in the 100 ms after one product (6,000 vectors, as a 1M search's
  candidates) while it only sleeps, p50 over 10 calls, with the product made on the main thread
  and on a new thread after one on the main thread (a hybrid search makes it on a thread of its
  own, beside the keyword search; other searches on the caller's): OpenBLAS's workers spin
  after a call. Each kernel and thread in a fresh process
  (what one call leaves behind changes what the next does), with torch imported first, as in
  the process that searches.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import faiss  # noqa: F401 - loaded as in a searching process (its own OpenBLAS beside numpy's)
import numpy as np
import torch  # noqa: F401 - loaded as in a searching process (its OpenMP runtime beside OpenBLAS)
from rich.console import Console
from rich.table import Table
from threadpoolctl import threadpool_limits

from mdmem.index.sqlite.scale.cosine import cosines


def blas(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    return vectors @ query


def blas_one(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    with threadpool_limits(limits=1, user_api="blas"):
        return vectors @ query


KERNELS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "numpy @ (OpenBLAS threads)": blas,
    "numpy @, one BLAS thread": blas_one,
    "einsum (shipped)": cosines,
}


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    m = rng.standard_normal((rows, 384)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def p(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f} / {ordered[int(0.95 * (len(ordered) - 1))]:.2f}"


def idle_cpu_after(product: Callable[[], object], on_thread: bool) -> float:
    """CPU ms the process spends sleeping 100 ms after ``product()``, median of 10. On a new
    thread, each time after one on the main thread, as searches in one process alternate."""
    spent = []
    for _ in range(11):
        product()
        if on_thread:
            worker = threading.Thread(target=product)
            worker.start()
            worker.join()
        else:
            product()
        before = time.process_time()
        time.sleep(0.1)
        spent.append((time.process_time() - before) * 1e3)
    return statistics.median(spent[1:])


def spin_child(kernel: str, on_thread: bool) -> None:
    vectors, query = unit(np.random.default_rng(0), 6000), unit(np.random.default_rng(1), 1)[0]
    product = KERNELS[kernel]
    print(json.dumps(idle_cpu_after(lambda: product(vectors, query), on_thread)))


def spin_in_fresh_process(kernel: str, on_thread: bool) -> float:
    args = [sys.executable, __file__, "--spin", kernel] + (["--thread"] if on_thread else [])
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="6000,100000,250000")
    parser.add_argument("--spin", help=argparse.SUPPRESS)
    parser.add_argument("--thread", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spin:
        spin_child(args.spin, args.thread)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    console = Console()
    speed = Table(title="query × vectors, ms p50 / p95 (40 rounds)")
    speed.add_column("vectors")
    for name in KERNELS:
        speed.add_column(name, justify="right")
    speed.add_column("max |error|", justify="right")
    for rows in sizes:
        vectors, query = unit(rng, rows), unit(rng, 1)[0]
        truth = vectors.astype(np.float64) @ query.astype(np.float64)
        times: dict[str, list[float]] = {name: [] for name in KERNELS}
        error = 0.0
        for _ in range(40):
            for name, kernel in KERNELS.items():
                started = time.perf_counter()
                got = kernel(vectors, query)
                times[name].append((time.perf_counter() - started) * 1e3)
                error = max(error, float(np.abs(got - truth).max()))
        speed.add_row(f"{rows:,}", *(p(times[n]) for n in KERNELS), f"{error:.1e}")
    console.print(speed)
    spin = Table(title="process CPU ms while it sleeps 100 ms after one product (p50 of 10)")
    spin.add_column("product made on")
    for name in KERNELS:
        spin.add_column(name, justify="right")
    for on_thread in (False, True):
        spin.add_row(
            "a new thread" if on_thread else "the main thread",
            *(f"{spin_in_fresh_process(name, on_thread):.1f}" for name in KERNELS),
        )
    console.print(spin)
    console.print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
