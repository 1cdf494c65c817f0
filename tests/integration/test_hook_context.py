"""SessionStart answers from what its last run printed only while nothing it read changed
(mdmem/integrations/hook_context.py, issue 41). Real processes (`python -m mdmem`, as the
`mdmem` script runs it) on a copy of example_workspace/; whether a run answered from the cache
is read from the modules it imported ($MDMEM_DEBUG_MODULES: a replayed answer never imports the
workspace), and every answer is compared byte for byte with the context built afresh in this
process. Each kind of change must be seen: a hand edit of memory.md at the same size with its
modification time put back, a session file added to .sessions/, mdmem.toml changed, a pool
written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mdmem.integrations import hook_context, hooks
from mdmem.workspace import Workspace

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "example_workspace"
BUILT = "mdmem.context.build"
"""A module only a run that builds the context imports."""


def start(ws: Path, debug: Path, *extra: str) -> tuple[str, bool]:
    """One SessionStart as Claude Code runs it: (what it printed, whether it was replayed)."""
    env = {
        **os.environ,
        "MDMEM_DEBUG_MODULES": str(debug),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MDMEM_SERVER_AUTO": "0",
    }
    env.pop("MDMEM_WORKSPACE", None)
    before = set(debug.iterdir())
    argv = [sys.executable, "-m", "mdmem", "-w", str(ws), "hooks", "run", "claude-code"]
    done = subprocess.run(
        [*argv, "session-start", *extra],
        input='{"hook_event_name": "SessionStart", "source": "startup"}',
        capture_output=True,
        text=True,
        env=env,
        cwd=ws.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    (written,) = set(debug.iterdir()) - before
    modules = set(written.read_text().splitlines()[1:])
    written.unlink()
    return done.stdout, BUILT not in modules


def fresh(ws: Path, budget: int | None = None) -> str:
    """The context as built now, in this process, as the hook prints it."""
    return hooks.session_start(Workspace.open(ws), budget) + "\n"


def settle() -> None:
    """Past the window in which a file's stat is not trusted (a change in the same tick of
    the file system's clock as the read): what a real session start, seconds or days after
    the last write, always is."""
    time.sleep(hook_context.RACY_SECONDS + 0.1)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    # a workspace used before has its .mdmem/ (making it changes the workspace's folder: the
    # run that makes it is not kept, being under a second old)
    (ws / ".mdmem").mkdir()
    (tmp_path / "modules").mkdir()
    return ws


def test_a_replayed_answer_is_the_context_built_afresh(ws: Path) -> None:
    debug = ws.parent / "modules"
    settle()
    first, replayed = start(ws, debug)
    assert not replayed
    second, replayed = start(ws, debug)
    assert replayed
    assert second == first == fresh(ws)
    third, replayed = start(ws, debug, "--budget-tokens", "300")  # another budget: built
    assert not replayed
    assert third == fresh(ws, 300) != first
    assert start(ws, debug, "--budget-tokens", "300") == (third, True)
    assert start(ws, debug) == (first, True)  # (each budget keeps its own answer)


def _same_size_edit(ws: Path) -> None:
    """A person's editor: one word changed for another of the same length, the file's
    modification time put back as it was (only its change time tells)."""
    memory = ws / "memory.md"
    st = memory.stat()
    text = memory.read_text(encoding="utf-8")
    assert "Keep answers short" in text
    memory.write_text(text.replace("Keep answers short", "Keep answers terse"), encoding="utf-8")
    os.utime(memory, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert memory.stat().st_size == st.st_size


def _session_added(ws: Path) -> None:
    """A session file added to .sessions/ (the newest one, a day later, as Claude Code's: the agent SessionStart shows)."""
    folder = ws / ".sessions"
    newest = sorted(folder.glob("*.md"))[-1]
    text = newest.read_text(encoding="utf-8")
    text = text.replace("agent: reviewer", "agent: claude-code").replace(
        "2026-11-20T", "2026-11-21T"
    )
    text = text.replace("# Session: Review", "# Session: Second review")
    (folder / "20261121_090000_rereview-pr-9.md").write_text(text, encoding="utf-8")


def _config_changed(ws: Path) -> None:
    """mdmem.toml: the default budget halved."""
    config = ws / "mdmem.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text + "\n[context]\nbudget_tokens = 600\n", encoding="utf-8")


def _pool_written(ws: Path) -> None:
    """A value written to the shared pool (a file the last run never saw: shared/ is new)."""
    Workspace.open(ws).sharing.pool().write("ci", "red on main since 10:40")


@pytest.mark.parametrize(
    "change",
    [_same_size_edit, _session_added, _config_changed, _pool_written],
    ids=["memory-same-size", "session-added", "config", "pool"],
)
def test_any_change_to_what_it_read_builds_it_again(ws: Path, change: object) -> None:
    debug = ws.parent / "modules"
    settle()
    before, _ = start(ws, debug)
    assert start(ws, debug) == (before, True)
    change(ws)  # type: ignore[operator]
    after, replayed = start(ws, debug)
    assert not replayed
    assert after == fresh(ws) != before
    settle()
    # the run above kept its answer only if it ran a second or more after the change (a busy
    # machine): either way this one prints it, and from here on it is replayed
    assert start(ws, debug)[0] == after
    assert start(ws, debug) == (after, True)


def test_a_pool_written_again_builds_it_again(ws: Path) -> None:
    """A pool the last run read, rewritten (the file replaced: another inode)."""
    debug = ws.parent / "modules"
    Workspace.open(ws).sharing.pool().write("ci", "red on main since 10:40")
    settle()
    before, _ = start(ws, debug)
    assert "red on main" in before
    assert start(ws, debug) == (before, True)
    Workspace.open(ws).sharing.pool().write("ci", "green again")
    after, replayed = start(ws, debug)
    assert not replayed
    assert "green again" in after
    assert after == fresh(ws)


def test_an_input_that_moves_while_it_is_read_is_not_kept(ws: Path) -> None:
    """The stat of each input is taken when it is first touched and again at the end: a
    write in between (a person saving memory.md while the context is built) keeps nothing."""
    settle()
    with hook_context.Recording(str(ws)) as recording:
        text = hooks.session_start(Workspace.open(ws), None)
        memory = ws / "memory.md"
        memory.write_text(memory.read_text(encoding="utf-8") + "- new\n", encoding="utf-8")
    assert not recording.remember(None, text)
    assert hook_context.cached(str(ws), None, "") is None


def test_a_run_that_warned_is_not_kept(ws: Path) -> None:
    """A warning (a file skipped) is said on every run: such an answer is never replayed."""
    settle()
    with hook_context.Recording(str(ws)) as recording:
        import logging

        logging.getLogger("mdmem").warning("context: skipped something")
        text = hooks.session_start(Workspace.open(ws), None)
    assert not recording.remember(None, text)
    assert hook_context.cached(str(ws), None, "") is None


def test_every_file_the_build_looks_at_is_in_the_key(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the audit hook cannot see: an existence check (a stat, no open, no listing).
    Each path the build looks at that way must be recorded itself or through its folder (a
    file appearing or going changes the folder's times); the workspace's own ancestors are
    looked at only to resolve symbolic links, which, changed, change every file's inode
    below them. A new source that checks a file in a folder nobody reads fails here."""
    looked: list[str] = []
    real_stat, real_lstat = os.stat, os.lstat
    here = threading.get_ident()  # (not an earlier test's thread, still closing its windows)

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if not isinstance(path, int) and threading.get_ident() == here:
            looked.append(os.path.abspath(os.fspath(path)))  # type: ignore[call-overload]
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    def lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if not isinstance(path, int) and threading.get_ident() == here:
            looked.append(os.path.abspath(os.fspath(path)))  # type: ignore[call-overload]
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    Workspace.open(ws).sharing.pool().write("ci", "red on main since 10:40")
    with hook_context.Recording(str(ws)) as recording:
        monkeypatch.setattr(os, "stat", stat)
        monkeypatch.setattr(os, "lstat", lstat)
        hooks.session_start(Workspace.open(ws), None)
        monkeypatch.undo()
    ancestors = {str(p) for p in ws.parents}
    assert any(p.endswith("ci") or "shared" in p for p in looked)  # (it did look)
    missed = {
        path
        for path in looked
        if path not in recording.seen
        and os.path.dirname(path) not in recording.seen
        and path not in ancestors
        and not path.endswith((".py", ".pyc", ".so"))
        and "__pycache__" not in path
    }
    assert missed == set()


LOG = ROOT / "tests" / "data" / "imports" / "claude-code" / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"  # fmt: skip


def import_hook(ws: Path, event: str) -> str:
    """One import hook (PreCompact, Stop, SessionEnd) as Claude Code runs it, its payload
    naming the event and a session log kept where Claude Code keeps them: what it printed."""
    home = ws.parent / "claude"
    log = home / "projects" / "p" / "session.jsonl"
    if not log.exists():
        log.parent.mkdir(parents=True)
        shutil.copy(LOG, log)
    env = {
        **os.environ,
        "CLAUDE_CONFIG_DIR": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MDMEM_SERVER_AUTO": "0",
    }
    env.pop("MDMEM_WORKSPACE", None)
    env.pop("MDMEM_DEBUG_MODULES", None)
    payload = f'{{"hook_event_name": "{event}", "transcript_path": "{log}"}}'
    argv = [sys.executable, "-m", "mdmem", "-w", str(ws), "hooks", "run", "claude-code"]
    done = subprocess.run(
        [*argv, "import"], input=payload, capture_output=True, text=True, env=env,
        cwd=ws.parent, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def remembered_holds(ws: Path) -> bool:
    """Every answer remembered for the workspace holds (each input's stat as recorded)."""
    state = ws / ".mdmem" / hook_context.FOLDER / hook_context.STATE_FILE
    answers = json.loads(state.read_text(encoding="utf-8"))["answers"]
    return bool(answers) and all(
        entry["inputs"] is not None
        and all(hook_context.stat_of(path) == seen for path, seen in entry["inputs"])
        for entry in answers.values()
    )


def wait_until_prepared(ws: Path) -> None:
    """The detached process an import hook may start has built its answer (or a minute
    passed: then the assertions after this say what is wrong)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not remembered_holds(ws):
        time.sleep(0.2)


@pytest.mark.parametrize("event", ["SessionEnd", "PreCompact"])
def test_the_hook_before_a_session_start_prepares_its_answer(ws: Path, event: str) -> None:
    """SessionEnd (the next session starts) and PreCompact (the compacted one restarts): their
    import writes a session, which makes the remembered answer stale; they answer at once and a
    detached process builds it again, for each budget asked before, so the next SessionStart
    only stats files. What it prints is the context built afresh, byte for byte."""
    debug = ws.parent / "modules"
    settle()
    before, _ = start(ws, debug)
    budgeted, _ = start(ws, debug, "--budget-tokens", "300")
    assert "1 created" in import_hook(ws, event)
    assert not remembered_holds(ws)  # (the import wrote a session: stale)
    wait_until_prepared(ws)
    after, replayed = start(ws, debug)
    assert replayed
    assert after == fresh(ws) != before
    assert start(ws, debug, "--budget-tokens", "300") == (fresh(ws, 300), True)
    assert fresh(ws, 300) != budgeted


def test_a_stop_leaves_the_answer_to_the_next_session_start(ws: Path) -> None:
    """A Stop comes after every answer of the agent, and a SessionStart seldom after it:
    it prepares nothing (the SessionEnd that ends the session does)."""
    debug = ws.parent / "modules"
    settle()
    before, _ = start(ws, debug)
    assert "1 created" in import_hook(ws, "Stop")
    settle()
    settle()  # (what a process it started would have needed to build the answer, or more)
    after, replayed = start(ws, debug)
    assert not replayed
    assert after == fresh(ws) != before


def test_an_answer_built_too_soon_to_keep_is_prepared_later(ws: Path) -> None:
    """A SessionStart right after a Stop's write cannot keep its answer (an input changed
    under a second ago); it still records the budget asked for, so the PreCompact after it,
    though its import finds nothing new, prepares that answer."""
    debug = ws.parent / "modules"
    settle()
    assert "1 created" in import_hook(ws, "Stop")
    built, replayed = start(ws, debug, "--budget-tokens", "400")
    assert not replayed
    assert "1 unchanged" in import_hook(ws, "PreCompact")
    wait_until_prepared(ws)
    assert start(ws, debug, "--budget-tokens", "400") == (built, True)
    assert built == fresh(ws, 400)
