"""Weigh retrieval ideas on LoCoMo without rebuilding a workspace: every variant runs the real
``mdmem.index.search.search`` over the workspaces ``benchmarks/locomo.py`` built and indexed
(run it first), with one part swapped:

  ctx        the vector side scores each turn of an event stream by an embedding of the turn
             with the turn before it (the reply "Yes, I did!" means what the question it
             answers asked); those texts are embedded once and kept in .bench/locomo/ctx-*.npz.
             Weighed on indexes of chunker version 6; version 7 made it the default (its
             indexed text already holds the turn before, so run this idea on the code before)
  query-*    the question with its scaffolding stripped by rule ("Would Tim likely enjoy X?"
             → "Tim enjoy X"), on the vector side, the keyword side or both
  sessions-* the returned hits reordered so that part of the budget goes to distinct sessions
             (after the first ``P`` hits, the best hit of each further session scoring at
             least ``t`` of the top one, at most ``S`` of them), then the rest in rank order
  sentences  the vector side also scores each chunk by its best sentence (each sentence of a
             turn embedded alone, with the speaker's name): the chunk's cosine, the best
             sentence's (max) or a mix; the sentence vectors are kept in .bench/locomo/
  keyword-before  the keyword side gains a fourth FTS5 column holding an event-stream turn's
             turn before (the keyword twin of the turn context), at BM25 weight w

Usage:  .venv/bin/python benchmarks/locomo_offline.py
            --idea ctx|query|sessions|sentences|keyword-before
            [--renderings a,b,c] [--convs tune] [--report] [--context-cost]
``--report`` prints bootstrap intervals per split and category (as ``locomo.py``) for the
variants named by ``--variants``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo

from mdmem import Workspace
from mdmem.config import SearchConfig
from mdmem.index.backend import Scored
from mdmem.index.chunks import chunk_document
from mdmem.index.embed import SentenceTransformerEmbedder
from mdmem.index.fts import fts_query
from mdmem.index.search import Filters, Hit, search
from mdmem.index.sqlite.db import BM25_WEIGHTS, FTS_TOKENIZER
from mdmem.markdown.parse import parse_document

Rows = list[tuple[locomo.Question, dict[str, float]]]


# ---- vector side: turns embedded with the turn before them -----------------------------------


SHORT = 12
"""``prev-short``: only turns of at most this many words are embedded with the one before."""


def chunk_texts(index: Any) -> list[str]:
    layout = index.layout()
    texts = dict(index.conn.execute("SELECT rowid, text FROM chunks").fetchall())
    return [texts[r] for r in layout.rowids.tolist()]


def context_texts(index: Any, style: str) -> list[str]:
    """The embedding text of every chunk in layout order under ``style``: ``own`` (as
    indexed), ``prev`` (an event-stream turn with the turn before it)."""
    layout = index.layout()
    rows = dict(index.conn.execute("SELECT rowid, embed_text FROM chunks").fetchall())
    texts = dict(index.conn.execute("SELECT rowid, text FROM chunks").fetchall())
    out = []
    for i, rowid in enumerate(layout.rowids.tolist()):
        own = rows[rowid]
        p = int(layout.prev[i])
        if style == "own" or not layout.stream[i] or p < 0:
            out.append(own)
            continue
        header, _, body = own.partition("\n")
        before = texts[int(layout.rowids[p])]
        out.append(f"{header}\n{before}\n{body}")
    return out


def context_matrix(
    index: Any, style: str, model: SentenceTransformerEmbedder, tag: str, console: Console
) -> np.ndarray:
    texts = context_texts(index, style)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:12]
    path = locomo.WORK / f"ctx-{tag}-{style}-{digest}.npz"
    if path.exists():
        return np.load(path)["vectors"]
    started = time.perf_counter()
    vectors = model.embed(texts)
    seconds = time.perf_counter() - started
    np.savez(path, vectors=vectors, seconds=seconds, n=len(texts))
    console.log(
        f"{tag} {style}: {len(texts)} texts in {seconds:.1f} s ({len(texts) / seconds:.1f}/s)"
    )
    return vectors


def context_cost(samples: list[dict], console: Console, n: int = 200, rounds: int = 3) -> None:
    """Indexing cost of the context: the first ``n`` turns of rendering a, conversation 0,
    chunked as the index does, embedded as the chunker does now (with the turn before) and as
    it did before (header and the turn alone), alternately ``rounds`` times: texts/s of each,
    and their ratio, which the machine's load affects less than either."""
    model = locomo.SentenceTransformerEmbedder()
    root, _ = locomo.build(samples[0], "a", False)
    chunks = [
        c
        for path in sorted((root / ".sessions").glob("*.md"))
        for c in chunk_document(parse_document(f".sessions/{path.name}", path.read_text()))
    ][:n]
    texts = {
        "with the turn before": [c.embed_text for c in chunks],
        "turn alone": [f"{c.embed_text.partition(chr(10))[0]}\n{c.text}" for c in chunks],
    }
    model.embed(texts["turn alone"][:32])  # load the model
    took: dict[str, list[float]] = {k: [] for k in texts}
    for _ in range(rounds):
        for name, batch in texts.items():
            started = time.perf_counter()
            model.embed(batch)
            took[name].append(time.perf_counter() - started)
    rate = {k: n / statistics.median(v) for k, v in took.items()}
    for name, batch in texts.items():
        words = statistics.fmean(len(t.split()) for t in batch)
        console.print(f"{name}: {rate[name]:.1f} texts/s ({words:.0f} words a text)")
    ratio = rate["with the turn before"] / rate["turn alone"]
    console.print(f"embedding {n} turns × {rounds} rounds: the context costs {ratio:.2f}× the rate")


