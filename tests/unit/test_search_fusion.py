"""Fusion over the candidates only (issue 15): ``search`` scores the retrievers' candidates,
their neighbours and their sessions' chunks, never every chunk of the index. These tests
check it against the straightforward computation over every chunk: the same pool, in the same
order, with the same scores."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.config import SearchConfig
from mdmem.index.backend import ChunkLayout, Scored
from mdmem.index.filters import Filters
from mdmem.index.search import _candidates, _fuse, _gather, _rows, _with_context, search


def _dense_reference(
    keyword: np.ndarray,
    vector: np.ndarray | None,
    allowed: np.ndarray,
    layout: ChunkLayout,
    mode: str,
    config: SearchConfig,
) -> np.ndarray:
    """Every chunk's fused score, as ranking computed it before (dense arrays)."""
    keyword = np.where(allowed, keyword, 0.0)
    kw_top = float(keyword.max())
    kw = keyword / kw_top if kw_top > 0 else keyword
    if vector is None:
        fused = kw.copy()
    else:
        vec_top = float(vector[allowed].max()) if allowed.any() else 0.0
        vec = vector / vec_top if vec_top > 0 else np.zeros_like(vector)
        fused = vec if mode == "vector" else config.keyword_weight * kw + config.vector_weight * vec
    base = np.clip(fused, 0.0, None)
    out = fused.copy()
    if config.neighbour_weight > 0:
        prev = np.where(layout.prev >= 0, base[layout.prev], 0.0)
        nxt = np.where(layout.next >= 0, base[layout.next], 0.0)
        out += config.neighbour_weight * np.where(layout.stream, np.maximum(prev, nxt), base)
    if config.session_weight > 0:
        best = np.maximum.reduceat(np.clip(out, 0.0, None), layout.file_starts)
        out += config.session_weight * np.where(layout.stream, best[layout.file_of], base)
    out[~allowed] = 0.0
    return out


def _reference_pool(fused: np.ndarray, pool: int, min_relevance: float) -> np.ndarray:
    """The best ``pool`` positions at or above the floor, best first, ties in layout order."""
    top = fused.max()
    if top <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(len(fused)), -fused))
    return order[fused[order] >= max(min_relevance * top, np.finfo(float).tiny)][:pool]


def _layout(rng: np.random.Generator) -> ChunkLayout:
    """Files of 1-12 chunks; about half are sessions (some of their chunks not turns)."""
    rows = []
    for f in range(rng.integers(5, 40)):
        session = rng.random() < 0.5
        for _ in range(rng.integers(1, 13)):
            rows.append((len(rows) + 1, f"f{f:03d}.md", session and rng.random() < 0.9, False))
    return ChunkLayout.build(rows)


def _scored(rng: np.random.Generator, n: int, share: float, low: float, ties: bool) -> Scored:
    positions = np.flatnonzero(rng.random(n) < share)
    scores = rng.uniform(low, 1.0, len(positions))
    if ties:  # few distinct values: the pool's order and cut must break ties the same way
        scores = np.round(scores * 4) / 4
    return Scored(rng.permutation(positions), scores[: len(positions)])


@pytest.mark.parametrize("seed", range(200))
def test_fusion_over_the_candidates_is_the_dense_computation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    layout = _layout(rng)
    n = len(layout.rowids)
    config = SearchConfig(
        neighbour_weight=float(rng.choice([0.0, 0.3, 1.0])),
        session_weight=float(rng.choice([0.0, 0.4])),
        keyword_weight=float(rng.uniform(0.2, 1.5)),
        vector_weight=float(rng.uniform(0.2, 1.5)),
    )
    ties = bool(rng.random() < 0.3)
    keyword = _scored(rng, n, 0.15, 0.1, ties)
    vector: Scored | None = _scored(rng, n, 0.2, -0.3, ties)
    if rng.random() < 0.2:  # a retriever that scores every chunk (the float32 matrix)
        vector = Scored(None, rng.uniform(-0.3, 1.0, n))
    elif rng.random() < 0.2:  # no vectors
        vector = None
    mode = "hybrid" if vector is not None and rng.random() < 0.7 else "vector"
    mode = "keyword" if vector is None else mode
    if mode == "vector":
        keyword = Scored(np.zeros(0, dtype=np.int64), np.zeros(0))
    allowed = rng.random(n) < rng.choice([1.0, 0.7])
    pool, floor = int(rng.integers(1, 30)), float(rng.choice([0.0, 0.25, 0.6]))

    expected = _dense_reference(
        keyword.dense(n),
        None if vector is None else vector.dense(n),
        allowed,
        layout,
        mode,
        config,
    )
    found = [keyword] if vector is None else [keyword, vector]
    rows = _rows(layout, found, config)
    assert not expected[np.setdiff1d(np.arange(n), rows)].any()  # outside the rows: all 0
    kw = _gather(keyword, rows)
    kw[~allowed[rows]] = 0.0
    vec = None if vector is None else _gather(vector, rows)
    fused = _with_context(_fuse(kw, vec, allowed[rows], mode, config), rows, layout, config)
    fused[~allowed[rows]] = 0.0
    best = _candidates(fused, pool, floor)

    want = _reference_pool(expected, pool, floor)
    assert rows[best].tolist() == want.tolist()
    np.testing.assert_array_equal(fused[best], expected[want])


