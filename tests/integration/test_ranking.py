"""The README's ranking formula, checked hit by hit with the real model, and every weight in it a
live config key: change one in mdmem.toml and the scores (and where it should, the ranking) move
exactly as the formula says.

    fused     = keyword_weight·bm25/best_bm25 + vector_weight·cos/best_cos
    context   = fused + neighbour_weight·(best neighbour's fused)
                      + session_weight·(best context so far in the file), for session entries;
                fused·(1 + neighbour_weight + session_weight) for a knowledge entry (its own
                neighbour and its own session)
    relevance = context / best context
    rest      = recency_weight·recency + importance_weight·importance
                + frequency_weight·frequency
    final     = relevance·(relevance_weight + rest)          (rerank = "scale", the default)
                relevance_weight·relevance + rest            (rerank = "add")
    recency   = exp(−age_days/recency_days), 1 for evergreen files
    frequency = log(1 + times returned before)/log(21), at most 1
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from mdmem import Workspace

pytestmark = pytest.mark.slow

QUERY = "how do we deploy to staging"
DEFAULTS = {
    "keyword_weight": 0.4,
    "vector_weight": 0.6,
    "neighbour_weight": 0.3,
    "session_weight": 0.4,
    "relevance_weight": 0.6,
    "recency_weight": 0.2,
    "importance_weight": 0.2,
    "frequency_weight": 0.05,
    "recency_days": 30.0,
    "evergreen": ["memory.md", "learnings.md"],
    "rerank": "scale",
}
NO_FLOOR = {"min_relevance": 0.0}
"""The relevance floor (tests/integration/test_search_gate.py) is off here: a neighbour it cut would be
missing from the hits the formula is recomputed from."""
FILLER = [
    "Sourdough needs a twelve hour rise",
    "The cat sleeps on the warm laptop",
    "Tomatoes ripen faster in a paper bag",
    "Chess openings reward early development",
    "The library closes at eight on Sundays",
    "Bicycle tyres lose pressure in the cold",
    "Green tea tastes bitter when the water boils",
    "The museum has a new dinosaur wing",
]


def _day(days_ago: int) -> str:
    return (dt.date.today() - dt.timedelta(days=days_ago)).isoformat()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Knowledge entries (evergreen and dated), a session stream, and filler that makes the
    query's words rare enough for BM25 to count."""
    root = tmp_path / "ranked"
    (root / "notes").mkdir(parents=True)
    (root / ".sessions").mkdir()
    (root / "memory.md").write_text(
        "# Memory\n\n## Facts\n"
        "- Deploys go to Fly.io staging from the main branch "
        f"<!-- mdmem id=m-a000000001 type=fact importance=0.5 created={_day(60)} -->\n"
        "- The deploy job needs the FLY_API_TOKEN secret "
        "<!-- mdmem id=m-a000000002 type=fact importance=0.95 -->\n"
        "- Lunch is at noon on Fridays, after the weekly review "
        f"<!-- mdmem id=m-a000000003 type=fact importance=0.2 created={_day(400)} -->\n"
    )
    (root / "notes" / "log.md").write_text(
        "# Ops log\n\n"
        f"- Deploy to staging failed on a missing secret "
        f"<!-- mdmem id=m-b000000001 created={_day(1)} importance=0.6 -->\n"
        f"- Production moved from Heroku to Fly.io "
        f"<!-- mdmem id=m-b000000002 created={_day(90)} importance=0.6 -->\n"
        "- Staging deploys are slow on Mondays\n"
    )
    (root / "notes" / "misc.md").write_text("".join(f"- {line}\n" for line in FILLER))
    stamp = dt.date.today().strftime("%Y%m%d")
    (root / ".sessions" / f"{stamp}_100000_ship-it.md").write_text(
        f"---\nagent: coder\nstarted: {dt.date.today().isoformat()}T10:00:00\n"
        "status: completed\n---\n# Session: ship it\n\n## Events\n\n"
        "- 10:00:01 [execute] Ran the script against staging\n"
        "- 10:00:05 [tool_result] release v42 is live, deploy done\n"
        "- 10:00:09 [thinking] The smoke tests need a fresh database first\n"
    )
    return root


