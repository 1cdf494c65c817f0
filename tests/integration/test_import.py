"""`mdmem import`: chat histories from ChatGPT, Claude.ai, Claude Code, Codex CLI and a generic
JSONL become session files, idempotently, with bad records named and skipped.

The fixtures in tests/data/imports/ are small files written by hand in each format."""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from in_process import Ran, mdmem

from mdmem import Workspace
from mdmem.errors import EntryNotFoundError, ModeError
from mdmem.integrations.importers import import_path, undo
from mdmem.integrations.importers.common import json_array

DATA = Path(__file__).parents[1] / "data" / "imports"
CHATGPT = DATA / "chatgpt" / "conversations.json"
CLAUDE = DATA / "claude" / "conversations.json"
CLAUDE_CODE = DATA / "claude-code" / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"
CODEX = DATA / "codex" / "rollout-2026-04-01T10-00-00-0195aaaa-0000-7000-8000-00000000c0de.jsonl"
GENERIC = DATA / "generic.jsonl"
TOKEN = "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _events(ws: Workspace, path: str) -> list[tuple[str, str]]:
    record = ws.sessions.record(Path(path).stem)
    return [(e.action, e.text) for e in record.events]


def _front(ws: Workspace, path: str) -> dict:
    return ws.files.read(path).frontmatter


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".mdmem" not in p.parts
    }


def _local(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds).strftime("%H:%M:%S")


def test_chatgpt_keeps_the_active_branch_only(ws: Workspace) -> None:
    report = import_path(ws, CHATGPT)
    assert [o.status for o in report.outcomes] == ["created", "created"]
    first = report.outcomes[0]
    assert first.source == "chatgpt" and first.title == "Tabs and a sum"
    events = _events(ws, first.path)
    assert events == [
        ("user", "I prefer tabs over spaces in every Python project."),
        ("assistant", "Noted: tabs for your Python projects."),
        ("user", "Compute 6*7 for me. My token is [REDACTED:github], do not share it."),
        ("tool_call", "python(print(6*7))"),
        ("tool_result", "python → 42"),
        ("assistant", "The answer is 42.\n\nAnything else?"),
    ]
    text = (ws.root / first.path).read_text()
    # the abandoned branch, the hidden system prompt and the custom instructions are not there
    assert "OLD BRANCH" not in text and "You are ChatGPT" not in text
    assert "I am a developer" not in text
    # create_time of each message is kept (as local time, like native sessions)
    record = ws.sessions.record(Path(first.path).stem)
    start = 1767261600.0
    assert [e.time for e in record.events][:2] == [_local(start + 60), _local(start + 80)]
    assert record.started == dt.datetime.fromtimestamp(start).isoformat()
    assert record.status == "completed" and record.tools == {"python": 1}
    assert record.agent == "chatgpt"
    front = _front(ws, first.path)
    assert front["source"] == "chatgpt"
    assert front["conversation"] == "c0ffee00-0000-4000-8000-000000000001"
    assert front["source_messages"] == 6 and front["imported"] == report.id
    # the conversation without messages is named by file and line, and skipped
    line = _line_of(CHATGPT, '"title": "Broken one"') - 1
    assert [str(p) for p in report.problems] == [
        f"{CHATGPT}:{line}: conversation 2: no 'mapping' of messages; skipped"
    ]


def test_claude_ai_export(ws: Workspace) -> None:
    report = import_path(ws, CLAUDE)
    (outcome,) = report.outcomes
    assert outcome.source == "claude" and outcome.title == "Deploy checklist"
    assert _events(ws, outcome.path) == [
        ("attachment", "checklist.txt\n1. run migrations\n2. restart workers"),
        ("user", "Our staging server runs on port 8443. Review the attached checklist."),
        ("thinking", "The list misses a backup step."),
        ("tool_call", 'web_search({"query": "postgres backup before migration"})'),
        ("tool_result", "web_search → pg_dump first"),
        ("assistant", "Add a pg_dump backup before step 1."),
        ("user", "Thanks, done."),
    ]
    line = _line_of(CLAUDE, '"uuid": "5e5e5e5e-0000-4000-8000-00000000000b"') - 1
    assert [str(p) for p in report.problems] == [
        f"{CLAUDE}:{line}: conversation 2: no 'chat_messages' list; skipped"
    ]


