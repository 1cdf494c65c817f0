"""Automatic promotion beyond one process's own session files (issue 12 §1): in minimal mode
(L3 is ``.compact_memory.md``, written by compaction), and for sessions another process writes,
seen by a real watcher; one pass at a time per workspace across processes, each session's end
handled once (real flocks and state file, real second processes)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.distill.promote_passes import SharedPasses

MINIMAL = """mode = "minimal"
agent = "coder"
[embedding]
model = ""
[tiers]
l3_tokens = {l3}
[consolidate]
threshold = {threshold}
"""
FULL = """mode = "full"
agent = "coder"
[embedding]
model = ""
[tiers]
l3_tokens = {l3}
[watch]
debounce_ms = 20
[sessions]
archive_days = 0
"""
FACTS = [
    "We decided to use PostgreSQL 16 for the invoices database",
    "We deploy to Fly.io in the ams region with two machines",
    "We use pytest with the xdist plugin for the test suite",
    "We decided to keep invoice numbers gap-free per year",
    "We use uv to manage the Python environments on CI",
]

TOOLS = ["PostgreSQL 16", "Fly.io region ams", "pytest-xdist", "uv on CI", "ruff", "mypy strict"]


def _minimal(tmp_path: Path, l3: int = 100_000, threshold: int = 1_000) -> Workspace:
    ws = Workspace.init(tmp_path / "w", mode="minimal", agent="coder")
    (ws.root / "mdmem.toml").write_text(MINIMAL.format(l3=l3, threshold=threshold))
    return Workspace.open(ws.root)


def _chat(n: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"Step {n}: we decided to use {TOOLS[n % len(TOOLS)]}."},
        {"role": "assistant", "content": f"Done with step {n}."},
    ]


def test_minimal_mode_promotes_the_compact_memory_when_l3_passes_its_trigger(
    tmp_path: Path,
) -> None:
    ws = _minimal(tmp_path, l3=90)
    auto = ws.sessions and ws._w.auto_promote
    assert auto is not None
    trigger = next(t for t in ws.lifecycle.tiers() if t.name == "L3").trigger
    for n in range(8):
        ws.compact(_chat(n), offline=True, flush=False)
        assert auto.wait(30)
        if auto.reports:
            break
        # below the trigger: the pass found nothing due and wrote nothing
        assert next(t for t in ws.lifecycle.tiers() if t.name == "L3").tokens < trigger
        assert "source=" not in (ws.root / "memory.md").read_text()
    else:
        raise AssertionError("L3 never reached its trigger")
    assert n >= 1 and auto.passes == n + 1  # one check per compaction, off the writer's path
    step = next(s for s in auto.reports[-1].steps if s.kind == "extract")
    assert step.done and step.path == ".compact_memory.md"
    assert "source=compact_memory" in (ws.root / "memory.md").read_text()
    archive = (ws.root / ".compact_memory.md").read_text().split("## Archive")[1]
    assert "Step 0:" in archive  # the oldest key event moved to the archive
    assert next(t for t in ws.lifecycle.tiers() if t.name == "L3").tokens < trigger
    ws.close()


def test_minimal_mode_consolidates_past_the_threshold_after_a_compaction(tmp_path: Path) -> None:
    ws = _minimal(tmp_path, threshold=3)
    auto = ws.sessions and ws._w.auto_promote
    assert auto is not None
    for fact in FACTS[:4]:
        ws.remember(fact)
    ws.compact(_chat(0), offline=True, flush=False, dry_run=True)
    assert auto.wait(30) and auto.passes == 0  # a dry run writes nothing and asks for nothing
    ws.compact(_chat(0), offline=True, flush=False)
    assert auto.wait(30)
    assert [s.kind for s in auto.reports[-1].steps] == ["consolidate"]
    ws.close()


def _other_process(root: Path, script: str) -> str:
    """Runs ``script`` in a second Python process on the workspace; returns its stdout."""
    code = f"import sys\nfrom mdmem import Workspace\nws = Workspace.open({str(root)!r})\n"
    done = subprocess.run(
        [sys.executable, "-c", code + textwrap.dedent(script)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


AUTO_OFF = """
import dataclasses
ws.config = dataclasses.replace(ws.config, tiers=dataclasses.replace(ws.config.tiers, auto=False))
"""
SESSION = """
with ws.session("invoices") as s:
    for i in range(6):
        s.event("decision", f"step {{i}}: {{FACTS[i % len(FACTS)]}}", 0.9)
    rel = s.path
{after}
print(rel)
"""


def _until(check, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_the_watcher_promotes_a_session_another_process_wrote_and_ended(tmp_path: Path) -> None:
    """The other process has automatic promotion off: its session's end and its summary
    (L3 past the trigger) are seen by the watcher, whose pass extracts the summary to L4."""
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(FULL.format(l3=60))
    ws = Workspace.open(ws.root)
    with ws.watch() as watcher:
        assert watcher.wait_idle(30)
        compact = "ws.compact(rel, offline=True, flush=False)"
        script = f"FACTS = {FACTS!r}\n{AUTO_OFF}" + SESSION.format(after=compact)
        rel = _other_process(ws.root, script).strip()
        assert ws._w.auto_promote is not None
        assert _until(lambda: "mdmem promoted:" in (ws.root / rel).read_text())
        assert watcher.wait_idle(30) and ws._w.auto_promote.wait(30)
    memory = (ws.root / "memory.md").read_text()
    assert f"source={Path(rel).stem}" in memory
    assert rel in SharedPasses(ws.files._state_dir).handled()
    ws.close()


def test_a_session_end_is_handled_once_whichever_process_sees_it_first(tmp_path: Path) -> None:
    """The other process promotes its own sessions; the watcher sees the same ends. Across
    the two processes, each session's end runs one pass."""
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(FULL.format(l3=100_000))
    ws = Workspace.open(ws.root)
    with ws.watch() as watcher:
        assert watcher.wait_idle(30)
        after = "ws.close()\nprint(ws._w.auto_promote.passes)"
        out = _other_process(ws.root, f"FACTS = {FACTS!r}\n" + SESSION.format(after=after))
        theirs, rel = (int(out.split()[0]), out.split()[1])
        assert watcher.wait_idle(30)
        assert ws._w.auto_promote is not None and ws._w.auto_promote.wait(30)
        assert _until(lambda: rel in ws._w.auto_promote.ended)  # the watcher saw the end
        assert ws._w.auto_promote.wait(30)
        assert theirs + ws._w.auto_promote.passes == 1
    assert SharedPasses(ws.files._state_dir).handled() == [rel]
    ws.close()