def _open(root: Path, embedder, **search: object) -> Workspace:
    """The workspace with ``search`` keys written to its mdmem.toml, as a user would."""
    lines = []
    for key, value in {**NO_FLOOR, **search}.items():
        if isinstance(value, list):
            lines.append(f"{key} = [{', '.join(repr(v) for v in value)}]")
        else:
            lines.append(f"{key} = {value!r}")
    (root / "mdmem.toml").write_text("[search]\n" + "\n".join(lines) + "\n")
    return Workspace.open(root, embedder=embedder)


def _evergreen(path: str, patterns: list[str]) -> bool:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(patterns).match_file(path)


def _expected(hits, cfg: dict, check: bool = True) -> dict[tuple[str, int], float]:
    """The README's formula applied to each hit's own parts (raw BM25, raw cosine, created,
    importance, frequency): the score every hit should have under ``cfg``. ``check``: the
    hits were ranked under ``cfg``, so their relevance and recency parts must match too."""
    best_kw = max(h.scores.keyword or 0.0 for h in hits)
    best_cos = max(h.scores.vector for h in hits)
    fused = {
        (h.path, h.start_line): cfg["keyword_weight"] * (h.scores.keyword or 0.0) / best_kw
        + cfg["vector_weight"] * h.scores.vector / best_cos
        for h in hits
    }
    streams: dict[str, list] = {}
    for h in sorted(hits, key=lambda h: (h.path, h.start_line)):
        streams.setdefault(h.path, []).append((h.path, h.start_line))
    context = {}
    for path, keys in streams.items():
        stream = path.startswith(".sessions/")
        step = {}
        for i, key in enumerate(keys):
            near = [fused[keys[j]] for j in (i - 1, i + 1) if 0 <= j < len(keys)] if stream else []
            best_near = max([0.0, *near]) if stream else max(0.0, fused[key])
            step[key] = fused[key] + cfg["neighbour_weight"] * best_near
        best_in_file = max(max(0.0, v) for v in step.values())
        for key in keys:
            own = best_in_file if stream else max(0.0, fused[key])
            context[key] = step[key] + cfg["session_weight"] * own
    top = max(context.values())
    today = dt.date.today()
    scores = {}
    for h in hits:
        key = (h.path, h.start_line)
        age = (today - dt.date.fromisoformat(h.created[:10])).days
        recency = (
            1.0
            if _evergreen(h.path, cfg["evergreen"])
            else math.exp(-max(0, age) / cfg["recency_days"])
        )
        if check:
            assert h.scores.relevance == pytest.approx(context[key] / top, rel=1e-5), key
            assert h.scores.recency == pytest.approx(recency, rel=1e-9), key
        relevance = context[key] / top
        rest = (
            cfg["recency_weight"] * recency
            + cfg["importance_weight"] * h.importance
            + cfg["frequency_weight"] * h.scores.frequency
        )
        if cfg["rerank"] == "scale":
            scores[key] = relevance * (cfg["relevance_weight"] + rest)
        else:
            scores[key] = cfg["relevance_weight"] * relevance + rest
    return scores


def _all_hits(ws: Workspace):
    results = ws.search(QUERY, k=100)
    assert results.fresh
    # every chunk but unrelated filler is a hit (a chunk left out scored <= 0, so it adds
    # nothing to its neighbours): the formula sees all it needs
    assert {h.text for h in results} >= {
        "Deploys go to Fly.io staging from the main branch",
        "Staging deploys are slow on Mondays",
        "10:00:01 [execute] Ran the script against staging",
        "10:00:05 [tool_result] release v42 is live, deploy done",
        "10:00:09 [thinking] The smoke tests need a fresh database first",
    }
    assert len(results) >= ws.index.status().chunks - len(FILLER)
    return list(results)