class VectorSwap:
    """An index whose vector side scores against other chunk vectors (``mix`` of the
    indexed ones: 0 = only the indexed, 1 = only the others); the rest is the real index."""

    def __init__(self, index: Any, own: np.ndarray, other: np.ndarray, mix: float) -> None:
        self._index, self._own, self._other, self._mix = index, own, other, mix

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def vector_scan(self, model_id: str, *, filters=None):  # type: ignore[no-untyped-def]
        return self

    def scan(self, query: np.ndarray) -> None:
        scores = (1 - self._mix) * (self._own @ query) + self._mix * (self._other @ query)
        self._scores = Scored(None, scores.astype(np.float64))

    def scored(self, keyword: Scored | None) -> Scored:
        return self._scores


# ---- vector side: the best sentence of a turn ------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])|\s+(?=\[shares )")
_MARKUP = (
    (re.compile(r"\*\*"), ""),
    (re.compile(r"^\s*[-*]\s+"), ""),
    (re.compile(r"^\d\d:\d\d:\d\d \[\w+\] "), ""),  # rendering c's time and kind
    (re.compile(r" \[D\d+:\d+\]"), ""),  # rendering b's dia_id
)
_SPEAKER = re.compile(r"^([A-Z][\w .'-]{0,40}): (.*)$", re.S)


def sentences(text: str) -> list[str]:
    """A chunk's sentences (a photo caption is one), each as ``Speaker: sentence``."""
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    text = text.strip()
    said = _SPEAKER.match(text)
    who, body = (said.group(1), said.group(2)) if said else ("", text)
    parts = [p.strip() for p in _SENTENCE_END.split(body) if p.strip()] or [body]
    return [f"{who}: {p}" if who else p for p in parts]


