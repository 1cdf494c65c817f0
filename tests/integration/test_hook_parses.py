"""A Stop hook on a long session appends its new turns after one parse of the session file
(issue 41: it parsed it three times, each a tenth of a second on an 800 KB file, to append
two messages). Real workspace, real import of a Claude Code log; a spy counts the parses."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from mdmem import Workspace
from mdmem.integrations.hooks import import_transcript
from mdmem.markdown import parse
from tests.growing_session import stop_payload, turn

EXAMPLE = Path(__file__).parents[2] / "example_workspace"


def test_two_new_turns_cost_one_parse_of_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    ws_root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws_root)
    log = ws_root / "session.jsonl"  # (a transcript inside the workspace is allowed)
    rng = random.Random(41)
    log.write_text("".join(turn(n, rng) for n in range(1, 61)))
    with Workspace.open(ws_root) as ws:
        first = import_transcript(ws, stop_payload(log))
    assert first is not None and first.messages == 60
    (rel,) = [o.path for o in first.outcomes]
    with log.open("a") as out:
        out.write(turn(61, rng) + turn(62, rng))

    parsed: list[str] = []
    real = parse._parse

    def spy(path: str, text: str, **kw: Any) -> Any:
        parsed.append(path)
        return real(path, text, **kw)

    monkeypatch.setattr(parse, "_parse", spy)
    with Workspace.open(ws_root) as ws:
        report = import_transcript(ws, stop_payload(log))
        assert report is not None and report.messages == 2
        events = ws.sessions.record(Path(rel).stem).events  # (a read: one parse more)
    assert parsed.count(rel) == 2
    assert [e.line for e in events[-2:]] != [0, 0]
    text = (ws_root / rel).read_text()
    assert text.count("[assistant]") + text.count("[user]") == 62
