"""Sessions: the event stream written as it happens, read back, listed and filtered."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.errors import EntryNotFoundError
from mdmem.markdown.parse import parse_document
from mdmem.memory.session_format import infer_importance, parse_session
from mdmem.paths import slugify


def _headings(path: Path) -> list[str]:
    doc = parse_document("s.md", path.read_text(encoding="utf-8"))
    return [h.title for h in doc.headings]


def test_session_file_is_written_as_it_goes(ws: Workspace) -> None:
    with ws.session("Fix login bug", agent="coder") as s:
        path = ws.root / s.path
        assert path.exists() and path.parent.name == ".sessions"
        assert path.name.endswith("_fix-login-bug.md")
        s.request("Login returns 500 since the cookie change")
        s.event("planning", "Reproduce with the failing test first")
        # on disk before the call returned: a crash now would lose nothing
        text = path.read_text()
        assert "[planning] Reproduce with the failing test first" in text
        assert "status: running" in text
        s.round()
        s.tool("shell", {"cmd": "pytest -q tests/test_auth.py"}, "1 failed, 4 passed")
        assert "tools: {shell: 1}" in path.read_text()  # counted as it happens
        s.tool("shell", "git diff", "2 files changed")
        s.tool("edit_file", "app/auth.py")
        s.event("error", "AssertionError: 500 != 200")
        s.event("execute", "Set cookie domain from settings", importance=0.9)
        s.response("Fixed: the cookie domain now comes from settings.")
        s.set_metadata("files_changed", "app/auth.py")
    record = ws.sessions.record(s.id)
    assert record.status == "completed" and record.agent == "coder"
    assert record.rounds == 1
    assert dict(record.tools) == {"shell": 2, "edit_file": 1}
    assert record.ended and record.duration_s is not None
    assert record.requests == ("Login returns 500 since the cookie change",)
    assert record.responses == ("Fixed: the cookie domain now comes from settings.",)
    assert record.metadata == {"files_changed": "app/auth.py"}
    actions = [(e.action, e.importance) for e in record.events]
    assert actions == [
        ("planning", 0.8),
        ("tool_call", 0.7),
        ("tool_result", 0.75),
        ("tool_call", 0.7),
        ("tool_result", 0.75),
        ("tool_call", 0.7),
        ("error", 0.9),
        ("execute", 0.9),  # given, not inferred
    ]
    assert _headings(path) == [
        "Session: Fix login bug",
        *("Request Events Response Metadata".split()),
    ]
    # each event cites its own line in the file
    lines = path.read_text().splitlines()
    for event in record.events:
        assert f"[{event.action}]" in lines[event.line - 1]


def test_importance_is_inferred_from_the_action() -> None:
    expected = {
        "error": 0.9,
        "planning": 0.8,
        "tool_result": 0.75,
        "tool_call": 0.7,
        "execute": 0.65,
        "complete": 0.6,
        "thinking": 0.55,
        "chat": 0.5,
        "Tool Call": 0.7,
        "plan": 0.8,
        "exception": 0.9,
    }
    assert {a: infer_importance(a) for a in expected} == expected
    with pytest.raises(ValueError, match="invalid event action"):
        infer_importance("no such [action]")


def test_exception_inside_the_block_is_recorded_and_propagates(ws: Workspace) -> None:
    with pytest.raises(RuntimeError, match="database is down"), ws.session("deploy") as s:
        s.event("execute", "fly deploy")
        raise RuntimeError("database is down")
    record = ws.sessions.record(s.id)
    assert record.status == "failed"
    last = record.events[-1]
    assert last.action == "error" and last.importance == 0.9
    assert "RuntimeError: database is down" in last.text
    assert "test_sessions.py" in last.text  # where it happened


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.lists(
        st.sampled_from([*"ab #-=`~<>!*\n\t:[]", "<!--", "-->", "```", "## ", "中", "\n---\n"]),
        min_size=1,
        max_size=30,
    )
    .map("".join)
    .filter(lambda t: t.strip())
)
def test_any_text_round_trips_without_breaking_the_file(ws: Workspace, text: str) -> None:
    """Headings, fences and HTML comments in tool output can't break the session's structure."""
    with ws.session("weird output") as s:
        s.request(text)
        s.event("tool_result", text)
        s.event("thinking", "after")
        s.response(text)
    record = ws.sessions.record(s.id)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    clean = "\n".join(line.rstrip() for line in lines).strip()
    assert record.request == clean  # (a part with blank lines reads back as paragraphs)
    assert record.response == clean
    assert [e.text for e in record.events] == [clean, "after"]
    assert _headings(ws.root / s.path) == [
        "Session: weird output",
        "Request",
        "Events",
        "Response",
        "Metadata",
    ]


def test_person_edits_the_session_file_mid_run(ws: Workspace) -> None:
    with ws.session("long task") as s:
        s.event("planning", "step one")
        path = ws.root / s.path
        text = path.read_text()
        path.write_text(text.replace("## Response", "A note from the user.\n\n## Response"))
        s.event("execute", "step two")
    final = path.read_text()
    assert "A note from the user." in final
    events = [(e.action, e.text) for e in ws.sessions.record(s.id).events]
    # the person's note is part of the stream; the next event lands after it
    assert events == [
        ("planning", "step one"),
        ("note", "A note from the user."),
        ("execute", "step two"),
    ]


def test_same_title_in_the_same_second_gets_its_own_file(ws: Workspace) -> None:
    """Three sessions of one title started within one second: retried from the start of a
    fresh second until they really share it, so the names collide every time this runs."""
    for _ in range(5):
        time.sleep(1.0 - time.time() % 1.0 + 0.005)  # just after a second begins
        with ws.session("retry") as a, ws.session("retry") as b, ws.session("retry") as c:
            sessions = (a, b, c)
            for n, s in enumerate(sessions):
                s.event("execute", f"attempt {n}")
        if len({s.started.replace(microsecond=0) for s in sessions}) == 1:
            break
    else:
        pytest.fail("could not start three sessions within one second")
    stamp = a.started.strftime("%Y%m%d_%H%M%S")
    name = re.compile(rf"\.sessions/{stamp}_coder-[0-9a-f]{{6}}_retry\.md")
    assert all(name.fullmatch(s.path or "") for s in sessions)
    assert len({s.path for s in sessions}) == 3
    for n, s in enumerate(sessions):  # each file holds its own session's events only
        events = [(e.action, e.text) for e in ws.sessions.record(s.id).events]
        assert events == [("execute", f"attempt {n}")]


def test_names_never_collide_across_machines_and_old_names_still_read(tmp_path: Path) -> None:
    """Two clones of one workspace ("two machines") start a session of the same title in the
    same second; merged into one folder, both files are there. A file named the old way
    (no agent, no id) is listed and found as before, its start read from its name."""
    clones = [Workspace.init(tmp_path / name, mode="full", agent="coder") for name in "ab"]
    for _ in range(5):
        time.sleep(1.0 - time.time() % 1.0 + 0.005)
        sessions = [ws.session("deploy") for ws in clones]
        for s in sessions:
            s.close()
        if len({s.started.replace(microsecond=0) for s in sessions}) == 1:
            break
    else:
        pytest.fail("could not start two sessions within one second")
    merged = tmp_path / "b" / ".sessions"
    for s in sessions:
        assert re.fullmatch(r"\.sessions/\d{8}_\d{6}_coder-[0-9a-f]{6}_deploy\.md", s.path or "")
    shutil.copy(tmp_path / "a" / (sessions[0].path or ""), merged)  # what a git merge does
    assert len(list(merged.glob("*.md"))) == 2
    old = merged / "20260101_120000_old-work.md"
    old.write_text("---\nagent: coder\n---\n# Session: old work\n\n## Events\n")
    ws = Workspace.open(tmp_path / "b")
    assert len(ws.sessions.list()) == 3
    record = ws.sessions.record("20260101_120000_old-work")
    assert record.started == "2026-01-01T12:00:00" and record.title == "old work"
    new = merged / "20260102_080000_coder-abc123_new-work.md"
    new.write_text("---\nagent: coder\n---\n# Session: new work\n")
    assert ws.sessions.record("new-work").started == "2026-01-02T08:00:00"


def test_minimal_mode_writes_no_session_file(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    with ws.session("chat") as s:
        s.request("hi")
        s.event("thinking", "say hello")
        s.response("hello")
    assert s.path is None and not s.written
    assert not (ws.root / ".sessions").exists()
    record = s.record()
    assert [m["role"] for m in record.to_messages()] == ["user", "assistant", "assistant"]
    assert record.status == "completed"


def test_listing_filters_by_agent_and_date(example: Workspace) -> None:
    all_ = example.sessions.list()
    assert [r.id[:8] for r in all_] == ["20261120", "20261119", "20261117", "20261116"]
    coder = example.sessions.list(agent="coder", limit=2)
    assert [r.id for r in coder] == [
        "20261119_142210_invoice-status-enum-ci",
        "20261117_101502_add-pdf-export",
    ]
    assert [r.agent for r in example.sessions.list(agent="reviewer")] == ["reviewer"]
    assert len(example.sessions.list(since="2026-11-19")) == 2
    record = example.sessions.record("enum-ci")
    assert record.status == "failed" and record.rounds == 12
    assert record.events[4].action == "error"
    with pytest.raises(EntryNotFoundError):
        example.sessions.record("2026")  # ambiguous


def test_hand_written_session_gets_defaults(ws: Workspace) -> None:
    (ws.root / ".sessions" / "20260101_120000_notes.md").write_text(
        "# Notes from a call\n\n## Events\n- 12:01 [decision] Use Postgres\n- plain item\n"
    )
    record = ws.sessions.record("20260101_120000_notes")
    assert record.started == "2026-01-01T12:00:00"
    assert record.agent == "default" and record.status == "unknown"
    assert [(e.time, e.action, e.text) for e in record.events] == [
        ("12:01", "decision", "Use Postgres"),
        ("", "note", "plain item"),
    ]


def test_slugs_are_safe_file_names() -> None:
    assert slugify("Fix: the /login bug (again!)") == "fix-the-login-bug-again"
    assert slugify("修复登录") == "session"
    assert slugify("Crème brûlée ../../etc") == "creme-brulee-etc"
    assert len(slugify("word " * 40)) <= 40


def test_session_files_are_indexed_and_searchable(indexed: Workspace) -> None:
    with indexed.session("Rotate the staging secrets") as s:
        s.event("execute", "fly secrets set STRIPE_KEY on invoice-api-staging")
    hits = indexed.search("stripe key staging secrets", k=3, mode="keyword")
    assert hits and hits[0].path == s.path and hits[0].session == s.id


CRASHER = textwrap.dedent(
    """
    import sys
    from mdmem import Workspace
    ws = Workspace(sys.argv[1])
    s = ws.session("crash test")
    print(s.path, flush=True)
    i = 0
    while True:
        s.event("execute", f"step {i}")
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.slow
def test_killed_mid_session_loses_at_most_the_event_being_written(ws: Workspace) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(ws.root)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    path = ws.root / proc.stdout.readline().strip()
    confirmed = -1
    deadline = time.monotonic() + 60
    while confirmed < 30 and time.monotonic() < deadline:
        confirmed = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    record = parse_session(parse_document(str(path.relative_to(ws.root)), path.read_text()))
    steps = [int(e.text.split()[1]) for e in record.events]
    assert steps == list(range(len(steps)))  # in order, none torn
    assert len(steps) >= confirmed + 1  # every confirmed event is on disk
    assert record.status == "running"


