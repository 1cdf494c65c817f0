"""Entity-aware ranking: in a chat log, the turns spoken by the one person a query names gain
``search.speaker_weight`` of their score (LoCoMo tuning split: rec@2000 +0.014 / +0.021 on
renderings a / b; README, "Retrieval quality on LoCoMo")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.index.speakers import addressed, speaker
from mdmem.live.search_output import why

CHAT = """# Session 1: John and Tim

## 2:00 pm on 8 May, 2023

- **John**: Tim, books, more books, so many books! Tim, read them all!
- **Tim**: I like books on the train, mostly fantasy.
- **John**: Nice, which fantasy books?
"""


@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("**Tim**: I read books on the train.", "tim"),
        ("**Tim** [D1:3]: I read books on the train.", "tim"),
        ("10:42:02 [message] Tim: I read books on the train.", "tim"),
        ("**Mary Ann**: hello", "mary ann"),
        ("Deploys go to Fly.io, region fra", None),
        ("note: lower-case labels are not speakers", None),
    ],
)
def test_the_speaker_is_the_name_opening_a_turn(text: str, who: str | None) -> None:
    assert speaker(text) == who


def test_only_a_query_naming_one_speaker_addresses_one() -> None:
    said = ["tim", "john", None, "tim"]
    assert addressed("What books has Tim read?", said) == "tim"
    assert addressed("What do Tim and John both like?", said) is None
    assert addressed("what books were read?", said) is None
    assert addressed("Where does Mary live?", ["mary ann", "tim"]) == "mary ann"


def _ranked(tmp_path: Path, weight: float) -> list[str]:
    root = Workspace.init(tmp_path / f"ws{weight}", mode="full").root
    (root / ".sessions" / "20230508_140000_chat.md").write_text(CHAT, encoding="utf-8")
    ws = Workspace.open(root)
    ws.config = dataclasses.replace(
        ws.config, search=dataclasses.replace(ws.config.search, speaker_weight=weight)
    )
    try:
        hits = ws.search("Which books does Tim read?", mode="keyword", k=3, track_access=False)
        return [h.text.split("**")[1] for h in hits]
    finally:
        ws.close()


def test_the_named_speakers_turn_comes_first_only_with_the_lift(tmp_path: Path) -> None:
    assert _ranked(tmp_path, 0.0)[0] == "John"
    assert _ranked(tmp_path, 1.0)[0] == "Tim"


def test_explain_shows_the_speaker_lift_on_the_turns_it_lifted(tmp_path: Path) -> None:
    root = Workspace.init(tmp_path / "ws", mode="full").root
    (root / ".sessions" / "20230508_140000_chat.md").write_text(CHAT, encoding="utf-8")
    ws = Workspace.open(root)
    try:
        hits = ws.search("Which books does Tim read?", mode="keyword", k=3, track_access=False)
    finally:
        ws.close()
    lifted = {h.text.split("**")[1]: h.scores.speaker for h in hits}
    assert lifted == {"Tim": 0.3, "John": 0.0}
    for hit in hits:
        assert ("speaker named +30%" in why(hit.scores.to_dict())) == (hit.scores.speaker > 0)