def test_claude_code_log(ws: Workspace) -> None:
    report = import_path(ws, CLAUDE_CODE)
    (outcome,) = report.outcomes
    assert outcome.conversation == "7a1b2c3d-0000-4000-8000-0000000000cc"
    assert outcome.title == "Fix flaky login test"  # the log's summary line is its title
    record = ws.sessions.record(Path(outcome.path).stem)
    actions = [e.action for e in record.events]
    assert actions == [
        "user",
        "thinking",
        "assistant",
        "tool_call",
        "tool_result",
        "tool_call",
        "sidechain.user",  # the subagent's side conversation, marked
        "sidechain.tool_call",
        "sidechain.assistant",
        "tool_result",  # once: the repeated record (same uuid) is not imported twice
        "summary",
        "assistant",
    ]
    summary = record.events[actions.index("summary")]
    assert "session cookie is set after the redirect" in summary.text
    assert summary.importance == 0.8
    assert record.events[4].text == "Bash → 1 failed, 4 passed"
    assert record.events[9].text == "Task → app/auth.py line 40"
    assert "/clear" not in (ws.root / outcome.path).read_text()  # meta records are skipped
    assert record.tools == {"Bash": 1, "Task": 1} and record.rounds == 1
    assert [str(p) for p in report.problems] == [
        f"{CLAUDE_CODE}:12: not JSON (Expecting value at column 54); skipped"
    ]


def test_codex_log_skips_event_msg_duplicates_and_injected_messages(ws: Workspace) -> None:
    report = import_path(ws, CODEX)
    (outcome,) = report.outcomes
    assert outcome.conversation == "0195aaaa-0000-7000-8000-00000000c0de"
    assert _events(ws, outcome.path) == [
        ("user", "Rename the invoice status enum value PAYED to PAID."),
        ("thinking", "**Searching for the enum**"),
        ("tool_call", 'shell({"command":["rg","PAYED"]})'),
        ("tool_result", "shell → app/models.py:12: PAYED = 'payed'"),
        ("assistant", "Renamed PAYED to PAID in app/models.py and its migration."),
    ]
    text = (ws.root / outcome.path).read_text()
    assert "environment_context" not in text and "permissions instructions" not in text
    assert [str(p) for p in report.problems] == [
        f"{CODEX}:11: not JSON (Expecting value at column 1); skipped"
    ]


def test_generic_jsonl(ws: Workspace) -> None:
    report = import_path(ws, GENERIC)
    (outcome,) = report.outcomes
    assert outcome.source == "jsonl" and outcome.conversation == "generic-001"
    assert _events(ws, outcome.path) == [
        ("user", "My editor is Helix and I never use a mouse."),
        ("assistant", "Helix it is: keyboard-only tips from now on."),
        ("tool_result", "calendar → No events today."),
    ]
    assert [str(p) for p in report.problems] == [
        f"{GENERIC}:4: not a message: needs 'role' and 'content'; skipped"
    ]


def test_reimport_creates_nothing(ws: Workspace) -> None:
    first = import_path(ws, DATA)
    assert first.count("created") == 6 and first.id is not None
    before = _tree(ws.root)
    imports = sorted((ws.files._state_dir / "imports").iterdir())
    again = import_path(ws, DATA)
    assert again.count("unchanged") == 6 and again.messages == 0
    assert again.id is None  # nothing written: no import to undo
    assert _tree(ws.root) == before
    assert sorted((ws.files._state_dir / "imports").iterdir()) == imports