def test_listing_sorts_hand_named_files_by_their_start(ws: Workspace) -> None:
    with ws.session("recent work") as s:
        s.event("execute", "x")
    (ws.root / ".sessions" / "notes-from-last-year.md").write_text(
        "---\nagent: coder\nstarted: 2025-01-01T09:00:00\n---\n# Old notes\n"
    )
    (ws.root / ".sessions" / "20260101_090000_broken.md").write_text(
        "---\nagent: coder\nrounds: 1e999\nduration_s: .nan\n---\n# Odd numbers\n"
    )
    newest = ws.sessions.list(agent="coder", limit=1)
    assert [r.id for r in newest] == [s.id]
    assert [r.id for r in ws.sessions.list(agent="coder")][-1] == "notes-from-last-year"
    odd = ws.sessions.record("broken")
    assert odd.rounds == 0 and odd.duration_s is None  # not a crash


def test_block_style_frontmatter_edited_by_hand_stays_valid(ws: Workspace) -> None:
    with ws.session("obsidian user") as s:
        s.tool("shell", "ls", "ok")
        path = ws.root / s.path
        text = path.read_text().replace("tools: {shell: 1}", "tools:\n  shell: 1\n  grep: 4")
        path.write_text(text)
        s.tool("shell", "ls", "ok")
    record = ws.sessions.record(s.id)
    assert record.agent == "coder" and record.status == "completed"
    assert dict(record.tools) == {"shell": 2}