CHAT = """# Session {s}: John and Tim

## 2:00 pm on {day} May, 2023

- **John**: Tim, books, more books! Did you read the fantasy ones, {s}?
- **Tim**: I like books on the train, mostly fantasy, and hiking in May.
- **John**: Nice, which fantasy books? I went hiking too.
- **Tim**: The long ones about dragons; my sister reads them too.
- **John**: My dog ate one of my books last week.
- **Tim**: Ha, dogs and books. We should go hiking with the dog.
"""


def _workspace(tmp_path: Path) -> Workspace:
    root = Workspace.init(tmp_path / "ws", mode="full").root
    for s, day in enumerate(range(3, 31, 2)):
        name = f"202305{day:02d}_140000_chat{s}.md"
        (root / ".sessions" / name).write_text(CHAT.format(s=s, day=day), encoding="utf-8")
    (root / ".notes").mkdir(exist_ok=True)
    (root / ".notes" / "books.md").write_text(  # knowledge, before the sessions in the layout
        "# Books\n\n" + "".join(f"- Tim's list {i}: books, dragons, a dog\n" for i in range(8)),
        encoding="utf-8",
    )
    (root / "memory.md").write_text(
        "# Memory\n\n- Tim likes fantasy books\n- John hikes with his dog in May\n"
        "- The team reads books on Fridays\n",
        encoding="utf-8",
    )
    ws = Workspace.open(root)
    ws.index.update(embed=False)
    return ws


class _Query:
    model_id = "test-model"

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


@pytest.mark.parametrize("session_weight", [0.0, 0.4])
@pytest.mark.parametrize(
    ("query", "path", "floor"),
    [
        ("Does Tim like the dragons his sister reads, in May 2023?", None, 0.0),
        ("When did the dog eat a book?", ".sessions/*", 0.0),
        ("dragons", None, 0.25),
    ],
)
def test_search_ranks_the_same_from_candidates_as_from_every_chunk(
    tmp_path: Path, query: str, path: str | None, floor: float, session_weight: float
) -> None:
    """Through ``search``: filters, the floor, and the speaker and time lifts see the same
    candidates whether the retrievers name a few chunks or score every one of them."""
    ws = _workspace(tmp_path)
    index = ws.index._backend
    config = dataclasses.replace(
        ws.config.search,
        min_relevance=floor,
        speaker_weight=0.3,
        when_weight=0.3,
        session_weight=session_weight,
    )
    n = len(index.layout().rowids)
    cosines = np.random.default_rng(7).uniform(-0.2, 0.9, n)
    keyword_candidates = index.keyword_candidates
    few = np.sort(np.random.default_rng(8).choice(n, 3, replace=False))

    def run(dense: bool) -> list[tuple[object, ...]]:
        def keyword(q: str, limit: int) -> Scored:
            found = keyword_candidates(q, 3)  # a few: context lifts the rest
            return Scored(None, found.dense(n)) if dense else found

        class Vector:
            def scan(self, vec: np.ndarray) -> None:
                pass

            def scored(self, keyword: Scored | None) -> Scored:
                if dense:
                    return Scored(None, Scored(few, cosines[few]).dense(n))
                return Scored(few, cosines[few])

        index.keyword_candidates = keyword  # type: ignore[method-assign]
        index.vector_scan = lambda model_id, *, filters=None: Vector()  # type: ignore[method-assign]
        hits = search(
            index,
            _Query(),  # type: ignore[arg-type]
            query,
            k=40,  # deep enough for the chunks only context lifts
            mode="hybrid",
            config=config,
            filters=Filters(path=path),
            track_access=False,
            today=dt.date(2023, 6, 1),
        )
        return [(h.path, h.start_line, h.score, tuple(h.scores.to_dict().items())) for h in hits]

    try:
        candidates, every = run(dense=False), run(dense=True)
        found = [keyword_candidates(query, 3), Scored(few, cosines[few])]
        assert len(_rows(index.layout(), found, config)) < n / 2  # only a few rows are scored
    finally:
        ws.close()
    assert candidates == every
    assert candidates  # the queries find something
    assert any(dict(h[3])["speaker"] > 0 for h in candidates) or "Tim" not in query
    assert any(dict(h[3])["when"] > 0 for h in candidates) or "May" not in query