def test_a_request_made_while_another_process_runs_a_pass_is_queued_for_it(
    tmp_path: Path,
) -> None:
    """Two instances stand for two processes (each flock is its own open file): the second
    never waits and never runs beside the first; the first takes its request after."""
    a, b = SharedPasses(tmp_path), SharedPasses(tmp_path)
    first = a.claim({"s1"}, forced=False)
    assert first is not None and first.sessions == {"s1"}
    assert b.claim({"s2"}, forced=False) is None  # held: queued, not run
    assert a.release(first, handled=True, consolidate_above=7)  # "requests are waiting"
    second = a.claim(set(), forced=False)
    assert second is not None and second.sessions == {"s2"} and second.consolidate_above == 7
    assert not a.release(second, handled=True, consolidate_above=7)
    again = b.claim({"s1", "s2"}, forced=False)  # both handled: nothing is due
    assert again is not None and not again.due
    b.release(again, handled=False, consolidate_above=7)
    assert a.handled() == ["s1", "s2"]


class _AsksDuringRun:
    """The real promoter; while its pass runs, ``ask`` is called (another process asking)."""

    def __init__(self, real: object, ask: Callable[[], object]) -> None:
        self.real, self.ask = real, ask

    def run(self, **kwargs: object) -> object:
        self.ask()
        return self.real.run(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_the_same_end_queued_by_another_process_during_the_pass_runs_no_second_pass(
    tmp_path: Path,
) -> None:
    """Reproduces a failure seen under load: the watcher asked for the end of a session while
    the agent's process was running that end's pass; the request was queued, and taking the
    queue ran a second, forced pass in the agent's process (2 passes for one end)."""
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(FULL.format(l3=100_000))
    ws = Workspace.open(ws.root)
    assert ws.sessions is not None and ws._w.auto_promote is not None
    auto = ws._w.auto_promote
    real = auto.promoter
    other = SharedPasses(ws.files._state_dir)  # the watcher's process, seeing the same end
    rels: list[str] = []
    asked: list[object] = []

    def ask_once() -> None:
        if not asked:
            asked.append(other.claim(set(rels), False))

    auto.promoter = lambda: _AsksDuringRun(real(), ask_once)  # type: ignore[assignment,return-value]
    with ws.session("invoices") as s:
        for i in range(6):
            s.event("decision", f"step {i}: {FACTS[i % len(FACTS)]}", 0.9)
        rels.append(s.path)
    assert auto.wait(30)
    assert asked == [None]  # the pass lock was held: the request was queued
    assert auto.passes == 1
    assert other.handled() == rels
    assert other.claim([], False) is not None  # nothing left queued or forced
    ws.close()


def test_a_pass_another_process_holds_leaves_the_request_queued_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by mypy: with the pass lock held elsewhere, ``_pass`` returned a bare False that
    the worker could not unpack, and every such session end logged "automatic promotion
    skipped: cannot unpack non-iterable bool object"."""
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(FULL.format(l3=100_000))
    ws = Workspace.open(ws.root)
    assert ws.sessions is not None and ws._w.auto_promote is not None
    holder = SharedPasses(ws.files._state_dir)  # another process, running a pass
    held = holder.claim(set(), forced=False)
    assert held is not None
    with caplog.at_level(logging.WARNING, "mdmem"):
        with ws.session("invoices") as s:
            s.event("decision", FACTS[0], 0.9)
        assert ws._w.auto_promote.wait(30)
    assert ws._w.auto_promote.passes == 0
    assert "automatic promotion skipped" not in caplog.text
    assert holder.release(held, handled=False, consolidate_above=held.consolidate_above)
    ws.close()
