"""Claude Code hooks: `mdmem hooks install claude-code` merges three hooks into a settings file,
and each hook command, run by a shell with Claude Code's JSON on stdin, does its part: the
memory context at session start, the session imported (new messages only) at compaction and
stop."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.errors import FileProblem
from mdmem.integrations import hooks

BIN = Path(sys.executable).parent / "mdmem"
LOG = (
    Path(__file__).parents[1]
    / "data"
    / "imports"
    / "claude-code"
    / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120)


def hook(command: str, payload: dict) -> subprocess.CompletedProcess[str]:
    """Run a hook command as Claude Code does: by a shell, the event's JSON on stdin."""
    return subprocess.run(
        ["bash", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def _commands(settings: Path) -> dict[str, str]:
    data = json.loads(settings.read_text())
    return {
        event: h["command"]
        for event, groups in data["hooks"].items()
        for group in groups
        for h in group["hooks"]
        if hooks.MARKER in h["command"]
    }


def test_install_merges_and_keeps_other_settings(ws: Workspace, tmp_path: Path) -> None:
    settings = tmp_path / "project" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    theirs = {"type": "command", "command": "echo formatted"}
    settings.write_text(json.dumps({
        "model": "opus",
        "permissions": {"allow": ["Bash(pytest:*)"]},
        "hooks": {"Stop": [{"matcher": "", "hooks": [theirs]}]},
    }))  # fmt: skip
    result = run(
        "-w", str(ws.root), "hooks", "install", "claude-code", "--settings", str(settings)
    )  # fmt: skip (a file named: absolute paths)
    assert result.returncode == 0, result.stderr
    assert "added SessionStart, PreCompact, Stop, SessionEnd" in result.stdout
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == {"allow": ["Bash(pytest:*)"]}
    assert data["hooks"]["Stop"][0]["hooks"] == [theirs]  # theirs first, untouched
    commands = _commands(settings)
    assert set(commands) == {"SessionStart", "PreCompact", "Stop", "SessionEnd"}
    assert commands["SessionStart"].endswith(f"-w {ws.root} hooks run claude-code session-start")
    assert commands["Stop"].endswith("hooks run claude-code import")
    # twice: nothing changes; another workspace: updated in place, never duplicated
    again = run("-w", str(ws.root), "hooks", "install", "claude-code", "--settings", str(settings))
    assert "already as wanted" in again.stdout
    other = Workspace.init(tmp_path / "other", mode="full")
    moved = run("-w", str(other.root), "hooks", "install", "claude-code", "--extract",
                "--settings", str(settings))  # fmt: skip
    assert "updated SessionStart, PreCompact, Stop, SessionEnd" in moved.stdout
    assert len(_commands(settings)) == 4 and str(other.root) in _commands(settings)["Stop"]
    assert _commands(settings)["Stop"].endswith("import --extract")
    # uninstall takes only ours away
    gone = run("hooks", "uninstall", "claude-code", "--settings", str(settings))
    assert gone.returncode == 0 and "removed" in gone.stdout
    data = json.loads(settings.read_text())
    assert data["hooks"] == {"Stop": [{"matcher": "", "hooks": [theirs]}]}
    assert data["model"] == "opus"


def test_scopes_and_a_broken_settings_file(ws: Workspace, tmp_path: Path) -> None:
    assert hooks.settings_path("local", tmp_path) == tmp_path / ".claude" / "settings.local.json"
    assert hooks.settings_path("user", tmp_path, home=tmp_path / "h") == (
        tmp_path / "h" / ".claude" / "settings.json"
    )
    broken = tmp_path / "settings.json"
    broken.write_text('{\n  "model": "opus",\n  "hooks": {,\n}\n')
    with pytest.raises(FileProblem) as err:
        hooks.install(broken, hooks.commands(ws.root))
    assert err.value.line == 3
    result = run("-w", str(ws.root), "hooks", "install", "claude-code", "--settings", str(broken))
    assert result.returncode == 1 and f"{broken}:3: not JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert broken.read_text().startswith('{\n  "model"')  # nothing written
    minimal = Workspace.init(tmp_path / "minimal", mode="minimal")
    refused = run("-w", str(minimal.root), "hooks", "install", "claude-code",
                  "--settings", str(tmp_path / "s.json"))  # fmt: skip
    assert refused.returncode == 1 and "mode full" in refused.stderr


@pytest.mark.slow
def test_the_hooks_run_as_claude_code_runs_them(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))  # transcripts: tmp_path/projects/
    settings = tmp_path / "settings.json"
    hooks.install(settings, hooks.commands(ws.root, str(BIN), budget=2000))
    commands = _commands(settings)
    ws.remember("The project's tests run with pytest -p no:randomly", type="fact")
    transcript = tmp_path / "projects" / "-home-dev-shop" / LOG.name
    transcript.parent.mkdir(parents=True)
    shutil.copy(LOG, transcript)
    payload = {
        "session_id": "7a1b2c3d-0000-4000-8000-0000000000cc",
        "transcript_path": str(transcript),
        "cwd": "/home/dev/shop",
        "hook_event_name": "PreCompact",
        "trigger": "auto",
    }
    first = hook(commands["PreCompact"], payload)
    assert first.returncode == 0, first.stderr
    assert "1 conversation (1 created), 12 messages" in first.stdout
    assert f"{transcript}:12: not JSON" in first.stderr  # the bad line is named, and skipped
    (path,) = (ws.root / ".sessions").glob("*.md")
    assert ws.sessions.record(path.stem).agent == "claude-code"
    # Claude Code goes on; at stop only the new messages are added
    with transcript.open("a") as handle:
        handle.write(json.dumps({
            "type": "user", "uuid": "u-8", "parentUuid": "u-7", "isSidechain": False,
            "sessionId": payload["session_id"], "timestamp": "2026-03-01T08:30:00Z",
            "message": {"role": "user", "content": "Now push the fix."}}) + "\n")  # fmt: skip
    stop = hook(commands["Stop"], {**payload, "hook_event_name": "Stop"})
    assert stop.returncode == 0 and "(1 appended), 1 messages" in stop.stdout
    assert ws.sessions.record(path.stem).events[-1].text == "Now push the fix."
    assert (
        "0 messages" in hook(commands["SessionEnd"], {**payload, "hook_event_name": "End"}).stdout
    )
    assert len(list((ws.root / ".sessions").glob("*.md"))) == 1
    # the next session starts with the memory: facts and the imported session
    start = hook(commands["SessionStart"], {**payload, "hook_event_name": "SessionStart",
                                            "source": "startup"})  # fmt: skip
    assert start.returncode == 0, start.stderr
    assert "pytest -p no:randomly" in start.stdout
    assert "Fix flaky login test" in start.stdout
    # a session with nothing written yet: nothing to do, no error
    none = tmp_path / "projects" / "none.jsonl"
    empty = hook(commands["Stop"], {**payload, "transcript_path": str(none)})
    assert empty.returncode == 0 and empty.stdout == ""


@pytest.mark.slow
def test_a_payload_cannot_import_a_file_from_elsewhere(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transcript_path must lie where Claude Code keeps transcripts ($CLAUDE_CONFIG_DIR or
    ~/.claude, then projects/) or in the workspace, symlinks followed: any other file is
    refused in one line, and nothing of it reaches the memory."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    projects = tmp_path / "claude" / "projects" / "-home-dev-shop"
    projects.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere" / LOG.name
    elsewhere.parent.mkdir()
    shutil.copy(LOG, elsewhere)
    (projects / "link.jsonl").symlink_to(elsewhere)
    commands = hooks.commands(ws.root, str(BIN))
    for path in (
        str(elsewhere),
        str(projects / "link.jsonl"),
        f"{projects}/../../../elsewhere/{LOG.name}",
        "/etc/passwd",
    ):
        result = hook(commands["Stop"], {"transcript_path": path, "hook_event_name": "Stop"})
        assert result.returncode == 1, result.stdout
        [line] = result.stderr.splitlines()
        assert line.startswith("mdmem: error: transcript_path ") and "is refused" in line, line
    assert not list((ws.root / ".sessions").glob("*.md"))
    shutil.copy(LOG, projects / LOG.name)  # where Claude Code writes it: imported
    ok = hook(commands["Stop"], {"transcript_path": str(projects / LOG.name)})
    assert ok.returncode == 0 and "1 conversation (1 created)" in ok.stdout, ok.stderr


def test_project_scope_writes_commands_that_work_in_any_clone(tmp_path: Path) -> None:
    """`--scope project` writes .claude/settings.json, which the team commits: no path of this
    machine in it (neither the venv's nor the workspace's), the workspace under
    $CLAUDE_PROJECT_DIR and mdmem as found on PATH; a teammate's clone elsewhere runs them
    against its own workspace. --scope local keeps absolute paths."""
    project = tmp_path / "shop"
    ws = Workspace.init(project / "memory dir", mode="full", agent="dev")
    ws.remember("Releases are tagged from main only", type="fact")
    path = f"{BIN.parent}:/usr/bin:/bin"
    result = subprocess.run(
        [str(BIN), "-w", str(ws.root), "hooks", "install", "claude-code", "--scope", "project"],
        cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = (project / ".claude" / "settings.json").read_text()
    assert str(tmp_path) not in text and sys.prefix not in text and str(BIN.parent) not in text
    commands = _commands(project / ".claude" / "settings.json")
    assert commands["SessionStart"] == (
        'mdmem -w "$CLAUDE_PROJECT_DIR/memory dir" hooks run claude-code session-start'
    )
    clone = tmp_path / "elsewhere" / "teammate-clone"
    shutil.copytree(project, clone, ignore=shutil.ignore_patterns(".mdmem"))
    memory = clone / "memory dir" / "memory.md"
    memory.write_text(memory.read_text().replace("main only", "the release branch only"))
    env = {**os.environ, "PATH": path, "CLAUDE_PROJECT_DIR": str(clone)}
    started = subprocess.run(
        ["bash", "-c", commands["SessionStart"]], input="{}", cwd=clone, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "tagged from the release branch only" in started.stdout  # the clone's workspace
    local = subprocess.run(
        [str(BIN), "-w", str(ws.root), "hooks", "install", "claude-code", "--scope", "local"],
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr
    mine = _commands(project / ".claude" / "settings.local.json")
    assert f"-w {shlex.quote(str(ws.root))} " in mine["Stop"] and mine["Stop"].startswith("/")
    outside = Workspace.init(tmp_path / "outside-ws", mode="full")
    refused = subprocess.run(
        [str(BIN), "-w", str(outside.root), "hooks", "install", "claude-code"],
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 1 and "is not inside the project" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