def test_every_hit_scores_as_the_formula_says(root: Path, embedder) -> None:
    ws = _open(root, embedder)
    for searches_before in range(3):  # each search counts as one more return of every chunk
        hits = _all_hits(ws)
        assert any(h.scores.keyword for h in hits) and any(not h.scores.keyword for h in hits)
        frequency = min(1.0, math.log1p(searches_before) / math.log(21))
        assert {round(h.scores.frequency, 12) for h in hits} == {round(frequency, 12)}
        expected = _expected(hits, DEFAULTS)
        for h in hits:
            assert h.score == pytest.approx(expected[(h.path, h.start_line)], rel=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("keyword_weight", 1.5),
        ("vector_weight", 0.1),
        ("neighbour_weight", 1.0),
        ("session_weight", 0.0),
        ("relevance_weight", 0.1),
        ("recency_weight", 0.9),
        ("importance_weight", 1.0),
        ("frequency_weight", 0.7),
        ("recency_days", 0.5),
        ("evergreen", []),
        ("rerank", "add"),
    ],
)
def test_each_weight_is_a_live_config_key(root: Path, embedder, key: str, value: object) -> None:
    _all_hits(_open(root, embedder))  # one search first: the frequency term is not zero
    hits = _all_hits(_open(root, embedder, **{key: value}))
    changed = {**DEFAULTS, key: value}
    expected = _expected(hits, changed)
    before = _expected(hits, DEFAULTS, check=False)  # the same parts, default weights
    for h in hits:
        assert h.score == pytest.approx(expected[(h.path, h.start_line)], rel=1e-5)
    assert any(abs(expected[k] - before[k]) > 1e-3 for k in expected), "the key changed nothing"


def test_changed_weights_change_the_ranking(root: Path, embedder) -> None:
    # (added, not scaled: a dominating weight then decides the order on its own)
    default = _all_hits(_open(root, embedder, rerank="add"))
    important = _all_hits(_open(root, embedder, importance_weight=5.0, rerank="add"))
    assert important[0].text == "The deploy job needs the FLY_API_TOKEN secret"  # 0.95
    assert default[0].text != important[0].text
    # recency dominating, nothing evergreen: everything dated today outranks everything older
    recent = _all_hits(
        _open(root, embedder, recency_weight=5.0, evergreen=[], recency_days=1.0, rerank="add")
    )
    today = dt.date.today().isoformat()
    fresh = sum(1 for h in recent if h.created.startswith(today))
    assert 0 < fresh < len(recent)
    assert all(h.created.startswith(today) for h in recent[:fresh])
    # words only: a knowledge entry's relevance is proportional to its BM25 (scaled by the best
    # BM25 and then by the best context score, both the same for every hit)
    words = _open(root, embedder, keyword_weight=1.0, vector_weight=0.0).search(QUERY, k=100)
    knowledge = [h for h in words if not h.path.startswith(".sessions/")]
    assert len(knowledge) >= 3 and all(h.scores.keyword for h in knowledge)
    ratios = [h.scores.relevance / h.scores.keyword for h in knowledge]
    assert max(ratios) == pytest.approx(min(ratios), rel=1e-6)
    assert all(h.scores.vector is not None for h in words)  # computed, but weighed 0


def test_candidate_limits(root: Path, embedder) -> None:
    # keyword_candidates: only that many keyword matches are scored
    one = _open(root, embedder, keyword_candidates=1).search(QUERY, k=100)
    assert sum(1 for h in one if h.scores.keyword) == 1
    # candidates: only the best fused chunks are reranked. With importance dominating, the most
    # important entry wins when it is a candidate, and cannot when the pool is too small for it
    full = _open(root, embedder, importance_weight=5.0, rerank="add").search(QUERY, k=1)
    assert full[0].text == "The deploy job needs the FLY_API_TOKEN secret"
    small = _open(root, embedder, importance_weight=5.0, candidates=1, rerank="add").search(
        QUERY, k=1
    )
    assert small[0].text != full[0].text  # not among the 3 (k·3) best fused