def sentence_matrix(
    index: Any, model: SentenceTransformerEmbedder
) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk's sentence vectors (layout order) and the first row of each chunk's."""
    texts, owners = [], []
    for i, chunk in enumerate(chunk_texts(index)):
        for sentence in sentences(chunk):
            texts.append(sentence)
            owners.append(i)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:12]
    path = locomo.WORK / f"sentences-{digest}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        vectors = model.embed(texts).astype(np.float32)
        np.save(path, vectors)
    owner = np.array(owners)
    return vectors, np.flatnonzero(np.append(True, owner[1:] != owner[:-1]))


class SentenceSwap:
    """An index whose vector side scores a chunk by ``(1 - mix)`` × its own cosine + ``mix`` ×
    its best sentence's (``mix`` None: the larger of the two)."""

    def __init__(
        self, index: Any, own: np.ndarray, sent: tuple[np.ndarray, np.ndarray], mix: float | None
    ) -> None:
        self._index, self._own, self._mix = index, own, mix
        self._sentences, self._starts = sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def vector_scan(self, model_id: str, *, filters=None):  # type: ignore[no-untyped-def]
        return self

    def scan(self, query: np.ndarray) -> None:
        own = self._own @ query
        best = np.maximum.reduceat(self._sentences @ query, self._starts)
        mixed = np.maximum(own, best) if self._mix is None else own + self._mix * (best - own)
        self._scores = Scored(None, mixed.astype(np.float64))

    def scored(self, keyword: Scored | None) -> Scored:
        return self._scores


# ---- keyword side: the turn before in its own column ----------------------------------------


class KeywordBefore:
    """An index whose keyword side is an in-memory FTS5 table of the same columns (and
    tokenizer) plus ``before``, an event-stream turn's turn before, at BM25 weight ``weight``."""

    def __init__(self, index: Any, weight: float) -> None:
        self._index = index
        self._layout = index.layout()
        content = {
            r[0]: r[1:] for r in index.conn.execute("SELECT id, c0, c1, c2 FROM chunks_fts_content")
        }
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(text, heading, context, before, "
            f"tokenize='{FTS_TOKENIZER}')"
        )
        rowids = self._layout.rowids.tolist()
        for i, rowid in enumerate(rowids):
            p = int(self._layout.prev[i])
            before = content[rowids[p]][0] if self._layout.stream[i] and p >= 0 else ""
            self.conn.execute(
                "INSERT INTO t(rowid, text, heading, context, before) VALUES (?, ?, ?, ?, ?)",
                (rowid, *content[rowid], before),
            )
        weights = ", ".join(str(w) for w in (*BM25_WEIGHTS, weight))
        self.conn.execute(f"INSERT INTO t(t, rank) VALUES('rank', 'bm25({weights})')")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        match = fts_query(query)
        rows = [] if match is None else self.conn.execute(
            "SELECT rowid, -rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, limit)
        ).fetchall()  # fmt: skip
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        scores = np.maximum(np.array([r[1] for r in rows], dtype=np.float64), 1e-9)
        return Scored(self._layout.positions(ids) if len(ids) else ids, scores)


# ---- query side: scaffolding stripped by rule -------------------------------------------------

_LEAD = re.compile(
    r"^(?:based on [^,]+,\s*|according to [^,]+,\s*)?"
    r"(?:(?:what|which|who|whom|whose|where|when|why|how)(?:\s+(?:many|much|long|often|kind|"
    r"kinds|type|types|sort|sorts)(?:\s+of)?)?\s+)?"
    r"(?:(?:is|are|was|were|do|does|did|has|have|had|would|could|might|can|will|should|may)"
    r"\s+)?(?:it\s+likely\s+that\s+|it\s+possible\s+that\s+)?",
    re.I,
)
_FILLER = re.compile(
    r"\b(?:likely|probably|possibly|still|be considered|answer yes or no\.?|"
    r"might|would|could|do|does|did|the names? of)\b",
    re.I,
)


def stripped(question: str) -> str:
    """The question without its scaffolding: the leading wh-word and auxiliary, hedges
    ("likely", "would"), and "Answer yes or no"; the question itself when little is left."""
    text = _LEAD.sub("", question.strip(), count=1)
    text = _FILLER.sub(" ", text)
    text = " ".join(text.replace("?", " ").split()).strip(" ,.")
    return text if len(text.split()) >= 2 else question


