"""The index on PostgreSQL + pgvector against SQLite: quality at LoCoMo size, then scale.

LoCoMo (``--locomo``): each conversation's SQLite index (benchmarks/locomo.py's rendering ``a``
by default) is copied into PostgreSQL with ``copy_index_to_postgres`` (nothing embedded again)
and every question of categories 1-4 is asked of both through ``Workspace.search`` (k=200,
hybrid, question vectors embedded beforehand as in locomo.py). Reported: R@10 and rec@2000 of
each, the share of questions whose top hit is the same, and search latency p50/p95.

Scale (``--chunks N``): N synthetic chunks (real text: LoCoMo turns with a file number added,
so no two are equal; random 384-d unit vectors), 40 per file, written by the backend's own bulk
path (COPY of chunks with their keyword terms and postings in one transaction, their indexes
built after the rows, binary COPY of vectors, then the HNSW build). Reported: COPY throughput,
index build times, hybrid search p50/p95 (``mdmem.index.search``, ranking included) from 1 and
from 8 client processes, HNSW recall@10 against an exact scan at the ``--ef`` values, the
database size and the load average. The throwaway cluster runs at ``--nice 19`` by default (a
shared machine). 1M chunks is a run by hand (about an hour on 2 busy cores:
``--chunks 1000000 --maintenance-mem 3GB --shared-buffers 2GB``).

Usage:  .venv/bin/python benchmarks/postgres.py [--locomo] [--chunks 10000] [--url URL]
Without --url a throwaway cluster is started (tests/postgres_cluster.py; needs PostgreSQL 15
with pgvector: ``make pgvector``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import locomo  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.config import Config, FilesConfig, IndexConfig, load_config  # noqa: E402
from mdmem.index.chunks import Chunk, sha  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.filters import Filters  # noqa: E402
from mdmem.index.postgres import db, postgres_writes  # noqa: E402
from mdmem.index.postgres.index import PostgresIndex  # noqa: E402
from mdmem.index.search import search  # noqa: E402

DIM = 384
PER_FILE = 40
QUERIES = 200
CLIENT_QUERIES = 60
SEED = 11


@contextlib.contextmanager
def server(url: str | None, shared_buffers: str, nice: int) -> Iterator[str]:
    if url:
        yield url
        return
    import postgres_cluster

    reason = postgres_cluster.unavailable()
    if reason:
        raise SystemExit(f"no PostgreSQL to run on: {reason} (or pass --url)")
    with postgres_cluster.cluster(shared_buffers, nice=nice) as cluster:
        yield cluster.url


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


# ---- LoCoMo ----------------------------------------------------------------------------------


def run_locomo(url: str, rendering: str, convs: Sequence[int], console: Console) -> dict:
    samples = json.loads(locomo.DATA.read_text())
    qs = locomo.questions(samples)
    model = SentenceTransformerEmbedder()
    cached = locomo.CachedEmbedder(model, [q.text for q in qs])
    scores: dict[str, list[dict[str, float]]] = {"sqlite": [], "postgres": []}
    latency: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    same_top = 0
    asked = 0
    for conv in convs:
        root, turns = locomo.build(samples[conv], rendering, False)
        lite = Workspace.open(root, embedder=cached)
        lite.index.update()
        index = IndexConfig(backend="postgres", url=url, workspace=f"locomo_{rendering}_{conv}")
        pg = Workspace(root, replace(load_config(root), index=index), embedder=cached)
        copied = pg.index.copy_to_postgres()
        pg.index.update()
        console.log(f"conversation {conv}: {copied.chunks} chunks copied in {copied.seconds:.1f} s")
        for q in (q for q in qs if q.conv == conv):
            hits = {}
            for name, ws in (("sqlite", lite), ("postgres", pg)):
                started = time.perf_counter()
                hits[name] = ws.search(q.text, k=200, mode="hybrid", track_access=False)
                latency[name].append((time.perf_counter() - started) * 1000)
                scores[name].append(locomo.score(hits[name], q.gold, turns))
            asked += 1
            a, b = hits["sqlite"], hits["postgres"]
            same_top += bool(a and b and a[0].citation == b[0].citation) or not (a or b)
        lite.close()
        pg.close()
    table = Table(title=f"LoCoMo rendering {rendering}, {asked} questions, hybrid, k=200")
    for column in ("backend", "R@10", "rec@2000", "same top hit", "p50 ms", "p95 ms"):
        table.add_column(column, justify="right")
    out = {}
    for name in ("sqlite", "postgres"):
        r10 = statistics.fmean(s["R@10"] for s in scores[name])
        rec = statistics.fmean(s["rec@2000"] for s in scores[name])
        p50, p95 = pct(latency[name], 50), pct(latency[name], 95)
        agree = "" if name == "sqlite" else f"{same_top / asked:.3f}"
        table.add_row(name, f"{r10:.3f}", f"{rec:.3f}", agree, f"{p50:.1f}", f"{p95:.1f}")
        out[name] = {"R@10": r10, "rec@2000": rec, "p50_ms": p50, "p95_ms": p95}
    out["same_top_hit"] = same_top / asked
    console.print(table)
    return out


# ---- scale -----------------------------------------------------------------------------------


def corpus() -> list[str]:
    samples = json.loads(locomo.DATA.read_text())
    return [
        locomo.turn_text(turn)
        for sample in samples
        for _, _, _, session in locomo.sessions(sample)
        for turn in session
    ]


def synthetic(n: int, texts: list[str]) -> Iterator[tuple[str, Chunk]]:
    for i in range(n):
        file, line = divmod(i, PER_FILE)
        text = f"{texts[i % len(texts)]} (file {file})"
        path = f"notes/f{file:06d}.md"
        yield (
            path,
            Chunk(
                id=sha(f"{path}:{line}:{text}"),
                path=path,
                start_line=line + 1,
                end_line=line + 1,
                heading="Notes",
                text=text,
                embed_text=text,
                text_hash=sha(text),
                kind="entry",
                type="fact",
                importance=0.5,
                created="2026-01-01",
                entry_id=None,
                agent="a" if i % 10 else "b",
                session=None,
                archived=False,
            ),
        )


class QueryVectors:
    """Random unit vectors for query texts (the chunk vectors are random too)."""

    model_id = "bench/random-384"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(SEED + 1)

    def embed(self, texts, progress=None):  # type: ignore[no-untyped-def]
        v = self.rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def open_index(url: str, name: str) -> PostgresIndex:
    return PostgresIndex(ROOT / ".bench", FilesConfig(), lambda: None, url=url, name=name)


def load(url: str, n: int, maintenance_mem: str, console: Console) -> dict[str, float]:
    """The backend's bulk path, as ``mdmem index --backend postgres`` runs it: chunks by COPY in
    one transaction with the chunks' and postings' indexes built after the rows, then vectors
    by binary COPY, then the HNSW index."""
    texts = corpus()
    index = open_index(url, f"scale_{n}")
    conn = index.conn
    rng = np.random.default_rng(SEED)
    with conn.transaction():
        for (table,) in conn.execute("SELECT name FROM vector_tables").fetchall():
            conn.execute(f"DROP TABLE {table}")
        conn.execute("TRUNCATE chunks, files, df, postings, vector_tables, access, first_seen")
        conn.execute("DELETE FROM meta WHERE key <> 'schema_version'")
    conn.execute(f"SET maintenance_work_mem = '{maintenance_mem}'")
    started = time.perf_counter()
    with conn.transaction(), db.deferred_indexes(conn, ("chunks", "postings")):
        batch: list[tuple[str, Chunk]] = []
        for i, item in enumerate(synthetic(n, texts), 1):
            batch.append(item)
            if len(batch) == 5000 or i == n:
                postgres_writes.insert_chunks(conn, batch)
                batch = []
            if i % 100_000 == 0:
                console.log(f"{i:,} chunks copied, {i / (time.perf_counter() - started):,.0f}/s")
        chunk_s = time.perf_counter() - started
    index_s = time.perf_counter() - started - chunk_s
    console.log(f"chunk and postings indexes built in {index_s:.0f} s")
    hashes = [str(h) for (h,) in conn.execute("SELECT DISTINCT text_hash FROM chunks")]
    started = time.perf_counter()
    with conn.transaction():
        table = db.create_vector_table(conn, QueryVectors.model_id, DIM, with_index=False)
        with (
            conn.cursor() as cur,
            cur.copy(
                f"COPY {table} (text_hash, embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["text", "vector"])
            for start in range(0, len(hashes), 10000):
                part = hashes[start : start + 10000]
                vectors = rng.standard_normal((len(part), DIM)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                for h, v in zip(part, vectors, strict=True):
                    copy.write_row((h, v))
        postgres_writes.set_meta(conn, "embed_model", QueryVectors.model_id)
        postgres_writes.set_meta(conn, "embed_table", table)
        postgres_writes.bump_generation(conn)
    vector_s = time.perf_counter() - started
    console.log(f"{len(hashes):,} vectors copied in {vector_s:.0f} s; building HNSW")
    started = time.perf_counter()
    db.create_hnsw(conn, table)
    hnsw_s = time.perf_counter() - started
    console.log(f"HNSW built in {hnsw_s:.0f} s")
    conn.execute("VACUUM ANALYZE")  # (what autovacuum does: index-only scans of postings)
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    index.close()
    console.log(f"{n} chunks loaded")
    return {
        "chunks_per_s": n / chunk_s,
        "index_build_s": index_s,
        "vectors_per_s": len(hashes) / vector_s,
        "hnsw_build_s": hnsw_s,
        "db_mb": (size[0] if size else 0) / 1e6,
    }


def query_texts(n: int) -> list[str]:
    texts = corpus()
    rng = np.random.default_rng(SEED + 2)
    return [" ".join(texts[int(i)].split()[:8]) for i in rng.integers(0, len(texts), n)]


def client(args: tuple[str, str, list[str], str]) -> list[float]:
    url, name, texts, mode = args
    index = open_index(url, name)
    vectors = QueryVectors()
    config = Config().search
    timings = []
    for i, text in enumerate(texts):
        started = time.perf_counter()
        with index.searching():
            search(index, vectors, text, k=10, mode=mode, config=config, filters=Filters())
        if i:  # the first one loads the layout
            timings.append((time.perf_counter() - started) * 1000)
    index.close()
    return timings


def latency(url: str, n: int, clients: int, mode: str = "hybrid") -> tuple[float, float]:
    texts = query_texts(CLIENT_QUERIES * clients)
    parts = [(url, f"scale_{n}", texts[i::clients], mode) for i in range(clients)]
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        timings = [t for part in pool.map(client, parts) for t in part]
    return pct(timings, 50), pct(timings, 95)


def recall(url: str, n: int, ef_values: Sequence[int]) -> dict[int, float]:
    index = open_index(url, f"scale_{n}")
    conn = index.conn
    table = postgres_writes.meta(conn, "embed_table")
    queries = QueryVectors().embed(["q"] * 50)
    sql = f"SELECT text_hash FROM {table} ORDER BY embedding <=> %s LIMIT 10"
    exact = []
    # never prepared: a plan psycopg prepared under enable_indexscan=off would stay exact
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        for q in queries:
            exact.append({r[0] for r in conn.execute(sql, (q,), prepare=False)})
    out = {}
    for ef in ef_values:
        conn.execute(f"SET hnsw.ef_search = {int(ef)}")
        found = [
            len({r[0] for r in conn.execute(sql, (q,), prepare=False)} & e) / 10
            for q, e in zip(queries, exact, strict=True)
        ]
        out[ef] = statistics.fmean(found)
    index.close()
    return out


def run_scale(url: str, n: int, maintenance_mem: str, ef_values: Sequence[int],
              console: Console) -> dict:  # fmt: skip
    loads = [os.getloadavg()[0]]
    loaded = load(url, n, maintenance_mem, console)
    loads.append(os.getloadavg()[0])
    one = latency(url, n, 1)
    loads.append(os.getloadavg()[0])
    eight = latency(url, n, 8)
    words = latency(url, n, 1, "keyword")
    loads.append(os.getloadavg()[0])
    rec = recall(url, n, ef_values)
    table = Table(title=f"{n:,} chunks (real text, random {DIM}-d vectors), 2 cores")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("COPY chunks with keyword terms and postings", f"{loaded['chunks_per_s']:,.0f} /s"),
        ("then build the chunks' and postings' indexes", f"{loaded['index_build_s']:.1f} s"),
        ("COPY vectors (binary)", f"{loaded['vectors_per_s']:,.0f} /s"),
        ("HNSW build (m=16, ef_construction=64)", f"{loaded['hnsw_build_s']:.1f} s"),
        ("hybrid search, 1 client: p50 / p95", f"{one[0]:.1f} / {one[1]:.1f} ms"),
        ("hybrid search, 8 clients: p50 / p95", f"{eight[0]:.1f} / {eight[1]:.1f} ms"),
        ("keyword search alone, 1 client: p50 / p95", f"{words[0]:.1f} / {words[1]:.1f} ms"),
        *((f"HNSW recall@10, ef_search {ef}", f"{r:.3f}") for ef, r in rec.items()),
        ("database size", f"{loaded['db_mb']:,.0f} MB"),
        ("load average (1 min) at each phase", " / ".join(f"{x:.1f}" for x in loads)),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return {**loaded, "p50_1": one[0], "p95_1": one[1], "p50_8": eight[0], "p95_8": eight[1],
            "keyword_p50": words[0], "keyword_p95": words[1],
            "recall": rec, "load": loads}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server (default: a throwaway cluster)")
    parser.add_argument("--locomo", action="store_true", help="the LoCoMo comparison")
    parser.add_argument("--rendering", default="a")
    parser.add_argument("--convs", default="all")
    parser.add_argument("--chunks", type=int, default=0, help="the scale run, with N chunks")
    parser.add_argument("--maintenance-mem", default="512MB")
    parser.add_argument("--shared-buffers", default="1GB", help="the throwaway cluster's")
    parser.add_argument("--ef", default="40,100,400", help="ef_search values for recall@10")
    parser.add_argument(
        "--nice", type=int, default=19, help="the throwaway cluster's CPU niceness (shared machine)"
    )
    args = parser.parse_args()
    if not (args.locomo or args.chunks):
        args.locomo, args.chunks = True, 10000
    console = Console()
    with server(args.url, args.shared_buffers, args.nice) as url:
        if args.locomo:
            run_locomo(url, args.rendering, locomo.parse_convs(args.convs), console)
        if args.chunks:
            ef = [int(x) for x in args.ef.split(",")]
            run_scale(url, args.chunks, args.maintenance_mem, ef, console)


if __name__ == "__main__":
    main()
