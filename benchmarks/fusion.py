"""Hybrid fusion alone at scale: ``search.py`` scoring the candidates only against the dense
computation over every chunk it replaced (issue 15), on a synthetic layout.

Usage:  nice -n 19 .venv/bin/python benchmarks/fusion.py [--sizes 100000,1000000] [--queries 30]

The layout is speed.py's shape (files of 10 chunks), with a tenth of the chunks in session
files (``--sessions 0`` for none); each query's candidates are shaped like the float16 vector
store's at that size: 1,000 keyword matches, and 1,000 nearest plus the keyword matches, with
their neighbours. Both ways run alternately on the same candidates, 5 rounds; figures are
process CPU ms per search (p50 / p95), and every pool is checked to be the same (positions,
order, scores; the random scores have no ties).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from mdmem.config import SearchConfig
from mdmem.index.backend import ChunkLayout, Scored
from mdmem.index.search import _candidates, _fuse, _gather, _rows, _with_context


def layout(n: int, sessions: float) -> ChunkLayout:
    per = 10
    new_file = np.zeros(n, dtype=bool)
    new_file[::per] = True
    index = np.arange(n)
    last = np.append(new_file[1:], True)
    stream = index < int(n * sessions)
    return ChunkLayout(
        rowids=index.copy(),
        file_starts=np.flatnonzero(new_file),
        file_of=np.cumsum(new_file) - 1,
        file_paths=tuple(str(f) for f in range(int(new_file.sum()))),
        prev=np.where(new_file, -1, index - 1),
        next=np.where(last, -1, index + 1),
        stream=stream,
        archived=np.zeros(n, dtype=bool),
        by_rowid=index.copy(),
    )


def dense(
    lay: ChunkLayout, keyword: Scored, vector: Scored, allowed: np.ndarray, config: SearchConfig
) -> tuple[np.ndarray, np.ndarray]:
    """The computation before: arrays of every chunk (``tests/unit/test_search_fusion.py``)."""
    n = len(lay.rowids)
    kw = keyword.dense(n)
    kw[~allowed] = 0.0
    fused = _dense_context(_fuse(kw, vector.dense(n), allowed, "hybrid", config), lay, config)
    fused[~allowed] = 0.0
    top = float(fused.max())  # the pool as chosen before (ties in argpartition's order)
    eligible = np.count_nonzero(fused >= max(config.min_relevance * top, np.finfo(float).tiny))
    pool = min(eligible, config.candidates)
    best = np.argpartition(-fused, pool - 1)[:pool]
    best = best[np.argsort(-fused[best], kind="stable")]
    return best, fused[best]


def _dense_context(fused: np.ndarray, lay: ChunkLayout, config: SearchConfig) -> np.ndarray:
    base = np.clip(fused, 0.0, None)
    out = fused.copy()
    prev = np.where(lay.prev >= 0, base[lay.prev], 0.0)
    nxt = np.where(lay.next >= 0, base[lay.next], 0.0)
    out += config.neighbour_weight * np.where(lay.stream, np.maximum(prev, nxt), base)
    best = np.maximum.reduceat(np.clip(out, 0.0, None), lay.file_starts)
    out += config.session_weight * np.where(lay.stream, best[lay.file_of], base)
    return out


def candidates_only(
    lay: ChunkLayout, keyword: Scored, vector: Scored, allowed: np.ndarray, config: SearchConfig
) -> tuple[np.ndarray, np.ndarray]:
    """What ``search`` does now."""
    rows = _rows(lay, [keyword, vector], config)
    ok = allowed[rows]
    kw = _gather(keyword, rows)
    kw[~ok] = 0.0
    fused = _fuse(kw, _gather(vector, rows), ok, "hybrid", config)
    fused = _with_context(fused, rows, lay, config)
    fused[~ok] = 0.0
    best = _candidates(fused, config.candidates, config.min_relevance)
    return rows[best], fused[best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--sessions", type=float, default=0.1)
    args = parser.parse_args()
    config = SearchConfig()
    print(f"load average at the start: {os.getloadavg()}")
    for n in [int(s) for s in args.sizes.split(",")]:
        rng = np.random.default_rng(n)
        lay = layout(n, args.sessions)
        allowed = ~lay.archived
        found = []
        for _ in range(args.queries):
            kw = rng.choice(n, 1000, replace=False)
            near = np.union1d(kw, rng.choice(n, 1000, replace=False))
            near = np.unique(np.concatenate([near, lay.prev[near], lay.next[near]]))
            near = near[near >= 0]
            cosines = rng.uniform(-0.1, 0.3, len(near)).astype(np.float32)
            found.append((Scored(kw, rng.gamma(2.0, 3.0, 1000)), Scored(near, cosines)))
        same = all(
            all(
                np.array_equal(a, b)
                for a, b in zip(
                    dense(lay, *f, allowed, config),
                    candidates_only(lay, *f, allowed, config),
                    strict=True,
                )
            )
            for f in found
        )
        rows = statistics.median(len(_rows(lay, list(f), config)) for f in found)
        cpu: dict[str, list[float]] = {"dense": [], "candidates only": []}
        for _ in range(5):
            for name, way in (("dense", dense), ("candidates only", candidates_only)):
                for f in found:
                    started = time.process_time()
                    way(lay, *f, allowed, config)
                    cpu[name].append(time.process_time() - started)
        figures = "; ".join(
            f"{name} {1000 * statistics.median(v):.2f} / {1000 * np.percentile(v, 95):.2f}"
            for name, v in cpu.items()
        )
        print(
            f"{n:,} chunks: rows scored (median) {rows:,.0f}; CPU ms p50 / p95: {figures}; "
            f"same pools: {same}"
        )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
