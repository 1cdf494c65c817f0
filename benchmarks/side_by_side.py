"""A hybrid search's two retrievers one after the other or side by side (issue 15).

Usage:  .venv/bin/python benchmarks/side_by_side.py [--size 100000] [--queries 200]

On speed.py's workspace of that size (``.bench/speed/search-N``, built as ``million.py`` builds
it when missing), with the real model: the same search (``mdmem.index.search.search``, hybrid,
the real query embedding included) with its retrievers run four ways, in one process, each
query through all four in a random order:

- shipped: the query's embedding and the vector scan on a lasting worker thread, with one
  OpenMP thread, while the keyword search runs on the caller's (``search._retrieve``,
  ``index/vector_worker.py``);
- a fresh thread per search for the embedding and the scan, on torch's threads (before the
  second stop of 24 November);
- embed first: the query embedded on the caller's thread, then only the scan beside the
  keyword search;
- one after the other: keyword search, embedding, vector scan, as before issue 15's change.

Prints p50 / p95 wall-clock ms per way, and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from million import ensure
from rich.console import Console
from rich.table import Table
from speed import SEED, Corpus

from mdmem import Workspace
from mdmem.config import load_config
from mdmem.index import search as ranking
from mdmem.index.backend import Scored
from mdmem.index.filters import Filters

Retrieve = Callable[..., dict[str, Scored]]


def embed_first(
    index: Any, embedder: Any, query: str, mode: str, config: Any, filters: Filters
) -> dict[str, Scored]:
    vector = embedder.embed([query])[0]
    scan = index.vector_scan(embedder.model_id, filters=filters)
    with ThreadPoolExecutor(max_workers=1) as worker:
        pending = worker.submit(scan.scan, vector)
        found = {"keyword": index.keyword_candidates(query, config.keyword_candidates)}
        pending.result()
    return _with_vectors(found, scan)


def fresh_thread(
    index: Any, embedder: Any, query: str, mode: str, config: Any, filters: Filters
) -> dict[str, Scored]:
    scan = index.vector_scan(embedder.model_id, filters=filters)
    second = threading.Thread(target=lambda: scan.scan(embedder.embed([query])[0]))
    second.start()
    found = {"keyword": index.keyword_candidates(query, config.keyword_candidates)}
    second.join()
    return _with_vectors(found, scan)


def one_after_the_other(
    index: Any, embedder: Any, query: str, mode: str, config: Any, filters: Filters
) -> dict[str, Scored]:
    found = {"keyword": index.keyword_candidates(query, config.keyword_candidates)}
    scan = index.vector_scan(embedder.model_id, filters=filters)
    scan.scan(embedder.embed([query])[0])
    return _with_vectors(found, scan)


def _with_vectors(found: dict[str, Scored], scan: Any) -> dict[str, Scored]:
    vectors = scan.scored(found["keyword"])
    if vectors is not None:
        found["vector"] = vectors
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    from mdmem.index.embed import DEFAULT_MODEL, SentenceTransformerEmbedder

    log = Console(stderr=True)
    root = ensure(args.size, f"sentence-transformers/{DEFAULT_MODEL}", log)
    rng = random.Random(f"{SEED}-side-by-side")
    corpus = Corpus()
    queries = [corpus.query(rng) for _ in range(args.queries)]
    embedder = SentenceTransformerEmbedder()
    ways: dict[str, Retrieve] = {
        "shipped: embedding and scan beside the keyword search": ranking._retrieve,
        "a fresh thread per search for them": fresh_thread,
        "embed first, then the scan beside the keyword search": embed_first,
        "one after the other": one_after_the_other,
    }
    took: dict[str, list[float]] = {name: [] for name in ways}
    loads = [os.getloadavg()[0]]
    shipped = ranking._retrieve
    with Workspace(root, load_config(root), embedder=embedder) as ws:

        def run(query: str) -> None:
            ranking.search(
                ws.index._backend,
                embedder,
                query,
                k=10,
                mode="hybrid",
                config=ws.config.search,
                filters=Filters(),
                track_access=False,
            )

        for query in queries[:5]:  # caches and the model warm
            run(query)
        order = list(ways.items())
        try:
            for query in queries:
                rng.shuffle(order)
                for name, retrieve in order:
                    ranking._retrieve = retrieve  # type: ignore[assignment]
                    started = time.perf_counter()
                    run(query)
                    took[name].append(time.perf_counter() - started)
        finally:
            ranking._retrieve = shipped  # type: ignore[assignment]
    loads.append(os.getloadavg()[0])
    table = Table(title=f"hybrid ws search at {args.size:,} chunks, {args.queries} queries")
    for column in ("retrievers", "p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    for name, values in took.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        table.add_row(name, f"{statistics.median(values) * 1000:.1f}", f"{p95 * 1000:.1f}")
    console = Console(width=120)
    console.print(table)
    console.print(f"load average (1 min) at the start and end: {loads[0]:.1f}, {loads[1]:.1f}")


if __name__ == "__main__":
    main()
