"""Automatic promotion (issue 12 §1): as sessions are written, L2 → L3 in the writer, and at
each session's end L3 → L4, consolidation and the session archive in a worker thread, each only
when its threshold is crossed. Real session files, written through ``ws.session``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from mdmem import Workspace

TOML = """mode = "full"
agent = "coder"
{embedding}
[tiers]
l1_tokens = 200
l2_tokens = 400
l3_tokens = {l3}
[consolidate]
threshold = {threshold}
[sessions]
archive_days = {archive}
"""
FACTS = [
    "We decided to use PostgreSQL 16 for the invoices database",
    "We deploy to Fly.io in the ams region with two machines",
    "We use pytest with the xdist plugin for the test suite",
    "We decided to keep invoice numbers gap-free per year",
    "We use uv to manage the Python environments on CI",
    "We decided the staging API listens on port 8443",
]


def _ws(
    tmp_path: Path, l3: int = 100_000, threshold: int = 1_000, archive: int = 0, embedder=None
) -> Workspace:  # type: ignore[no-untyped-def]
    ws = Workspace.init(tmp_path / "w", mode="full", agent="coder")
    embedding = "" if embedder else '[embedding]\nmodel = ""'
    toml = TOML.format(embedding=embedding, l3=l3, threshold=threshold, archive=archive)
    (ws.root / "mdmem.toml").write_text(toml)
    return Workspace(ws.root, embedder=embedder) if embedder else Workspace.open(ws.root)


def _session(ws: Workspace, n: int) -> None:
    """A session whose important events pass L2's trigger, so its summary is written."""
    with ws.session(f"invoices, part {n}") as s:
        for i in range(30):
            fact = FACTS[(n + i) % len(FACTS)]
            s.event("decision" if i % 3 == 0 else "execute", f"step {i}: {fact}", 0.9)


def _promoted(ws: Workspace) -> list[str]:
    return sorted(
        p.name for p in (ws.root / ".sessions").glob("*.md") if "mdmem promoted:" in p.read_text()
    )


def test_l3_past_its_trigger_goes_to_l4_when_a_session_ends(tmp_path: Path) -> None:
    ws = _ws(tmp_path, l3=600)
    auto = ws.sessions and ws._w.auto_promote
    assert auto is not None
    trigger = next(t for t in ws.lifecycle.tiers() if t.name == "L3").trigger
    memory = (ws.root / "memory.md").read_bytes()
    crossed = None
    for n in range(8):
        _session(ws, n)
        assert auto.wait(30)
        l3_before_pass = sum(
            i.tokens for i in ws._w.promoter.plan().view.l3 if i.path not in _promoted(ws)
        )
        if not _promoted(ws):  # below the trigger: nothing happened
            assert l3_before_pass < trigger
            assert (ws.root / "memory.md").read_bytes() == memory
            assert not auto.reports
            continue
        crossed = n
        break
    assert crossed is not None and crossed >= 1  # the first sessions stayed below
    step = next(s for s in auto.reports[-1].steps if s.kind == "extract")
    assert step.done and "memories written to L4" in step.detail
    oldest = sorted(p.name for p in (ws.root / ".sessions").glob("*.md"))[0]
    assert _promoted(ws)[0] == oldest  # the oldest summary went first
    memory_text = (ws.root / "memory.md").read_text()
    assert f"source={oldest.removesuffix('.md')}" in memory_text
    assert next(t for t in ws.lifecycle.tiers() if t.name == "L3").tokens < trigger
    ws.close()


def test_consolidation_runs_past_the_threshold_and_again_only_after_growth(
    tmp_path: Path,
) -> None:
    ws = _ws(tmp_path, threshold=3)
    auto = ws.sessions and ws._w.auto_promote
    assert auto is not None
    for fact in FACTS[:3]:
        ws.remember(fact)
    with ws.session("below the threshold") as s:
        s.event("execute", "nothing much")
    assert auto.wait(30) and not auto.reports  # 3 memories: not past 3
    ws.remember(FACTS[3])
    with ws.session("past the threshold") as s:
        s.event("execute", "nothing much")
    assert auto.wait(30)
    assert [s.kind for s in auto.reports[-1].steps] == ["consolidate"]
    with ws.session("no growth since") as s:
        s.event("execute", "nothing much")
    assert auto.wait(30) and len(auto.reports) == 1  # not repeated at every session's end
    ws.remember(FACTS[4])
    ws.remember(FACTS[5])
    with ws.session("grown") as s:
        s.event("execute", "nothing much")
    assert auto.wait(30) and [s.kind for s in auto.reports[-1].steps] == ["consolidate"]
    assert len(auto.reports) == 2
    ws.close()


