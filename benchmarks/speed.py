"""Speed and memory of mdmem on synthetic workspaces: indexing, no-op re-index, search.

Usage:  .venv/bin/python benchmarks/speed.py [--sizes 1000,10000,100000] [--quick] [--threads N]
                                           [--search-only]

``--quick`` measures search at 1,000 and 10,000 chunks only; ``--threads`` sets torch's thread
count for the model (default: torch's own, one per core). A full run takes about 4 minutes on
2 idle CPU cores and up to ~10 when another process keeps one of them busy; most of it is the
model embedding the 2,000 chunks of the cold-indexing test.

The workspaces are generated with a fixed seed under ``.bench/speed/`` (git-ignored; deleted and
recreated on every run, left behind afterwards for inspection). Each file is realistic Markdown
memory: a ``# Title``, ``## Section`` headings and list-item entries of 8-25 words drawn, with a
Zipf-like frequency, from a ~3,000-word vocabulary (common English words plus generated technical
terms); about a third of the entries carry an ``<!-- mdmem id=... type=... -->`` comment. The
embedding model is the configured default (all-MiniLM-L6-v2, 384 dimensions), loaded once before
anything is timed.

What each figure means:

1. Cold indexing, 2,000 chunks (200 files x 10 entries), each on a fresh copy of the workspace,
   in 2 alternated rounds (best of each):
   (a) ``Workspace.sync(embed=False)``: scan, read, parse, chunk, write SQLite + FTS5;
   (b) ``Workspace.sync()``: the same plus embedding every chunk with the real model;
   (c) the raw model: ``embedder.embed(texts)`` on the same chunks' ``embed_text``.
   Figures are chunks (texts) per second; (b)/(c) is the share of the model's raw throughput
   that a full sync keeps (goal >= 90 %).
2. No-op re-index of 10,000 files (1-3 entries each), after a full ``sync(embed=False)``:
   median and p95 of 7 runs of ``sync(embed=False)`` when nothing changed (goal <= 1 s), of
   ``SqliteIndex.changed_files()`` alone (the mtime/size check) and of the bare directory scan.
3. Search latency at each size, over 50 queries of 2-6 vocabulary words, p50 and p95 in ms:
   (a) ranking only: ``mdmem.index.search.search(...)`` with a stand-in embedder that returns the
       query's real vector, embedded once up front (goal: hybrid p95 <= 30 ms at 100k chunks);
   (b) ranking plus embedding the query with the real model (keyword mode embeds nothing);
   (c) end to end: ``Workspace.search(query, mode=..., track_access=False)``, which also runs
       the freshness check first (a no-op sync: mtime/size scan of every file and, in vector
       and hybrid mode, a look for chunks without a vector).
   (d) the same as (c) while a watcher runs (``ws.watch()``) and says the index caught up: the
       search checks no file.
   "cache ms" is the one-off cost of loading the chunk layout and the vector matrix into
   memory; "1 file ms" what the first search pays, layout + vectors, to bring them in step
   after one file gained an entry (indexed, its vector stored; embedding excluded), median of 7.
   "all terms" rows: (a) with every query term kept, timed in a pass after (a) itself (not
   interleaved with it, which left each shipped search cold caches), which scores the most
   common terms last, past a budget of matching rows: FTS5 finds candidates by
   the rarer terms, and the common terms' BM25 shares are added to those
   (``index/sqlite/scale/keyword.py``).
   The index is built with ``sync(embed=False)`` from the real text (real FTS5), then the
   ``embeddings`` table is filled directly with random unit float32 vectors (384-d) for every
   distinct text hash, under the real model's id: embedding 100k chunks for real would take
   ~15 minutes on 2 cores, and the vector math and data sizes are identical.
4. Memory and disk after each size: peak RSS of this process (``ru_maxrss``: it only grows, and
   includes the loaded model: see the table's caption), the vector matrix held in memory, and
   the index on disk (``index.db``, plus its WAL file).

All times are wall clock (``time.perf_counter``). Figures on a shared machine are inflated by
whatever else runs on it; the model suffers most: when another process keeps a core busy,
torch's default of one thread per core makes its threads wait on each other, and one query
embedding can take ~25 times longer than with ``--threads 1``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import random
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.fts import STOPWORDS  # noqa: E402
from mdmem.index.search import MODES, Filters, search  # noqa: E402
from mdmem.index.sqlite.scale import keyword  # noqa: E402
from mdmem.memory.scan import scan  # noqa: E402

WORK = ROOT / ".bench" / "speed"
SEED = 20261101
DIM = 384
QUERIES = 50
WARMUP = 3
NOOP_RUNS = 7
COLD_ROUNDS = 2
ENTRIES_PER_FILE = 10
FILES_PER_FOLDER = 100
MODE_ORDER = ("keyword", "vector", "hybrid")
assert set(MODE_ORDER) == set(MODES)

# ---- vocabulary ------------------------------------------------------------------------------

COMMON = """
the of and to a in is it you that he was for on are with as his they be at one have this from
or had by not word but what some we can out other were all there when up use your how said an
each she which do their time if will way about many then them write would like so these her long
make thing see him two has look more day could go come did number sound no most people my over
know water than call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read
hand port large spell add even land here must big high such follow act why ask men change went
light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover
food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both mark
often letter until mile river car feet care second book carry took science eat room friend began
idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave
song measure door product black short numeral class wind question happen complete ship area half
rock order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power
town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest
correct able pound done beauty drive stood contain front teach week final gave green quick develop
ocean warm free minute strong special mind behind clear tail produce fact street inch multiply
nothing course stay wheel full force blue object decide surface deep moon island foot system busy
test record boat common gold possible plane stead dry wonder laugh thousand ago ran check game
shape equate miss brought heat snow tire bring yes distant fill east paint language among user
server deploy release branch commit review merge ticket customer invoice report meeting deadline
budget client team manager schedule backup password account login email message config setting
""".split()

PREFIXES = """
auto micro macro hyper meta multi poly proto pseudo quasi semi sub super trans ultra inter intra
cross geo bio cyber data net web cloud edge stream batch event query cache shard node cluster
vector graph token schema index log
""".split()

ROOTS = """
cache index store queue stream shard node cluster router gateway proxy broker worker scheduler
planner parser lexer compiler linker loader runtime kernel driver socket buffer pipeline channel
handler listener watcher monitor tracer profiler logger metric counter gauge histogram sampler
encoder decoder codec cipher signer verifier resolver registry catalog manifest bundle package
module plugin adapter bridge connector client service daemon agent replica snapshot journal ledger
vault locker mutex latch barrier fence
""".split()

TITLES = [
    "{A} and {b}",
    "{A} {b}",
    "Notes on {a}",
    "{A} runbook",
    "{A} decisions",
    "Working with {a}",
    "{A} migration to {b}",
    "{A} incidents",
]


def vocabulary() -> list[str]:
    """~3,000 words, most frequent first: common English, then technical compounds."""
    rng = random.Random(f"{SEED}-vocabulary")
    common = list(dict.fromkeys(COMMON))
    technical = [p + r for p in PREFIXES for r in ROOTS if p != r and not r.startswith(p)]
    technical = [w for w in dict.fromkeys(technical) if w not in common]
    rng.shuffle(technical)
    return (common + technical)[:3000]


class Corpus:
    """Seeded generator of Markdown memory files and queries over one vocabulary."""

    def __init__(self) -> None:
        self.words = vocabulary()
        weights = [1.0 / (rank + 3) for rank in range(len(self.words))]  # Zipf-Mandelbrot
        self.cum = list(np.cumsum(weights))
        self.content = [(w, c) for w, c in zip(self.words, weights, strict=True)]
        self.content = [(w, c) for w, c in self.content if w not in STOPWORDS]
        self.content_cum = list(np.cumsum([c for _, c in self.content]))
        common = set(COMMON)
        self.technical = [w for w in self.words if w not in common]

    def sentence(self, rng: random.Random) -> str:
        words = rng.choices(self.words, cum_weights=self.cum, k=rng.randint(8, 25))
        if rng.random() < 0.3:  # names of things are what people remember
            words[rng.randrange(len(words))] = rng.choice(self.technical)
        return " ".join(words).capitalize() + "."

    def query(self, rng: random.Random) -> str:
        words = rng.choices([w for w, _ in self.content], cum_weights=self.content_cum, k=6)
        return " ".join(words[: rng.randint(2, 6)])

    def file(self, rng: random.Random, entries: int) -> str:
        a, b = rng.choice(self.technical), rng.choice(self.technical)
        title = rng.choice(TITLES).format(a=a, b=b, A=a.capitalize())
        lines = [f"# {title}", ""]
        sections = 1 if entries <= 3 else rng.randint(2, 4)
        cuts = sorted(rng.sample(range(1, entries), sections - 1)) if sections > 1 else []
        bounds = [0, *cuts, entries]
        for s in range(sections):
            title = rng.choice(
                ["Facts", "Preferences", "Patterns", "Skills", "Decisions", "Open questions"]
                + [f"{rng.choice(self.technical).capitalize()} {rng.choice(self.words)}"] * 3
            )
            lines += [f"## {title}", ""]
            for _ in range(bounds[s], bounds[s + 1]):
                line = "- " + self.sentence(rng)
                if rng.random() < 0.35:
                    kind = rng.choice(["fact", "fact", "preference", "pattern", "skill"])
                    line += (
                        f" <!-- mdmem id=m-{rng.getrandbits(40):010x} type={kind} "
                        f"importance={rng.choice([0.4, 0.5, 0.6, 0.7, 0.8])} "
                        f"created=2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d} -->"
                    )
                lines.append(line)
            lines.append("")
        return "\n".join(lines)

    def workspace(self, root: Path, files: int, entries: Callable[[random.Random], int]) -> Path:
        """A fresh workspace of ``files`` files, 100 per folder; same arguments, same bytes."""
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        (root / "mdmem.toml").write_text('mode = "full"\nagent = "bench"\n', encoding="utf-8")
        rng = random.Random(f"{SEED}-{root.name}-{files}")
        for i in range(files):
            folder = root / "notes" / f"area-{i // FILES_PER_FOLDER:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            text = self.file(rng, entries(rng))
            (folder / f"note-{i:05d}.md").write_text(text, encoding="utf-8")
        return root


# ---- helpers ---------------------------------------------------------------------------------


class PrecomputedEmbedder:
    """Stands in for the model during ranking-only timings: returns vectors embedded up front."""

    def __init__(self, model_id: str, vectors: dict[str, np.ndarray]) -> None:
        self.model_id = model_id
        self.vectors = vectors

    def embed(self, texts: Sequence[str], progress: object = None) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile (of 7 runs: the slowest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} / {p95(values) * 1000:.1f}"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def disk_mb(path: Path) -> float:
    return path.stat().st_size / 1e6 if path.exists() else 0.0


def chunk_count(ws: Workspace) -> int:
    return ws.index._backend.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]


def goal(ok: bool) -> str:
    return "[green]met[/]" if ok else "[red]missed[/]"


def fill_random_vectors(ws: Workspace, model_id: str, rng: np.random.Generator) -> int:
    """A random unit vector for every distinct chunk text, as if the model had embedded it."""
    conn = ws.index._backend.conn
    hashes = [r[0] for r in conn.execute("SELECT DISTINCT text_hash FROM chunks")]
    for start in range(0, len(hashes), 5000):
        part = hashes[start : start + 5000]
        vectors = rng.standard_normal((len(part), DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT OR REPLACE INTO embeddings(model, text_hash, dim, vector) VALUES (?, ?, ?, ?)",
            [(model_id, h, DIM, v.tobytes()) for h, v in zip(part, vectors, strict=True)],
        )
        conn.execute("COMMIT")
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('generation', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('embed_model', ?) ON CONFLICT(key) "
        "DO UPDATE SET value = excluded.value",
        (model_id,),
    )
    return len(hashes)


# ---- the measurements ------------------------------------------------------------------------


def cold_indexing(corpus: Corpus, embedder: SentenceTransformerEmbedder, log: Console) -> Table:
    files = 200
    source = corpus.workspace(WORK / "cold-source", files, lambda _: ENTRIES_PER_FILE)
    log.log(f"cold indexing: {files} files, {COLD_ROUNDS} rounds")
    runs: dict[str, list[float]] = {"plain": [], "sync": [], "model": []}
    chunks = embedded_chunks = 0
    texts: list[str] = []
    for n in range(COLD_ROUNDS):  # alternated, best of each: a busy neighbour hits both alike
        plain = shutil.copytree(source, WORK / f"cold-plain-{n}")
        embedded = shutil.copytree(source, WORK / f"cold-embed-{n}")
        with Workspace(plain, embedder=embedder) as ws:
            runs["plain"].append(timed(lambda: ws.index.update(embed=False)))
            chunks = chunk_count(ws)
            texts = [r[0] for r in ws.index._backend.conn.execute("SELECT embed_text FROM chunks")]
        with Workspace(embedded, embedder=embedder) as ws:
            runs["sync"].append(timed(lambda: ws.index.update()))
            embedded_chunks = ws.index._backend.conn.execute(
                "SELECT count(*) FROM embeddings"
            ).fetchone()[0]
        runs["model"].append(timed(lambda texts=texts: embedder.embed(texts)))
        log.log(
            f"cold indexing, round {n + 1}: sync() {runs['sync'][-1]:.1f} s, "
            f"model {runs['model'][-1]:.1f} s"
        )
    t_plain, t_sync, t_model = min(runs["plain"]), min(runs["sync"]), min(runs["model"])

    plain_rate, sync_rate, model_rate = chunks / t_plain, chunks / t_sync, len(texts) / t_model
    share = sync_rate / model_rate
    table = Table(title=f"1. Cold indexing: {chunks:,} chunks ({files} files x 10 entries)")
    table.add_column("what")
    table.add_column("seconds", justify="right")
    table.add_column("chunks/s", justify="right")
    table.add_row("(a) sync(embed=False)", f"{t_plain:.2f}", f"{plain_rate:,.0f}")
    table.add_row(
        f"(b) sync() with embedding ({embedded_chunks:,} vectors)",
        f"{t_sync:.2f}",
        f"{sync_rate:,.0f}",
    )
    table.add_row(
        f"(c) raw model: embed({len(texts):,} texts)", f"{t_model:.2f}", f"{model_rate:,.0f}"
    )
    table.add_section()
    table.add_row("(b) / (c), goal >= 90 %", f"{share:.0%}", goal(share >= 0.9))
    table.caption = (
        f"Best of {COLD_ROUNDS} alternated rounds, each on a fresh copy. Model loaded "
        f"beforehand; (b) and (c) use the same model ({torch.get_num_threads()} torch threads)."
    )
    return table


def noop_reindex(corpus: Corpus, log: Console) -> Table:
    files = 10_000
    root = corpus.workspace(WORK / "noop", files, lambda rng: rng.randint(1, 3))
    log.log(f"no-op re-index: {files:,} files written, indexing")
    with Workspace(root) as ws:
        t_build = timed(lambda: ws.index.update(embed=False))
        chunks = chunk_count(ws)
        log.log(f"no-op re-index: built in {t_build:.1f} s, timing")
        runs: dict[str, list[float]] = {"scan": [], "changed": [], "sync": []}
        for _ in range(NOOP_RUNS):
            runs["scan"].append(timed(lambda: scan(ws.root, ws.config.files)))
            runs["changed"].append(timed(ws.index._backend.changed_files))
            report = ws.index.update(embed=False)
            assert report.changed == 0, report
            runs["sync"].append(report.seconds)
    table = Table(title=f"2. No-op re-index: {files:,} files ({chunks:,} chunks), nothing changed")
    table.add_column("what")
    table.add_column("median s", justify="right")
    table.add_column(f"p95 s ({NOOP_RUNS} runs)", justify="right")
    table.add_column("goal <= 1 s", justify="right")
    table.add_row(
        "sync(embed=False)",
        f"{statistics.median(runs['sync']):.3f}",
        f"{p95(runs['sync']):.3f}",
        goal(p95(runs["sync"]) <= 1.0),
    )
    table.add_row(
        "  of which index.changed_files()",
        f"{statistics.median(runs['changed']):.3f}",
        f"{p95(runs['changed']):.3f}",
        "",
    )
    table.add_row(
        "    of which scan() (walk + stat)",
        f"{statistics.median(runs['scan']):.3f}",
        f"{p95(runs['scan']):.3f}",
        "",
    )
    table.caption = (
        f"Initial full sync(embed=False): {t_build:.1f} s ({chunks / t_build:,.0f} chunks/s)."
    )
    return table


@contextlib.contextmanager
def all_terms() -> Iterator[None]:
    """Keyword queries keep every term and FTS5 scores every matching row (as before
    ``index/sqlite/scale/keyword.py``)."""
    with keyword_settings(POSTINGS_BUDGET=sys.maxsize, STAGES_FROM=sys.maxsize):
        yield


@contextlib.contextmanager
def keyword_settings(**values: int) -> Iterator[None]:
    """``index/sqlite/scale/keyword.py``'s constants set to ``values`` for a while."""
    saved = {name: getattr(keyword, name) for name in values}
    for name, value in values.items():
        setattr(keyword, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(keyword, name, value)


def caught_up(ws: Workspace, timeout: float = 120.0) -> None:
    """Wait until the watcher says the index caught up (its start-up scan is done)."""
    try:
        from mdmem.live.watch import watcher_caught_up
    except ImportError:  # (mdmem before issue 15: no watcher gives its word; wait for its scan)
        time.sleep(3)
        return
    deadline = time.monotonic() + timeout
    while (
        v := watcher_caught_up(ws.root)
    ) is None or v.generation != ws.index._backend.generation():
        if time.monotonic() > deadline:
            raise RuntimeError("the watcher never said the index caught up")
        time.sleep(0.05)


def one_change(ws: Workspace, model_id: str, query: np.ndarray, runs: int = 7) -> str:
    """After one file gains an entry (indexed, its vector stored): the ms the next search pays
    to bring the in-memory layout and vectors in step, each (embedding excluded); medians of
    ``runs`` changes, each to another file."""
    notes = sorted((ws.root / "notes").rglob("*.md"))
    times = [_one_change(ws, notes[n], n, model_id, query) for n in range(runs)]
    layout, vectors = (statistics.median(t[i] for t in times) * 1000 for i in (0, 1))
    return f"{layout:.0f} + {vectors:.0f}"


def _one_change(
    ws: Workspace, note: Path, n: int, model_id: str, query: np.ndarray
) -> tuple[float, float]:
    index = ws.index._backend
    note.write_text(note.read_text() + f"\n- A new entry, number {n}, about the ledger export\n")
    ws.index.update(embed=False)
    (text_hash,) = index.conn.execute(
        "SELECT c.text_hash FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM embeddings e "
        "WHERE e.model = ? AND e.text_hash = c.text_hash)",
        (model_id,),
    ).fetchone()
    vector = np.random.default_rng(n).standard_normal(DIM).astype(np.float32)
    with index.conn:
        index.conn.execute(
            "INSERT INTO embeddings(model, text_hash, dim, vector) VALUES (?, ?, ?, ?)",
            (model_id, text_hash, DIM, (vector / np.linalg.norm(vector)).tobytes()),
        )
        index.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                           "WHERE key = 'generation'")  # fmt: skip
    return timed(index.layout), timed(lambda: index.vector_cache(model_id))


