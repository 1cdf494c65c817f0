"""Keyword queries past a budget of matching rows score their most common words last: FTS5
finds the candidates by the rarer words, and the common words' exact BM25 shares are added to
those candidates, so each scores what the full query gives it. A small index ranks exactly as
before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.index.sqlite import keyword
from mdmem.index.sqlite.keyword import split_terms


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
    ws.sync(embed=False)
    return ws


def _scores(ws: Workspace, query: str) -> dict[int, float]:
    found = ws.index.keyword_candidates(query, 1000)
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
    assert len(ws.index.keyword_candidates("zebra ledger", 1000).scores) == 5
    for i in range(40):  # the ledger is gone from most files: it is no longer common
        if i != 5:
            (ws.root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n- Nothing {i}.\n")
    ws.sync(embed=False)
    assert len(ws.index.keyword_candidates("zebra ledger", 1000).scores) == 3
    ws.close()


def test_varints_read_as_sqlite_writes_them() -> None:
    assert keyword._varints(bytes([5, 0x81, 0x00, 0x7F])) == [5, 128, 127]
    assert keyword._varints(bytes([0xFF] * 8 + [0x01])) == [(1 << 64) - 255]
    values = np.array(keyword._varints(bytes([0x82, 0x80, 0x01])))
    assert values.tolist() == [2 * 128 * 128 + 1]
