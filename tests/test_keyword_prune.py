"""Keyword queries leave out their most common words only when the query would otherwise make
FTS5 score more rows than the budget; a small index ranks exactly as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.index.sqlite import keyword
from mdmem.index.sqlite.keyword import kept_terms


def test_the_most_common_terms_go_first_and_one_always_stays(monkeypatch) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 100)
    counts = {"one": 300, "work": 90, "ledger": 40, "zebra": 2}
    monkeypatch.setattr(keyword, "MIN_SHARE", 0.05)
    assert kept_terms(["one", "ledger", "work", "zebra"], counts, 1000) == ["ledger", "zebra"]
    assert kept_terms(["one", "work"], counts, 1000) == ["work"]  # never none left
    # a term in fewer than MIN_SHARE of the chunks stays, however many rows the query matches
    assert kept_terms(["one", "work"], counts, 100_000) == ["one", "work"]
    monkeypatch.setattr(keyword, "MIN_SHARE", 0.15)  # "work" is in 9% of the chunks: it stays
    assert kept_terms(["one", "ledger", "work", "zebra"], counts, 1000) == [
        "ledger",
        "work",
        "zebra",
    ]
    assert kept_terms(["ledger", "zebra"], counts, 1000) == ["ledger", "zebra"]  # in budget


def _workspace(root: Path) -> Workspace:
    (root / "notes").mkdir(parents=True)
    for i in range(40):
        extra = " The zebra crossing is closed." if i == 7 else ""
        (root / "notes" / f"n{i:02}.md").write_text(
            f"# Note {i}\n\n- The ledger of week {i} is balanced.{extra}\n"
            f"- Ledger entry {i} was filed late.\n"
        )
    ws = Workspace(root, embedder=None)
    ws.sync(embed=False)
    return ws


@pytest.mark.parametrize("budget", [10_000, 10])
def test_a_query_is_pruned_only_past_the_budget(tmp_path: Path, monkeypatch, budget) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", budget)
    ws = _workspace(tmp_path / "ws")
    found = ws.index.keyword_candidates("ledger zebra", 1000)
    if budget == 10:  # "ledger" (80 rows) goes: only the zebra's chunk is scored
        assert len(found.scores) == 1
    else:  # in budget: every ledger row is a candidate, as without pruning
        assert len(found.scores) == 80
    top = ws.search("ledger zebra", k=1, mode="keyword", track_access=False)[0]
    assert "zebra" in top.text
    ws.close()


def test_term_counts_follow_the_index(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(keyword, "POSTINGS_BUDGET", 10)
    ws = _workspace(tmp_path / "ws")
    assert len(ws.index.keyword_candidates("zebra ledger", 1000).scores) == 1
    for i in range(40):  # the ledger is gone from most files: it is no longer common
        if i != 3:
            (ws.root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n- Nothing {i}.\n")
    ws.sync(embed=False)
    assert len(ws.index.keyword_candidates("zebra ledger", 1000).scores) == 2
    ws.close()