def search_at(
    size: int,
    corpus: Corpus,
    embedder: SentenceTransformerEmbedder,
    queries: list[str],
    warmup: list[str],
    query_vectors: dict[str, np.ndarray],
    log: Console,
) -> tuple[list[list[str]], list[str]]:
    """Build a ``size``-chunk index and time search in every mode; return table rows."""
    files = max(1, size // ENTRIES_PER_FILE)
    root = corpus.workspace(WORK / f"search-{size}", files, lambda _: ENTRIES_PER_FILE)
    log.log(f"search at {size:,}: {files:,} files written, indexing")
    latency_rows: list[list[str]] = []
    with Workspace(root, embedder=embedder) as ws:
        t_build = timed(lambda: ws.index.update(embed=False))
        chunks = chunk_count(ws)
        vectors = fill_random_vectors(ws, embedder.model_id, np.random.default_rng(SEED + size))
        log.log(f"search at {size:,}: {chunks:,} chunks indexed in {t_build:.1f} s, searching")
        index = ws.index._backend
        t_layout = timed(index.layout)
        t_vectors = timed(lambda: index.vectors(embedder.model_id))
        matrix_mb = index.vectors(embedder.model_id).nbytes / 1e6
        stand_in = PrecomputedEmbedder(embedder.model_id, query_vectors)
        config = ws.config.search

        def ranked(model: object, query: str, mode: str) -> object:
            return search(
                index,
                model,  # type: ignore[arg-type]
                query,
                k=config.k,
                mode=mode,
                config=config,
                filters=Filters(),
                track_access=False,
            )

        for n, mode in enumerate(MODE_ORDER):
            for query in warmup:
                ranked(stand_in, query, mode)
                ws.search(query, mode=mode, track_access=False)
            # common terms scored last, then every term by FTS5, in separate passes (each
            # search after one that scored every term met cold caches; see million.py)
            a = [timed(lambda q=q, m=mode: ranked(stand_in, q, m)) for q in queries]
            with all_terms():
                a_all = [timed(lambda q=q, m=mode: ranked(stand_in, q, m)) for q in queries]
            b = [timed(lambda q=q, m=mode: ranked(embedder, q, m)) for q in queries]
            c = [
                timed(lambda q=q, m=mode: ws.search(q, mode=m, track_access=False)) for q in queries
            ]
            with ws.watch():  # (d): a live watcher says the index caught up
                caught_up(ws)
                d = [
                    timed(lambda q=q, m=mode: ws.search(q, mode=m, track_access=False))
                    for q in queries
                ]
            cache = f"{(t_layout + t_vectors) * 1000:.0f}" if n == 0 else ""
            absorb = one_change(ws, embedder.model_id, query_vectors[queries[0]]) if n == 0 else ""
            latency_rows.append(
                [f"{chunks:,}" if n == 0 else "", mode, ms(a), ms(b), ms(c), ms(d), cache, absorb]
            )
            if mode != "vector":
                latency_rows.append(["", f"{mode}, all terms", ms(a_all), "", "", "", "", ""])
            if size >= 100_000 and mode == "hybrid":
                log.log(f"hybrid (a) p95 at {chunks:,} chunks: {p95(a) * 1000:.1f} ms (goal 30)")
        db = ws.index._backend.db_path
        memory_row = [
            f"{chunks:,}",
            f"{files:,}",
            f"{t_build:.1f}",
            f"{chunks / t_build:,.0f}",
            f"{vectors:,}",
            f"{matrix_mb:.0f}",
            f"{disk_mb(db):.0f}",
            f"{disk_mb(Path(str(db) + '-wal')):.0f}",
            f"{peak_rss_mb():.0f}",
        ]
    gc.collect()
    return latency_rows, memory_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000",
        help="index sizes (chunks) for the search benchmark, comma-separated",
    )
    parser.add_argument("--quick", action="store_true", help="search at 1,000 and 10,000 only")
    parser.add_argument(
        "--search-only", action="store_true", help="skip cold indexing and the no-op re-index"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads for the embedding model (default: torch's own, one per core)",
    )
    args = parser.parse_args()
    sizes = [1000, 10_000] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    started = time.perf_counter()
    console = Console()
    if not console.is_terminal:
        console.width = 110  # rich's default of 80 columns would squeeze the tables
    log = Console(stderr=True)

    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    corpus = Corpus()
    rng = random.Random(f"{SEED}-queries")
    queries = [corpus.query(rng) for _ in range(QUERIES)]
    warmup = [corpus.query(rng) for _ in range(WARMUP)]

    log.log("loading the embedding model")
    if args.threads:
        torch.set_num_threads(args.threads)
    embedder = SentenceTransformerEmbedder()
    t_load = timed(lambda: embedder.embed(["warm up the model"] * 64))
    all_queries = list(dict.fromkeys(queries + warmup))
    query_vectors = dict(zip(all_queries, embedder.embed(all_queries), strict=True))
    baseline_rss = peak_rss_mb()

    if not args.search_only:
        console.print(cold_indexing(corpus, embedder, log))
        console.print(noop_reindex(corpus, log))

    latency = Table(title=f"3. Search latency, p50 / p95 ms over {QUERIES} queries")
    for name in ("chunks", "mode", "(a) ranking", "(b) + embed query", "(c) ws.search",
                 "(d) + watcher", "cache ms", "1 file ms"):  # fmt: skip
        latency.add_column(name, justify="left" if name == "mode" else "right")
    memory = Table(title="4. Memory and disk after each size")
    for name in (
        "chunks",
        "files",
        "index s",
        "chunks/s",
        "vectors",
        "matrix MB",
        "db MB",
        "WAL MB",
        "peak RSS MB",
    ):
        memory.add_column(name, justify="right")
    for size in sizes:
        rows, row = search_at(size, corpus, embedder, queries, warmup, query_vectors, log)
        for r in rows:
            latency.add_row(*r)
        latency.add_section()
        memory.add_row(*row)
    latency.caption = (
        "(a) query vector precomputed; (b) + real query embedding; (c) Workspace.search incl. "
        "freshness check; (d) the same while a watcher runs and says the index caught up "
        "(no stat). "
        "1 file ms: after one file gains an entry, layout + vectors brought in step. "
        "Vectors are random unit float32 (384-d) under the real model id, not "
        "real embeddings (embedding 100k chunks would take ~15 min); math and sizes identical. "
        "Goal: hybrid (a) p95 <= 30 ms at 100k chunks. cache ms: one-off layout + vector load."
    )
    memory.caption = (
        f"Peak RSS before any index (model loaded, {t_load:.1f} s): {baseline_rss:.0f} MB. "
        "index s / chunks/s: full sync(embed=False)."
    )
    console.print(latency)
    console.print(memory)
    console.print(f"Total run time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
