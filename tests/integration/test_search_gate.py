"""No noise hits: recency and importance never lift an irrelevant chunk into the results, the
task's state lines do not compete as knowledge, and --explain says why a hit made the cut."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.config import SearchConfig

BIN = Path(sys.executable).parent / "mdmem"
FACT = "Deploys go to Fly.io, region fra"


def mdmem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, cwd=cwd, timeout=180, check=True
    )


@pytest.mark.slow
def test_a_fresh_workspace_with_one_fact_returns_the_fact_and_nothing_else(
    tmp_path: Path,
) -> None:
    """Issue 16: before, `search "where do we deploy" -k 3` returned the fact, then the task
    template's `Phase: idle` (cosine 0.068) and `Pointer: 0` (0.009) at 0.36 and 0.31."""
    mdmem("init", ".", cwd=tmp_path)
    mdmem("remember", FACT, cwd=tmp_path)
    shown = mdmem("search", "where do we deploy", "-k", "3", "--explain", cwd=tmp_path).stdout
    assert FACT in shown and "task_process.md" not in shown
    assert "made the cut: relevance 1.000 >= floor 0.25 of the best (words matched" in shown
    data = json.loads(
        mdmem("search", "where do we deploy", "-k", "3", "--json", cwd=tmp_path).stdout
    )
    assert [h["text"] for h in data["hits"]] == [FACT]
    assert data["hits"][0]["scores"]["floor"] == 0.25


def _fresh(tmp_path: Path, embedder: object, **search: object) -> Workspace:
    root = Workspace.init(tmp_path / "ws", mode="full").root
    ws = Workspace.open(root, embedder=embedder)  # type: ignore[arg-type]
    if search:
        ws.config = dataclasses.replace(
            ws.config, search=dataclasses.replace(ws.config.search, **search)
        )
    ws.remember(FACT)
    return ws


@pytest.mark.slow
def test_the_floor_is_what_keeps_them_out(tmp_path: Path, embedder: object) -> None:
    ws = _fresh(tmp_path, embedder, min_relevance=0.0)
    hits = ws.search("where do we deploy", k=3)
    assert hits[0].text == FACT and {h.path for h in hits[1:]} == {"task_process.md"}
    assert all(h.scores.relevance < 0.25 for h in hits[1:])  # what 0.25 would have cut
    ws.close()


@pytest.mark.slow
def test_a_state_line_is_still_found_when_it_is_what_was_asked(
    tmp_path: Path, embedder: object
) -> None:
    ws = _fresh(tmp_path, embedder)
    hits = ws.search("which phase is the task in", k=3)
    assert (hits[0].text, hits[0].type, hits[0].importance) == ("Phase: idle", "state", 0.0)
    assert FACT not in {h.text for h in hits}
    ws.close()


@pytest.mark.parametrize("rerank", ["add", "scale"])
def test_the_rerank_formula_with_every_weight_a_key(tmp_path: Path, rerank: str) -> None:
    weights = dict(
        relevance_weight=0.5, recency_weight=0.3, importance_weight=0.15, frequency_weight=0.1,
        recency_days=10.0, keyword_weight=1.0, vector_weight=0.0, min_relevance=0.0,
    )  # fmt: skip
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    (root / "notes.md").write_text(
        "- alpha beta <!-- mdmem importance=0.9 created=2026-11-02 -->\n"
        "- alpha <!-- mdmem importance=0.2 created=2026-11-20 -->\n"
        "- alpha alpha gamma <!-- mdmem created=2025-01-01 -->\n"
    )
    ws = Workspace.open(root)
    config = dataclasses.replace(SearchConfig(), rerank=rerank, **weights)
    ws.config = dataclasses.replace(ws.config, search=config)
    from mdmem.index.filters import Filters
    from mdmem.index.search import search

    ws.index.update()
    ws.search("alpha", k=3)  # one return each: frequency log(2)/log(21)
    today = dt.date(2026, 11, 22)
    hits = search(
        ws.index._backend, None, "alpha", k=3, mode="keyword", config=config, filters=Filters(),
        today=today, track_access=False,
    )  # fmt: skip
    assert len(hits) == 3
    best = max(h.scores.keyword or 0 for h in hits)
    for hit in hits:
        s = hit.scores
        age = (today - dt.date.fromisoformat(hit.created or "")).days
        assert s.recency == pytest.approx(math.exp(-age / 10.0))
        assert s.relevance == pytest.approx((s.keyword or 0) / best)
        assert s.frequency == pytest.approx(math.log(2) / math.log(21))
        rest = 0.3 * s.recency + 0.15 * hit.importance + 0.1 * s.frequency
        expected = s.relevance * (0.5 + rest) if rerank == "scale" else 0.5 * s.relevance + rest
        assert hit.score == pytest.approx(expected)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    ws.close()