def test_a_process_that_ends_its_session_and_exits_archives_old_sessions(tmp_path: Path) -> None:
    """The worker is no daemon: the pass started by the session's end finishes before the
    process exits, even without ``ws.close()``; a running session's writes start none."""
    ws = _ws(tmp_path, archive=30)
    old = ws.root / ".sessions" / "20260105_100000_old.md"
    old.parent.mkdir(exist_ok=True)
    old.write_text(
        "---\nagent: coder\nstarted: 2026-01-05T10:00:00\nstatus: completed\n---\n"
        "# Session: old\n\n## Events\n\n- 10:00:00 [execute] worked\n\n## Summary\n\n"
        "### State\n- We use uv\n"
    )
    data = old.read_bytes()
    script = textwrap.dedent(
        f"""
        import sys
        from mdmem import Workspace
        ws = Workspace.open({str(ws.root)!r})
        s = ws.session("today's work")
        s.event("execute", "one step")
        assert ws._w.auto_promote.wait(5) and not ws._w.auto_promote.reports  # still running
        assert ws.root.joinpath(".sessions/20260105_100000_old.md").exists()
        s.close()  # the process exits right after, without ws.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    moved = ws.root / ".sessions/archive/2026-01/20260105_100000_old.md"
    assert not old.exists() and moved.read_bytes() == data


def test_l2_stays_within_its_budget_after_every_write(tmp_path: Path) -> None:
    """Checked again only after the file grew by L2's headroom: never over the budget."""
    ws = _ws(tmp_path)
    with ws.session("a long run of important steps") as s:
        for i in range(40):
            s.event("execute", f"step {i}: {FACTS[i % len(FACTS)]}", 0.9)
            l2 = next(t for t in ws.lifecycle.tiers() if t.name == "L2")
            assert l2.tokens <= l2.budget, f"after event {i}: {l2.tokens} > {l2.budget}"
    ws.close()


def test_a_session_end_past_the_threshold_merges_near_duplicates(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """The real model and the offline merge: the worker writes the merged memory (``refines=``
    its sources) and archives the originals, with no model call."""
    ws = _ws(tmp_path, threshold=4, embedder=embedder)
    deploy = [
        "The deploy target is Fly.io in region ams",
        "Deploys go to Fly.io, region ams",
        "Production deploys go to Fly.io in the ams region",
    ]
    ids = [ws.remember(t).id for t in [*deploy, "The database is PostgreSQL 16 on port 5432"]]
    with ws.session("below the threshold") as s:
        s.event("execute", "nothing much")
    assert ws._w.auto_promote is not None and ws._w.auto_promote.wait(60)
    assert "refines=" not in (ws.root / "memory.md").read_text()
    ws.remember("User prefers short answers")
    with ws.session("past it") as s:
        s.event("execute", "nothing much")
    assert ws._w.auto_promote.wait(120)
    merged = [e for e in ws.entries("memory.md") if "refines" in e.meta]
    assert len(merged) == 1 and set(merged[0].meta["refines"].split(",")) == set(ids[:3])
    archive = (ws.root / "memory.md").read_text().split("## Archive")[1]
    for original in ids[:3]:
        line = next(ln for ln in archive.splitlines() if f"id={original}" in ln)
        assert f"consolidated_into={merged[0].id}" in line
    ws.close()


def test_a_dry_run_shows_every_change_the_real_run_makes(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Issue 31: `mdmem promote --dry-run` said "(no change)" while the real run rewrote
    memory.md: consolidation wrote its dry run to a writer of its own."""
    import difflib
    import re

    from typer.testing import CliRunner

    from mdmem.cli import app

    ws = _ws(tmp_path, threshold=4, embedder=embedder)
    for text in [
        "The deploy target is Fly.io in region ams",
        "Deploys go to Fly.io, region ams",
        "Production deploys go to Fly.io in the ams region",
        "The database is PostgreSQL 16 on port 5432",
        "User prefers short answers",
    ]:
        ws.remember(text)
    path = ws.root / "memory.md"
    before = path.read_text()
    dry = ws.lifecycle.promote(dry_run=True)
    assert path.read_text() == before and "consolidated_into=" in dry.diff
    shown = CliRunner().invoke(app, ["-w", str(ws.root), "promote", "--dry-run"]).output
    assert "(no change)" not in shown and "consolidated_into=" in shown
    ws.lifecycle.promote()
    real = "".join(difflib.unified_diff(before.splitlines(True), path.read_text().splitlines(True)))

    def changed(diff: str) -> list[str]:  # the new merged memory's id differs between runs
        lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        return sorted(re.sub(r"m-[0-9a-f]{10}", "m-…", ln) for ln in lines)

    assert changed(dry.diff) == changed(real) != []
    ws.close()
