"""An import hook that finds nothing new answers from what the last run left
(mdmem/integrations/hook_state.py) without the import's machinery, and only then (issue 41).
Real processes (`python -m mdmem`, as the hooks run it) on a copy of example_workspace/, a
Claude Code log where Claude Code keeps logs; each process lists the modules it imported. Every
change to what the import reads makes the import run, and it says what it always said."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LOG = ROOT / "tests" / "data" / "imports" / "claude-code" / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"  # fmt: skip
MACHINERY = {"mdmem.workspace", "mdmem.config", "mdmem.integrations.importers"}


class Hooks:
    def __init__(self, tmp: Path) -> None:
        self.ws = tmp / "ws"
        shutil.copytree(ROOT / "example_workspace", self.ws)
        self.home = tmp / "claude"
        self.log = self.home / "projects" / "p" / "session.jsonl"
        self.log.parent.mkdir(parents=True)
        shutil.copy(LOG, self.log)
        self.debug = tmp / "modules"
        self.debug.mkdir()

    def stop(self, home: Path | None = None) -> tuple[str, str, bool]:
        """One Stop hook: (stdout, stderr with the seconds taken out, whether it answered
        without the import's machinery)."""
        env = {
            **os.environ,
            "MDMEM_DEBUG_MODULES": str(self.debug),
            "CLAUDE_CONFIG_DIR": str(home or self.home),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "MDMEM_SERVER_AUTO": "0",
        }
        env.pop("MDMEM_WORKSPACE", None)
        before = set(self.debug.iterdir())
        payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(self.log)})
        argv = [sys.executable, "-m", "mdmem", "-w", str(self.ws), "hooks", "run", "claude-code"]
        done = subprocess.run([*argv, "import"], input=payload, capture_output=True, text=True,
                              env=env, timeout=120)  # fmt: skip
        (written,) = set(self.debug.iterdir()) - before
        modules = set(written.read_text().splitlines()[1:])
        out = re.sub(r" in \d+\.\d\d s( \([\d,]+/s\))?", " in T s", done.stdout)
        return out.replace(str(self.ws), "WS"), done.stderr, not (modules & MACHINERY)

    def session(self) -> Path:
        (path,) = (self.ws / ".sessions").glob("*fix-flaky*.md")
        return path


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path)


def test_nothing_new_is_answered_as_the_import_answers_it(hooks: Hooks) -> None:
    out, _, fast = hooks.stop()
    assert "1 created" in out and "12 messages" in out and not fast
    again, again_err, fast = hooks.stop()
    assert fast
    (hooks.ws / ".mdmem" / "hook-imports.json").unlink()  # the import itself, for comparison
    slow, slow_err, fast = hooks.stop()
    assert not fast
    assert again == slow and "1 unchanged" in slow and "1 bad records skipped" in slow
    assert again_err == slow_err and "session.jsonl:12: not JSON" in slow_err
    assert hooks.stop()[2]  # (and the import left the state for the next run again)


def test_a_new_record_is_imported(hooks: Hooks) -> None:
    hooks.stop()
    record = {
        "parentUuid": "u-6", "isSidechain": False, "type": "user", "uuid": "u-99",
        "sessionId": "7a1b2c3d-0000-4000-8000-0000000000cc", "cwd": "/home/dev/shop",
        "timestamp": "2026-03-01T08:20:00.000Z",
        "message": {"role": "user", "content": "Thanks, that fixed it."},
    }  # fmt: skip
    with hooks.log.open("a") as out:
        out.write(json.dumps(record) + "\n")
    out, _, fast = hooks.stop()
    assert not fast and "1 appended" in out and "1 messages" in out
    assert hooks.stop()[2]


def test_a_log_rewritten_to_the_same_size_is_read_again(hooks: Hooks) -> None:
    hooks.stop()
    text = hooks.log.read_text()
    hooks.log.write_text(text.replace("flaky", "FLAKY"))  # same size, same inode
    out, _, fast = hooks.stop()
    assert not fast and "1 changed" in out


def test_a_truncated_log_is_read_again(hooks: Hooks) -> None:
    hooks.stop()
    lines = hooks.log.read_text().splitlines(keepends=True)
    hooks.log.write_text("".join(lines[:4]))
    out, _, fast = hooks.stop()
    assert not fast and "1 changed" in out


def test_an_edited_or_removed_session_file_makes_the_import_run(hooks: Hooks) -> None:
    hooks.stop()
    session = hooks.session()
    session.write_text(session.read_text() + "\nA line a person added.\n")
    out, _, fast = hooks.stop()
    assert not fast and "1 unchanged" in out
    assert hooks.stop()[2]
    session.unlink()  # (as an undo moves it to the trash)
    out, _, fast = hooks.stop()
    assert not fast and "1 created" in out


def test_another_claude_home_makes_the_import_run(hooks: Hooks, tmp_path: Path) -> None:
    """Where a log may be read from is decided by $CLAUDE_CONFIG_DIR: the import checks it."""
    hooks.stop()
    elsewhere = tmp_path / "other-claude"
    elsewhere.mkdir()
    _, err, fast = hooks.stop(home=elsewhere)
    assert not fast and "transcript_path" in err
