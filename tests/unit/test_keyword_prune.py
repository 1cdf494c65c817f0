"""Keyword queries past a budget of matching rows score their most common words last: FTS5
finds the candidates by the rarer words, and the common words' exact BM25 shares are added to
those candidates, so each scores what the full query gives it. A small index ranks exactly as
before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.index.sqlite.scale import keyword
from mdmem.index.sqlite.scale.keyword import split_terms


def test_the_most_common_terms_go_last_and_one_always_stays(monkeypatch) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 100)
    counts = {"one": 300, "work": 90, "ledger": 40, "zebra": 2}
    assert split_terms(["one", "ledger", "work", "zebra"], counts) == (
        ["ledger", "zebra"],
        ["one", "work"],
    )
    assert split_terms(["one", "work"], {"one": 300, "work": 90}) == (["work"], ["one"])
    assert split_terms(["one"], {"one": 300}) == (["one"], [])  # the rarest always stays
    assert split_terms(["ledger", "zebra"], {"ledger": 40, "zebra": 2}) == (
        ["ledger", "zebra"],
        [],
    )  # within the budget
    # a term that cannot be scored last (a phrase of several tokens) stays; the next goes
    movable = lambda t: t != "one"  # noqa: E731
    assert split_terms(
        ["one", "ledger", "work"], {"one": 300, "ledger": 40, "work": 90}, movable
    ) == (
        ["one", "ledger"],
        ["work"],
    )


def _workspace(root: Path) -> Workspace:
    (root / "notes").mkdir(parents=True)
    for i in range(40):
        extra = " The zebra crossing is closed." if i == 7 else ""
        extra += " A zebra ledger, ledgers and more ledgers." if i in (3, 11, 12) else ""
        extra += " The ledger was long" + " and long" * 80 + "." if i == 11 else ""  # > 127 tokens
        heading = "## Ledger notes\n\n" if i % 5 == 0 else ""
        (root / "notes" / f"n{i:02}.md").write_text(
            f"# Note {i}\n\n{heading}- The ledger of week {i} is balanced.{extra}\n"
            f"- Ledger entry {i} was filed late{' after the ledger audit' * (i % 3)}.\n"
            f"- O'Brien signed it{' with the zebra pen' if i == 20 else ''}.\n"
        )
    ws = Workspace(root, embedder=None)
    ws.index.update(embed=False)
    return ws


def _scores(ws: Workspace, query: str) -> dict[int, float]:
    found = ws.index._backend.keyword_candidates(query, 1000)
    assert found.positions is not None
    return dict(zip(found.positions.tolist(), found.scores.tolist(), strict=True))


@pytest.mark.parametrize(
    "query", ["ledger zebra", "zebra ledgers balanced", "ledger ledgers zebra"]
)
def test_candidates_score_what_the_full_query_gives_them(
    tmp_path: Path, monkeypatch, query: str
) -> None:
    ws = _workspace(tmp_path / "ws")
    full = _scores(ws, query)
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)
    later = _scores(ws, query)
    zebra = {p for p, _ in _scores(ws, "zebra").items()}
    assert set(later) == zebra < set(full)  # the candidates: the chunks with the rare word
    for position, score in later.items():  # each scores as the full query scores it
        assert score == pytest.approx(full[position], rel=1e-9)
    ws.close()


def test_a_phrase_term_stays_in_the_fts_query(tmp_path: Path, monkeypatch) -> None:
    """ "o'brien" is two tokens for FTS5 (a phrase): it cannot be counted, so it is never
    scored last, however common."""
    ws = _workspace(tmp_path / "ws")
    assert not keyword.single_token("o'brien") and keyword.single_token("ledgers")
    full = _scores(ws, "o'brien zebra")
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)
    assert _scores(ws, "o'brien zebra") == full
    ws.close()


@pytest.mark.parametrize("budget", [10_000, 10])
def test_a_query_is_split_only_past_the_budget(tmp_path: Path, monkeypatch, budget) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", budget)
    ws = _workspace(tmp_path / "ws")
    found = set(_scores(ws, "ledger zebra"))
    zebra, ledger = set(_scores(ws, "zebra")), set(_scores(ws, "ledger"))
    if budget == 10:  # "ledger" (in 88 chunks) is scored last: only the zebra's are found
        assert found == zebra
    else:  # in budget: every ledger row is a candidate, as without the split
        assert found == zebra | ledger and len(ledger) == 88
    top = ws.search("ledger zebra", k=1, mode="keyword", track_access=False)[0]
    assert "zebra" in top.text and "ledger" in (top.text + top.heading).lower()
    ws.close()


def test_term_counts_follow_the_index(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)
    ws = _workspace(tmp_path / "ws")
    assert len(ws.index._backend.keyword_candidates("zebra ledger", 1000).scores) == 5
    for i in range(40):  # the ledger is gone from most files: it is no longer common
        if i != 5:
            (ws.root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n- Nothing {i}.\n")
    ws.index.update(embed=False)
    assert len(ws.index._backend.keyword_candidates("zebra ledger", 1000).scores) == 3
    ws.close()


def test_varints_read_as_sqlite_writes_them() -> None:
    assert keyword._varints(bytes([5, 0x81, 0x00, 0x7F])) == [5, 128, 127]
    assert keyword._varints(bytes([0xFF] * 8 + [0x01])) == [(1 << 64) - 255]
    values = np.array(keyword._varints(bytes([0x82, 0x80, 0x01])))
    assert values.tolist() == [2 * 128 * 128 + 1]


def _in_two_stages(monkeypatch) -> None:
    """This 120-chunk index counts as large, and any query of more than 10 rows as past the
    budget."""
    monkeypatch.setattr(keyword, "STAGES_FROM", 100)
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)


def _every_term(ws: Workspace, query: str, monkeypatch) -> dict[int, float]:
    with monkeypatch.context() as m:
        m.setattr(keyword, "STAGES_FROM", 10**12)
        m.setattr(keyword, "POSTINGS_BUDGET", 10**12)
        return _scores(ws, query)


@pytest.mark.parametrize("query", ["ledger zebra", "zebra ledgers balanced", "week zebra"])
def test_two_stages_score_what_the_full_query_gives(tmp_path: Path, monkeypatch, query) -> None:
    """In two stages, stage 1 only picks the candidates; each candidate scores exactly what FTS5
    gives it for the whole query."""
    ws = _workspace(tmp_path / "ws")
    full = _every_term(ws, query, monkeypatch)
    _in_two_stages(monkeypatch)
    monkeypatch.setattr(keyword, "STAGE_ROWS", 10**6)
    monkeypatch.setattr(keyword, "STAGE_SCORED", 10**6)
    staged = _scores(ws, query)
    assert set(staged) == set(full)  # every matching row read and scored
    for position, score in staged.items():
        assert score == pytest.approx(full[position], rel=1e-9)
    ws.close()


def test_stage_one_reads_the_rarest_terms_first(tmp_path: Path, monkeypatch) -> None:
    """Up to ``STAGE_ROWS``: "zebra" (5 rows) and "balanced" (40) are read, "ledger" (88) is
    not. The split at the same budget would find the zebra rows alone."""
    ws = _workspace(tmp_path / "ws")
    query = "ledger balanced zebra"
    full = _every_term(ws, query, monkeypatch)
    zebra, balanced = set(_scores(ws, "zebra")), set(_scores(ws, "balanced"))
    assert (len(zebra), len(balanced), len(_scores(ws, "ledger"))) == (5, 40, 88)
    _in_two_stages(monkeypatch)
    monkeypatch.setattr(keyword, "STAGE_ROWS", 50)
    staged = _scores(ws, query)
    assert set(staged) == zebra | balanced
    for position, score in staged.items():  # the unread term's share is still counted
        assert score == pytest.approx(full[position], rel=1e-9)
    ws.close()


def test_stage_two_scores_the_rows_holding_the_most_idf(tmp_path: Path, monkeypatch) -> None:
    """Four first entries hold all three words (notes 3, 7, 11, 12); note 20's zebra entry
    holds two (its "Ledger notes" heading), the other rows fewer."""
    ws = _workspace(tmp_path / "ws")
    query = "ledger balanced zebra"
    every = [set(_scores(ws, w)) for w in query.split()]
    all_three = every[0] & every[1] & every[2]
    assert len(all_three) == 4
    _in_two_stages(monkeypatch)
    monkeypatch.setattr(keyword, "STAGE_SCORED", 4)
    assert set(_scores(ws, query)) == all_three
    ws.close()


def test_a_limit_below_the_stage_keeps_the_best_exact_scores(tmp_path: Path, monkeypatch) -> None:
    """Stage 2 scores its rows exactly before the cut to ``limit``: stage 1's summed IDF ties
    rows that BM25 tells apart."""
    ws = _workspace(tmp_path / "ws")
    full = _every_term(ws, "ledger week", monkeypatch)
    _in_two_stages(monkeypatch)
    found = ws.index._backend.keyword_candidates("ledger week", 3)
    assert found.positions is not None
    best = sorted(full.values(), reverse=True)[:3]
    assert sorted(found.scores.tolist(), reverse=True) == pytest.approx(best, rel=1e-9)
    ws.close()


@pytest.mark.parametrize("query", ["ledger", "o'brien ledger"])
def test_one_term_or_a_phrase_is_never_staged(tmp_path: Path, monkeypatch, query) -> None:
    """One term gives stage 1 nothing to rank by; a phrase of several tokens cannot be counted
    by stage 2. Both go to FTS5 as before."""
    ws = _workspace(tmp_path / "ws")
    _in_two_stages(monkeypatch)
    monkeypatch.setattr(keyword, "STAGE_SCORED", 2)
    with monkeypatch.context() as m:
        m.setattr(keyword, "STAGES_FROM", 10**12)
        before = _scores(ws, query)
    assert _scores(ws, query) == before and len(before) > 2
    ws.close()


def test_a_smaller_index_past_the_budget_is_split_not_staged(tmp_path: Path, monkeypatch) -> None:
    ws = _workspace(tmp_path / "ws")
    rows, _ = ws.index._backend._terms.stats(ws.index._backend.conn, ws.index._backend.generation())
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)
    monkeypatch.setattr(keyword, "STAGE_SCORED", 2)
    monkeypatch.setattr(keyword, "STAGES_FROM", rows + 1)
    split = _scores(ws, "ledger zebra")
    assert set(split) == set(_scores(ws, "zebra"))  # the split: the rare word's 5 rows
    monkeypatch.setattr(keyword, "STAGES_FROM", rows)
    assert len(_scores(ws, "ledger zebra")) == 2  # from this size on, two stages
    ws.close()