class QueryEmbedder:
    """Embeds ``rewrite(query)`` (or the normalised mean of it and the query itself)."""

    def __init__(self, cached: locomo.CachedEmbedder, rewrite: Callable[[str], str], mix: bool):
        self.cached, self.rewrite, self.mix = cached, rewrite, mix
        self.model_id = cached.model_id

    def embed(self, texts, progress=None):  # type: ignore[no-untyped-def]
        out = self.cached.embed([self.rewrite(t) for t in texts])
        if self.mix:
            out = out + self.cached.embed(list(texts))
            out = out / np.linalg.norm(out, axis=1, keepdims=True)
        return out


class KeywordRewrite:
    def __init__(self, index: Any, rewrite: Callable[[str], str]) -> None:
        self._index, self._rewrite = index, rewrite

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        return self._index.keyword_candidates(self._rewrite(query), limit)


# ---- returned context: distinct sessions -----------------------------------------------------


def reserve_sessions(hits: Sequence[Hit], first: int, sessions: int, floor: float) -> list[Hit]:
    """The first ``first`` hits, then the best hit of up to ``sessions`` further sessions that
    score at least ``floor`` of the top hit, then the rest in rank order."""
    if not hits:
        return []
    out = list(hits[:first])
    seen = {h.path for h in out}
    top = hits[0].score
    picked: list[Hit] = []
    for hit in hits[first:]:
        if len(picked) >= sessions or hit.score < floor * top:
            break
        if hit.path not in seen:
            seen.add(hit.path)
            picked.append(hit)
    taken = {id(h) for h in out + picked}
    return out + picked + [h for h in hits if id(h) not in taken]


# ---- runs ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setup:
    vector: tuple[str, float] = ("own", 0.0)
    """(context style, mix with the indexed vectors)."""
    query: str = "none"
    """none, vector, vector-mix, keyword, both."""
    sessions: tuple[int, int, float] | None = None
    sentences: tuple[str, float | None] | None = None
    """("max", None) or ("mix", share of the best sentence's cosine)."""
    keyword_before: float | None = None
    """BM25 weight of the turn-before column (None: the index's own keyword side)."""


def variants(idea: str) -> dict[str, Setup]:
    grids = {
        "default": {"default": Setup()},
        "ctx": {
            "default": Setup(),
            **{
                f"{style} mix {mix}": Setup(vector=(style, mix))
                for style in ("prev", "prev-short")
                for mix in (0.5, 1.0)
            },
        },
        "query": {
            "default": Setup(),
            **{
                f"strip {side}": Setup(query=side)
                for side in ("vector", "vector-mix", "keyword", "both")
            },
        },
        "sessions": {
            "default": Setup(),
            **{
                f"first {p} sessions {s} floor {t}": Setup(sessions=(p, s, t))
                for p in (0, 3, 5, 10)
                for s in (3, 5, 10)
                for t in (0.3, 0.5, 0.7)
            },
        },
        "sentences": {
            "default": Setup(),
            "max": Setup(sentences=("max", None)),
            **{f"mix {m}": Setup(sentences=("mix", m)) for m in (0.3, 0.5)},
        },
        "keyword-before": {
            "default": Setup(),
            **{f"before {w}": Setup(keyword_before=w) for w in (0.0, 0.1, 0.3)},
        },
    }
    return grids[idea]