def test_a_growing_log_gets_only_its_new_messages(ws: Workspace, tmp_path: Path) -> None:
    log = tmp_path / CLAUDE_CODE.name
    shutil.copy(CLAUDE_CODE, log)
    first = import_path(ws, log)
    path = first.outcomes[0].path
    count = len(ws.sessions.record(Path(path).stem).events)
    base = {"sessionId": "7a1b2c3d-0000-4000-8000-0000000000cc", "isSidechain": False}
    more = [
        {**base, "type": "user", "uuid": "u-8", "parentUuid": "u-7",
         "timestamp": "2026-03-01T08:20:00Z",
         "message": {"role": "user", "content": "Also add a regression test."}},
        {**base, "type": "assistant", "uuid": "u-9", "parentUuid": "u-8",
         "timestamp": "2026-03-01T08:21:00Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Added."}]}},
    ]  # fmt: skip
    with log.open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in more)
    second = import_path(ws, log)
    (outcome,) = second.outcomes
    assert (outcome.status, outcome.path, outcome.messages) == ("appended", path, 2)
    record = ws.sessions.record(Path(path).stem)
    assert len(record.events) == count + 2 and record.rounds == 2
    assert [(e.time, e.action, e.text) for e in record.events[-2:]] == [
        (dt.datetime.fromisoformat("2026-03-01T08:20:00+00:00").astimezone().strftime("%H:%M:%S"),
         "user", "Also add a regression test."),
        (dt.datetime.fromisoformat("2026-03-01T08:21:00+00:00").astimezone().strftime("%H:%M:%S"),
         "assistant", "Added."),
    ]  # fmt: skip
    assert _front(ws, path)["source_messages"] == 14
    assert len(list((ws.root / ".sessions").glob("*.md"))) == 1
    assert import_path(ws, log).outcomes[0].status == "unchanged"


