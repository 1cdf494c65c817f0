"""Which kernel scans the vectors at 1M chunks: time, memory and recall@10 against exact float32.

Usage:  python benchmarks/vector_kernels.py [--sizes 100000,1000000] [--queries 30]
                                             [--only NAME,...] [--data DIR]

Random unit 384-d float32 vectors (fixed seed; the worst case for approximate search: their
best scores lie close together) and random unit queries. The ground truth is the exact float32
scan (numpy matmul, OpenBLAS). Each candidate runs in a fresh process so that its RSS is its
own; the matrix is memory-mapped from a file in the candidate's format where it can be (a
mapped page counts in RSS once it is read, so RSS after the queries is the honest figure).

Candidates ("dense": the score of every vector, what hybrid ranking uses; "top-k": the best
100 only):
- ``f32-numpy``: float32, numpy matmul (today's VectorCache), dense;
- ``f16-numpy-blocks``: float16 mapped, cast to float32 in blocks of 32k rows, matmul, dense;
- ``f16-numkong-cdist``/``-2t``: float16 mapped, NumKong's (SimSIMD's) SIMD ``cdist`` with a
  ``dot`` metric, 1 or 2 threads, dense;
- ``f16-usearch-exact``/``-2t``: ``usearch.index.search(..., exact=True)``, float16, top-k;
- ``i8-usearch-exact``: the same over int8 (usearch scales each component by 127), top-k;
- ``f16-faiss-sq``/``sq8-faiss``: faiss ``IndexScalarQuantizer`` (fp16 / 8-bit per dimension,
  trained), flat (exhaustive), top-k, in memory (faiss reads its index whole);
- ``hnsw-usearch-f16``/``hnswlib``: HNSW graphs (100k only: building 1M on 2 cores takes too
  long), expansion 400 at search, top-k.

Requires numpy and whichever of usearch, numkong, faiss-cpu, hnswlib is installed (a missing
one is skipped). The table prints ms per query (p50 / p95), RSS after the queries, and
recall@10 (mean share of the exact top 10 found in the candidate's top 10).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DIM = 384
K = 100
BLOCK = 32768

CANDIDATES = [
    "f32-numpy",
    "f16-numpy-blocks",
    "f16-numkong-cdist",
    "f16-numkong-cdist-2t",
    "f16-usearch-exact",
    "f16-usearch-exact-2t",
    "i8-usearch-exact",
    "f16-faiss-sq",
    "sq8-faiss",
    "hnsw-usearch-f16",
    "hnswlib",
]
SMALL_ONLY = {"hnsw-usearch-f16", "hnswlib"}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def make_data(data: Path, n: int, queries: int) -> None:
    """Vectors as .f32/.f16 files, queries and the exact top 10 of each query."""
    data.mkdir(parents=True, exist_ok=True)
    if (data / f"truth-{n}.npy").exists():
        return
    rng = np.random.default_rng(42)
    f32 = np.lib.format.open_memmap(data / f"v-{n}.f32.npy", "w+", np.float32, (n, DIM))
    f16 = np.lib.format.open_memmap(data / f"v-{n}.f16.npy", "w+", np.float16, (n, DIM))
    for start in range(0, n, BLOCK):
        part = rng.standard_normal((min(BLOCK, n - start), DIM), dtype=np.float32)
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        f32[start : start + len(part)] = part
        f16[start : start + len(part)] = part
    f32.flush()
    f16.flush()
    q = rng.standard_normal((queries, DIM), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    np.save(data / f"q-{n}.npy", q)
    truth = np.stack([np.argsort(-(f32 @ v))[:10] for v in q])
    np.save(data / f"truth-{n}.npy", truth)


def top10(scores: np.ndarray) -> np.ndarray:
    best = np.argpartition(-scores, 10)[:10]
    return best[np.argsort(-scores[best])]


def searcher(name: str, data: Path, n: int) -> Callable[[np.ndarray], np.ndarray]:
    """A function from a query to its top 10 ids, timed including what it needs to get them."""
    f32 = data / f"v-{n}.f32.npy"
    f16 = data / f"v-{n}.f16.npy"
    if name == "f32-numpy":
        m = np.load(f32, mmap_mode="r")
        return lambda q: top10(m @ q)
    if name == "f16-numpy-blocks":
        m = np.load(f16, mmap_mode="r")

        def blocks(q: np.ndarray) -> np.ndarray:
            out = np.empty(len(m), np.float32)
            for s in range(0, len(m), BLOCK):
                out[s : s + BLOCK] = m[s : s + BLOCK].astype(np.float32) @ q
            return top10(out)

        return blocks
    if name.startswith("f16-numkong-cdist"):
        import numkong

        m = np.load(f16, mmap_mode="r")
        threads = 2 if name.endswith("2t") else 1

        def cdist(q: np.ndarray) -> np.ndarray:
            qq = q.astype(np.float16)[None, :]
            d = numkong.cdist(qq, m, metric="dot", out_dtype="float32", threads=threads)
            return top10(np.asarray(d)[0])

        return cdist
    if name.startswith(("f16-usearch-exact", "i8-usearch-exact")):
        from usearch.index import search

        threads = 2 if name.endswith("2t") else 1
        if name.startswith("i8"):
            path = data / f"v-{n}.i8.npy"
            if not path.exists():
                src = np.load(f32, mmap_mode="r")
                i8 = np.lib.format.open_memmap(path, "w+", np.int8, (n, DIM))
                for s in range(0, n, BLOCK):
                    i8[s : s + BLOCK] = np.clip(np.round(src[s : s + BLOCK] * 127), -127, 127)
                i8.flush()
            m = np.load(path, mmap_mode="r")
            cast = lambda q: np.clip(np.round(q * 127), -127, 127).astype(np.int8)  # noqa: E731
        else:
            m = np.load(f16, mmap_mode="r")
            cast = lambda q: q.astype(np.float16)  # noqa: E731

        def exact(q: np.ndarray) -> np.ndarray:
            found = search(m, cast(q), K, "ip", exact=True, threads=threads)
            return np.asarray(found.keys[:10])

        return exact
    if name in ("f16-faiss-sq", "sq8-faiss"):
        import faiss

        faiss.omp_set_num_threads(1)
        kind = (
            faiss.ScalarQuantizer.QT_fp16
            if name == "f16-faiss-sq"
            else faiss.ScalarQuantizer.QT_8bit
        )
        index = faiss.IndexScalarQuantizer(DIM, kind, faiss.METRIC_INNER_PRODUCT)
        src = np.load(f32, mmap_mode="r")
        index.train(np.ascontiguousarray(src[: min(n, 100_000)]))
        for s in range(0, n, BLOCK):
            index.add(np.ascontiguousarray(src[s : s + BLOCK]))
        del src

        def flat(q: np.ndarray) -> np.ndarray:
            _, ids = index.search(q[None, :], K)
            return ids[0, :10]

        return flat
    if name == "hnsw-usearch-f16":
        from usearch.index import Index

        index = Index(ndim=DIM, metric="ip", dtype="f16", expansion_search=400)
        src = np.load(f32, mmap_mode="r")
        t = time.perf_counter()
        index.add(np.arange(n), np.asarray(src), threads=2)
        print(f"  build {time.perf_counter() - t:.1f} s", file=sys.stderr)
        return lambda q: np.asarray(index.search(q, K).keys[:10])
    if name == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=n, ef_construction=200, M=16)
        index.set_num_threads(2)
        src = np.load(f32, mmap_mode="r")
        t = time.perf_counter()
        index.add_items(np.asarray(src), np.arange(n))
        print(f"  build {time.perf_counter() - t:.1f} s", file=sys.stderr)
        index.set_ef(400)
        index.set_num_threads(1)
        return lambda q: index.knn_query(q, K)[0][0, :10]
    raise ValueError(name)


def run_one(name: str, data: Path, n: int) -> dict[str, float]:
    """In this (fresh) process: build, time each query, measure RSS and recall."""
    queries = np.load(data / f"q-{n}.npy")
    truth = np.load(data / f"truth-{n}.npy")
    find = searcher(name, data, n)
    find(queries[0])  # warm: pages mapped, threads started
    times, hits = [], []
    for q, exact in zip(queries, truth, strict=True):
        t = time.perf_counter()
        found = find(q)
        times.append((time.perf_counter() - t) * 1000)
        hits.append(len(set(map(int, found)) & set(map(int, exact))) / 10)
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "rss": rss_mb(),
        "recall": statistics.mean(hits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--only", default="")
    parser.add_argument("--data", type=Path, default=Path(".bench/vector_kernels"))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child[0], args.data, int(args.child[1]))))
        return
    names = [c for c in CANDIDATES if not args.only or c in args.only.split(",")]
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| vectors | kernel | ms p50 / p95 | RSS MB | recall@10 |")
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        make_data(args.data, n, args.queries)
        for name in names:
            if name in SMALL_ONLY and n > 100_000:
                continue
            cmd = [sys.executable, __file__, "--data", str(args.data), "--child", name, str(n)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                print(f"| {n:,} | {name} | skipped: {last} | | |")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"| {n:,} | {name} | {r['p50']:.1f} / {r['p95']:.1f} | {r['rss']:,.0f} "
                f"| {r['recall']:.3f} |",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