def test_a_session_file_deleted_mid_run_is_not_brought_back(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    with ws.session("doomed") as s:
        s.event("execute", "one")
        (ws.root / s.path).unlink()  # a person deletes it
        s.event("execute", "two")
        s.response("done")
    assert not (ws.root / s.path).exists()
    assert [e.text for e in s.events] == ["one", "two"]  # kept in memory
    assert s.status == "completed"
    assert "deleted" in caplog.text and s.id in caplog.text


def test_control_characters_never_make_a_file_binary(ws: Workspace) -> None:
    with ws.session("binary output") as s:
        s.tool("cat", {"path": "a.out"}, "ELF\x00\x01 binary")
        s.event("execute", "next")
    record = ws.sessions.record(s.id)
    assert record.status == "completed"
    assert record.events[1].text == "cat → ELF\ufffd\ufffd binary"
    entry = ws.remember("a\x00b", type="fact")
    assert entry.text == "a\ufffdb" and ws.entries("memory.md")


def test_crlf_session_files_read_and_compact_cleanly(example: Workspace) -> None:
    (example.root / "mdmem.toml").write_text(
        'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
    )
    ws = Workspace.open(example.root)
    path = ws.root / ".sessions" / "20261119_142210_invoice-status-enum-ci.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    record = ws.sessions.record("enum-ci")
    assert "\r" not in record.request and len(record.events) == 20
    for _ in range(3):
        ws.compact("enum-ci", offline=True, flush=False)
    data = path.read_bytes()
    assert b"\r\r" not in data and data.count(b"\n") == data.count(b"\r\n")
    assert ws.sessions.record("enum-ci").summary
    assert ws.sessions.list()  # still listable


def test_a_lone_carriage_return_does_not_break_parsing(ws: Workspace) -> None:
    (ws.root / "notes.md").write_text("# N\r\r- a\r\n- b\n")
    texts = [e.text for e in ws.entries("notes.md")]
    assert texts[-1] == "b"
    ws.files.all()


def test_a_broken_frontmatter_does_not_stop_the_session(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    with ws.session("frontmatter broken by hand") as s:
        s.event("execute", "one")
        path = ws.root / s.path
        lines = path.read_text().split("\n")
        closing = lines.index("---", 1)
        path.write_text("\n".join(lines[:closing] + lines[closing + 1 :]))  # no closing ---
        s.tool("shell", "ls", "ok")
        s.round()
    assert [e.action for e in s.events] == ["execute", "tool_call", "tool_result"]
    text = path.read_text()
    assert "[tool_result] shell → ok" in text
    assert "frontmatter not updated" in caplog.text


def test_compacting_a_session_whose_file_was_deleted(ws: Workspace) -> None:
    (ws.root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(ws.root)
    with ws.session("gone") as s:
        s.tool("pytest", "-q", "FAILED test_a - KeyError: 'id'")
        (ws.root / s.path).unlink()
        s.event("execute", "fixed the key lookup in app/a.py")
    report = ws.compact(s, offline=True, flush=False)
    assert report.path == ".compact_memory.md" and not (ws.root / s.path).exists()
    assert "KeyError" in (ws.root / ".compact_memory.md").read_text()