def test_a_conversation_changed_at_its_source_is_left_alone(ws: Workspace, tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    shutil.copy(CHATGPT, export)
    first = import_path(ws, export)
    path = first.outcomes[1].path
    before = (ws.root / path).read_bytes()
    export.write_text(export.read_text().replace("fly to Lisbon", "fly to Porto"))
    again = import_path(ws, export)
    assert [o.status for o in again.outcomes] == ["unchanged", "changed"]
    assert (ws.root / path).read_bytes() == before


def test_zip_archives_as_downloaded(ws: Workspace, tmp_path: Path) -> None:
    chatgpt = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(chatgpt, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(CHATGPT, "conversations.json")
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("user.json", '{"id": "user-1"}')
    claude = tmp_path / "data-2026-02-03.zip"
    with zipfile.ZipFile(claude, "w") as archive:
        archive.write(CLAUDE, "data/conversations.json")
        archive.writestr("data/users.json", "[]")
    report = import_path(ws, chatgpt)
    assert [o.source for o in report.outcomes] == ["chatgpt", "chatgpt"]
    assert str(report.problems[0]).startswith(f"{chatgpt}/conversations.json:")
    assert import_path(ws, tmp_path).count("created") == 1  # a folder: both zips, one new
    assert import_path(ws, chatgpt).count("unchanged") == 2


def test_dry_run_writes_nothing(ws: Workspace) -> None:
    before = _tree(ws.root)
    report = import_path(ws, DATA, dry_run=True)
    assert report.count("created") == 6 and report.id is None and report.dry_run
    assert report.messages == 35
    assert _tree(ws.root) == before
    assert not (ws.files._state_dir / "imports").exists()


def test_undo_moves_created_files_and_restores_appended_ones(ws: Workspace, tmp_path: Path) -> None:
    log = tmp_path / GENERIC.name
    shutil.copy(GENERIC, log)
    first = import_path(ws, log)
    generic = first.outcomes[0].path
    after_first = (ws.root / generic).read_text()
    with log.open("a") as handle:
        handle.write('{"role": "user", "content": "One more thing."}\n')
    second = import_path(ws, DATA / "codex")
    second_b = import_path(ws, log)
    assert second_b.outcomes[0].status == "appended"
    done = undo(ws, second_b.id)
    assert done.restored == (generic,) and done.moved == ()
    assert (ws.root / generic).read_text() == after_first
    codex_path = second.outcomes[0].path
    done = undo(ws, second.id)
    assert done.moved == (codex_path,)
    assert not (ws.root / codex_path).exists()
    trashed = ws.root / ".trash" / "imports" / second.id / Path(codex_path).name
    assert trashed.exists()  # moved, never deleted
    assert undo(ws, second.id).moved == ()  # twice: nothing more
    with pytest.raises(EntryNotFoundError, match="no import 'nope'"):
        undo(ws, "nope")
    # a file a person changed since the import is kept as it is
    third = import_path(ws, CHATGPT)
    changed = third.outcomes[0].path
    with log.open("a") as handle:
        handle.write('{"role": "assistant", "content": "Noted."}\n')
    fourth = import_path(ws, log)
    edited = (ws.root / generic).read_text() + "\n- 12:00 [note] a person's line\n"
    (ws.root / generic).write_text(edited)
    done = undo(ws, fourth.id)
    assert done.restored == () and done.kept == (
        f"{generic}: changed since the import; left as it is",
    )
    assert (ws.root / generic).read_text() == edited
    assert (ws.root / changed).exists()


def test_secrets_are_masked_everywhere(ws: Workspace) -> None:
    report = import_path(ws, CHATGPT)
    assert report.redacted == 1
    for path in ws.root.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert "[REDACTED:github]" in (ws.root / report.outcomes[0].path).read_text()


def test_extract_through_litellm(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(
        'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n[llm]\nmodel = "gpt-4o-mini"\n'
    )
    ws = Workspace.open(ws.root)
    reply = json.dumps(
        {
            "memories": [
                {"type": "preference", "text": "User writes Python with tabs", "importance": 0.7}
            ]
        }
    )
    report = import_path(ws, GENERIC, extract=True, mock_response=reply)
    (extraction,) = report.extractions
    assert extraction.engine == "llm" and extraction.count("add") == 1
    entry = ws.get(extraction.changes[0].entry_id)
    assert entry.text == "User writes Python with tabs"
    assert entry.source == Path(report.outcomes[0].path).stem  # provenance: the imported session


def test_offline_extract_reads_the_user_turns(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(ws.root)
    report = import_path(ws, CHATGPT, extract=True, offline=True)
    texts = [e.text for e in ws.entries("memory.md")]
    assert any("tabs over spaces" in t for t in texts), texts
    assert report.extractions[0].engine == "offline"


def test_minimal_mode_is_refused(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    with pytest.raises(ModeError, match="mdmem mode full"):
        import_path(ws, GENERIC)


def test_broken_json_keeps_what_came_before(ws: Workspace, tmp_path: Path) -> None:
    text = CHATGPT.read_text()
    cut = text.index('"title": "Trip to Lisbon"')
    broken = tmp_path / "conversations.json"
    broken.write_text(text[:cut] + '"title": "Trip", "mapping": {oops')
    report = import_path(ws, broken)
    assert [o.title for o in report.outcomes] == ["Tabs and a sum"]
    line = text[:cut].count("\n") + 1
    assert [str(p) for p in report.problems][-1].startswith(f"{broken}:{line}: broken JSON")


def test_json_array_streams_short_reads() -> None:
    class Trickle(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            return super().read(3)

    text = '[\n {"a": 1},\n {"b": [1, 2,\n 3]}, 7\n]'
    assert list(json_array(Trickle(text), "t.json")) == [
        (2, {"a": 1}),
        (3, {"b": [1, 2, 3]}),
        (4, 7),
    ]


def run(*args: str, stdin: str | None = None) -> Ran:
    """`mdmem import …` through typer's CliRunner (tests/in_process.py)."""
    return mdmem(*args, input=stdin)


def test_cli_import_undo_and_bad_input(ws: Workspace) -> None:
    root = str(ws.root)
    result = run("-w", root, "import", str(CLAUDE_CODE))
    assert result.returncode == 0, result.stderr
    assert "created      .sessions/20260301_" in result.stdout
    assert f"{CLAUDE_CODE}:12: not JSON" in result.stderr
    import_id = result.stderr.split("mdmem import --undo ")[1].split()[0]
    again = run("-w", root, "import", str(CLAUDE_CODE), "--json")
    data = json.loads(again.stdout)
    assert data["id"] is None and data["conversations"][0]["status"] == "unchanged"
    undone = run("-w", root, "import", "--undo", import_id)
    assert undone.returncode == 0 and "1 session files moved" in undone.stdout
    missing = run("-w", root, "import", str(DATA / "nope.json"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = run("-w", root, "import", str(GENERIC), "--from", "whatsapp")
    assert bad.returncode == 2 and "--from must be one of" in bad.stderr


def test_help_imports_no_integration() -> None:
    code = (
        "import sys\nsys.argv = ['mdmem', '--help']\nfrom mdmem.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'agents', 'langgraph', 'openai', 'filelock', 'mdmem.integrations'}\n"
        "print(sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr.strip() == "[]"


def test_an_undone_import_is_not_searched(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(ws.root)
    report = import_path(ws, CODEX)
    assert [h.path for h in ws.search("PAYED", mode="keyword")][:1] == [report.outcomes[0].path]
    undo(ws, report.id)
    assert ws.search("PAYED", mode="keyword") == []  # .trash/ is never indexed