def run(
    samples: list[dict],
    renderings: Sequence[str],
    convs: Sequence[int],
    setups: dict[str, Setup],
    console: Console,
) -> dict[str, dict[str, Rows]]:
    """Per rendering and variant, the scored questions of ``convs``."""
    model = locomo.SentenceTransformerEmbedder()
    qs = locomo.questions(samples)
    texts = [q.text for q in qs]
    cached = locomo.CachedEmbedder(model, texts + [stripped(t) for t in texts])
    config = SearchConfig()
    out: dict[str, dict[str, Rows]] = defaultdict(lambda: defaultdict(list))
    for rendering in renderings:
        for conv in convs:
            root, turns = locomo.build(samples[conv], rendering, False)
            ws = Workspace.open(root, embedder=cached)
            ws.index.update()
            index = ws.index._backend
            own = index.vectors(model.model_id)
            others = {}
            if any(s.vector[0] != "own" for s in setups.values()):
                prev = context_matrix(index, "prev", model, f"{rendering}{conv}", console)
                short = np.array([len(t.split()) <= SHORT for t in chunk_texts(index)])
                others = {"prev": prev, "prev-short": np.where(short[:, None], prev, own)}
            sent = None
            if any(s.sentences for s in setups.values()):
                sent = sentence_matrix(index, model)
            ranked: dict[tuple, list[Hit]] = {}
            for name, setup in setups.items():
                idx: Any = index
                if setup.vector[0] != "own":
                    idx = VectorSwap(index, own, others[setup.vector[0]], setup.vector[1])
                if setup.sentences and sent is not None:
                    idx = SentenceSwap(idx, own, sent, setup.sentences[1])
                if setup.keyword_before is not None:
                    idx = KeywordBefore(idx, setup.keyword_before)
                emb: Any = cached
                if setup.query in ("vector", "both", "vector-mix"):
                    emb = QueryEmbedder(cached, stripped, setup.query == "vector-mix")
                if setup.query in ("keyword", "both"):
                    idx = KeywordRewrite(idx, stripped)
                for q in (q for q in qs if q.conv == conv):
                    key = (setup.vector, setup.query, setup.sentences, setup.keyword_before, q.text)
                    if key not in ranked:  # a reordering reuses the ranking it reorders
                        ranked[key] = search(
                            idx, emb, q.text, k=200, mode="hybrid", config=config,
                            filters=Filters(), track_access=False,
                        )  # fmt: skip
                    hits = ranked[key]
                    if setup.sessions:
                        hits = reserve_sessions(hits, *setup.sessions)
                    out[rendering][name].append((q, locomo.score(hits, q.gold, turns)))
            ws.close()
            console.log(f"{rendering}: conversation {conv} done")
    return out


def cells(rows: Rows) -> list[str]:
    out = [f"{statistics.fmean(s[m] for _, s in rows):.3f}" for m in locomo.METRICS]
    for category in locomo.CATEGORIES.values():
        values = [s["rec@2000"] for q, s in rows if q.category == category]
        out.append(f"{statistics.fmean(values):.3f}" if values else "-")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idea", default="default")
    parser.add_argument("--renderings", default="a,b,c")
    parser.add_argument("--convs", default="tune")
    parser.add_argument("--variants", help="comma-separated variant names (default: all)")
    parser.add_argument("--report", action="store_true", help="bootstrap intervals per split")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--context-cost", action="store_true", help="only time the embedding")
    args = parser.parse_args()
    console = Console(width=200)
    samples = json.loads(locomo.DATA.read_text())
    if args.context_cost:
        context_cost(samples, console)
        return
    setups = variants(args.idea)
    if args.variants:
        setups = {k: v for k, v in setups.items() if k in args.variants.split(",")}
    convs = locomo.parse_convs(args.convs)
    renderings = args.renderings.split(",")
    results = run(samples, renderings, convs, setups, console)
    table = Table(
        title=f"{args.idea} on conversations {args.convs} (hybrid, rec@2000 per category)"
    )
    for column in ("rendering", "variant", *locomo.METRICS, *locomo.CATEGORIES.values()):
        table.add_column(column, justify="left" if column in ("rendering", "variant") else "right")
    totals: dict[str, Rows] = defaultdict(list)
    for rendering in renderings:
        for name in setups:
            rows = results[rendering][name]
            totals[name] += rows
            table.add_row(rendering, name, *cells(rows))
        table.add_section()
    for name in setups:
        table.add_row("all", name, *cells(totals[name]))
    console.print(table)
    if args.report:
        for name in setups:
            console.rule(name)
            locomo.report(
                {
                    (r, name): locomo.Run(results[r][name], [0.0] * len(results[r][name]))
                    for r in renderings
                },
                [s for s in ("tune", "test", "all") if set(locomo.SPLITS[s]) & set(convs)],
                console,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    r: {n: [[q.text, s] for q, s in rows] for n, rows in v.items()}
                    for r, v in results.items()
                }
            )
        )


if __name__ == "__main__":
    main()
