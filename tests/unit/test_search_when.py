"""Time expressions in a query: the days they name (mdmem/index/when.py), and the lift of the
candidates dated in those days (``search.when_weight``), whatever gives a chunk its date: a
frontmatter date, a date in the file's name, or the session API."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.index.filters import Filters
from mdmem.index.search import Hit, search
from mdmem.index.when import Span, chunk_days, spans
from mdmem.live.search_output import why

TODAY = dt.date(2023, 6, 14)  # a Wednesday
D = dt.date


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("Which hobby did Sam take up in May 2023?", [Span(D(2023, 5, 1), D(2023, 5, 31))]),
        (
            "Where was he in the last week of October 2023?",
            [Span(D(2023, 10, 25), D(2023, 10, 31))],
        ),
        ("Where was James on July 12, 2022?", [Span(D(2022, 7, 12), D(2022, 7, 12))]),
        ("her retreat on 9 February, 2023", [Span(D(2023, 2, 9), D(2023, 2, 9))]),
        ("deployed on 2023-05-08", [Span(D(2023, 5, 8), D(2023, 5, 8))]),
        ("classes he joined in mid-August 2023", [Span(D(2023, 8, 11), D(2023, 8, 20))]),
        ("the first half of September 2022", [Span(D(2022, 9, 1), D(2022, 9, 15))]),
        ("the first weekend of August 2023", [Span(D(2023, 8, 5), D(2023, 8, 6))]),
        ("a meeting between August and November 2023", [Span(D(2023, 8, 1), D(2023, 11, 30))]),
        ("Jolene during summer 2022", [Span(D(2022, 6, 1), D(2022, 8, 31))]),
        ("camping in June", [Span(D(2000, 6, 1), D(2000, 6, 30), yearly=True)]),
        ("due March 3rd", [Span(D(2000, 3, 3), D(2000, 3, 3), yearly=True)]),
        ("what changed in 2022", [Span(D(2022, 1, 1), D(2022, 12, 31))]),
        ("what did we decide last week", [Span(D(2023, 6, 5), D(2023, 6, 11))]),
        ("what broke yesterday", [Span(D(2023, 6, 13), D(2023, 6, 13))]),
        ("the call 3 days ago", [Span(D(2023, 6, 11), D(2023, 6, 11))]),
        ("the notes from last Friday", [Span(D(2023, 6, 9), D(2023, 6, 9))]),
        ("last month's invoices", [Span(D(2023, 5, 1), D(2023, 5, 31))]),
        ("anything this year", [Span(D(2023, 1, 1), TODAY)]),
        ("everything before May 2023", [Span(D(1900, 1, 1), D(2023, 4, 30))]),
        ("everything since 2022", [Span(D(2022, 1, 1), TODAY)]),
        # a relative expression counts back from the one day the question names
        (
            "his writing issue last week, as mentioned on November 6, 2023",
            [Span(D(2023, 10, 30), D(2023, 11, 5)), Span(D(2023, 11, 6), D(2023, 11, 6))],
        ),
        # no time of an event: "as of" dates the question, "may" the verb, an event anchor
        ("How long since he adopted a pet, as of November 2023?", []),
        ("we may march on", []),
        ("What did Jan say about the Oct release?", []),
        ("the Oct 3 release", [Span(D(2000, 10, 3), D(2000, 10, 3), yearly=True)]),
        ("When did Melanie paint a sunrise?", []),
        ("what did she do before the trip", []),
    ],
)
def test_a_query_names_these_days(query: str, named: list[Span]) -> None:
    assert list(spans(query, TODAY)) == named


def test_a_day_matches_in_its_span_or_soon_after_and_a_yearless_one_in_any_year() -> None:
    may = Span(D(2023, 5, 1), D(2023, 5, 31))
    assert may.holds(D(2023, 5, 31)) and not may.holds(D(2023, 6, 10))
    assert may.holds(D(2023, 6, 10), slack_days=14) and not may.holds(D(2023, 4, 30), 14)
    winter = spans("in the winter", TODAY)[0]
    assert winter.holds(D(2021, 12, 24)) and winter.holds(D(2022, 2, 1))
    assert not winter.holds(D(2022, 6, 1))


def test_a_chunk_is_dated_by_itself_and_by_its_file_name() -> None:
    assert chunk_days("2023-05-08", "notes/2024-01-01.md") == ("2023-05-08", "2024-01-01")
    assert chunk_days("2023-07-01", ".sessions/20230701_101500_chat.md") == ("2023-07-01",)
    assert chunk_days(None, "notes/ideas.md") == ()


def _search(ws: Workspace, query: str, weight: float, today: dt.date | None) -> list[Hit]:
    config = dataclasses.replace(ws.config.search, when_weight=weight)
    ws.index._backend.sync(embed=False)
    return search(ws.index._backend, None, query, k=3, mode="keyword", config=config,
                  filters=Filters(), track_access=False, today=today)  # fmt: skip


def test_the_chunks_dated_as_asked_are_lifted_whatever_dates_them(tmp_path: Path) -> None:
    """One line three times: in a file with a frontmatter date (8 May 2023), in a file dated
    by its name (1 July 2023; the index also dates its line the day it first saw it, today,
    so it wins on recency unless a query's time lifts another), and in a session recorded
    today through the API."""
    root = Workspace.init(tmp_path / "ws", mode="full").root
    line = "- We moved the cache to Redis.\n"
    (root / "may.md").write_text(f"---\ndate: 2023-05-08\n---\n# Cache\n\n{line}")
    (root / "2023-07-01.md").write_text(f"# Cache\n\n{line}")
    ws = Workspace.open(root)
    try:
        with ws.session("cache work") as s:
            s.event("message", "Tim: We moved the cache to Redis.")
        assert s.path is not None
        july = dt.date(2023, 7, 3)
        for query, today, dated in [
            ("Where did we move the cache eight weeks ago?", july, {"may.md"}),
            ("Where did we move the cache last week?", july, {"2023-07-01.md"}),
            ("Where did we move the cache today?", None, {s.path, "2023-07-01.md"}),
        ]:
            without = _search(ws, query, 0.0, today)
            assert without[0].path == "2023-07-01.md", query
            assert all(h.scores.when == 0 for h in without)
            hits = _search(ws, query, 1.0, today)
            assert hits[0].path in dated, query
            assert {h.path for h in hits if h.scores.when == 1.0} == dated
            for hit in hits:
                shown = "dated as asked +100%" in why(hit.scores.to_dict())
                assert shown == (hit.path in dated)
    finally:
        ws.close()
