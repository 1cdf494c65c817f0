"""Memory tiers L1-L4 (issue 12 §1): views over the files, promotion rules, session archive,
and relations set by extraction (§3). Small budgets so that a few dozen events cross them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mdmem import Workspace
from mdmem.cli import app
from mdmem.errors import ConfigError

TOML = """mode = "{mode}"
agent = "coder"
[embedding]
model = ""
[tiers]
l1_tokens = 200
l2_tokens = 400
l3_tokens = 300
{extra}
"""


def _ws(
    tmp_path: Path, mode: str = "full", extra: str = "", auto: bool = True, archive: int = 0
) -> Workspace:
    ws = Workspace.init(tmp_path / "w", mode=mode, agent="coder")  # type: ignore[arg-type]
    auto_line = "" if auto else "auto = false\n"
    extra = f"{auto_line}{extra}\n[sessions]\narchive_days = {archive}\n"
    (ws.root / "mdmem.toml").write_text(TOML.format(mode=mode, extra=extra))
    return Workspace.open(ws.root)


TOPICS = [
    "edited app/auth.py to read the cookie domain from settings",
    "created migrations/0004_invoice_counters.py for gap-free numbers",
    "edited app/limits.py: a redis token bucket per API key",
    "edited docker-compose.yml to map postgres to host port 5433",
    "created app/pdf.py rendering invoices with weasyprint",
    "edited .github/workflows/ci.yml to cache the uv environment",
    "edited fly.toml: region ams and two machines",
    "created app/webhooks.py retrying three times with backoff",
]


def _events(session, n: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        action = "error" if i % 5 == 0 else "execute" if i % 2 else "thinking"
        session.event(action, f"step {i}: {TOPICS[i % len(TOPICS)]} (host{i}.example)")


def _event_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if re.match(r"- \d\d:\d\d:\d\d \[", ln)]


def _tiers(ws: Workspace) -> dict[str, object]:
    return {t.name: t for t in ws.lifecycle.tiers()}


def test_l2_is_compacted_into_the_summary_as_the_session_is_written(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    s = ws.session("fix the flaky login test")
    _events(s, 40)
    path = ws.root / (s.path or "")
    lines = _event_lines(path)
    assert len(lines) == 40  # eviction never removes or rewrites an event line
    assert [ln.split(" <!--")[0] for ln in lines] == [
        f"- {e.time} [{e.action}] {e.text}" for e in s.events
    ]
    summary = path.read_text().split("## Summary", 1)[1]
    evicted = re.search(r"<!-- mdmem evicted: ([\d,-]+) -->", summary)
    assert evicted is not None and "### Key Events" in summary
    tiers = _tiers(ws)
    l2 = tiers["L2"]
    assert l2.tokens < l2.trigger <= 0.85 * 400  # type: ignore[attr-defined]
    assert tiers["L1"].tokens <= 200 and tiers["L1"].items >= 1  # type: ignore[attr-defined]
    # the least important went first: every remaining L2 event is an error (0.9)
    record = ws.sessions.record(s.id)
    kept = ws._w.promoter.plan().view.l2
    assert kept and all(i.event.action == "error" for i in kept[:-1])
    assert len(record.events) == 40
    s.close()


def test_frequency_strategy_keeps_what_searches_return(tmp_path: Path) -> None:
    ws = _ws(tmp_path, extra='strategy = "frequency"', auto=False)
    s = ws.session("cookie work")
    _events(s, 24)
    ws.index.update()
    for _ in range(3):
        ws.search("host3.example", k=1, mode="keyword")  # step 3 (execute, 0.65) is used
    report = ws.lifecycle.promote()
    assert report.steps[0].kind == "compact" and report.steps[0].done
    evicted = ws._w.promoter.plan().view.evicted
    assert 4 not in evicted  # position 4 = step 3: accessed, so kept
    assert evicted  # others of the same importance went
    s.close()


def _summarized(
    ws: Workspace, name: str, started: str, fact: str, status: str = "completed"
) -> Path:
    path = ws.root / ".sessions" / f"{name}.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"---\nagent: coder\nstarted: {started}\nstatus: {status}\n---\n# Session: {name}\n\n"
        "## Events\n\n- 10:00:00 [execute] worked on it\n\n## Summary\n\n"
        f"### State\n- {fact}\n\n### Key Events\n- {started[:10]} [decision] {fact}\n"
    )
    return path


FACTS = [
    "We decided to use PostgreSQL 16 for the invoices database",
    "We use ruff for linting and formatting",
    "We deploy to Fly.io in the ams region",
    "We use pytest with the xdist plugin for the test suite",
    "We decided to keep invoice numbers gap-free per year",
    "We use uv to manage the Python environments",
]


def test_l3_promotes_the_oldest_summaries_facts_to_l4(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    paths = [
        _summarized(ws, f"2026010{n + 1}_100000_s{n}", f"2026-01-0{n + 1}T10:00:00", fact)
        for n, fact in enumerate(FACTS)
    ]
    before = _tiers(ws)["L3"]
    assert before.items == 6 and before.tokens >= before.trigger  # type: ignore[attr-defined]
    assert "extract lasting facts of the 2 oldest" in before.next  # type: ignore[attr-defined]
    dry = ws.lifecycle.promote(dry_run=True)
    assert "+- The team decided to use PostgreSQL 16" in dry.diff
    assert not (ws.root / "memory.md").read_text().count("PostgreSQL")  # nothing written
    report = ws.lifecycle.promote()
    assert [s.kind for s in report.steps][:2] == ["extract", "extract"]
    memory = (ws.root / "memory.md").read_text()
    for n in (0, 1):
        line = next(ln for ln in memory.splitlines() if FACTS[n].split()[-1] in ln)
        assert f"source=2026010{n + 1}_100000_s{n}" in line
        assert "<!-- mdmem promoted: " in paths[n].read_text()
    assert "promoted" not in paths[2].read_text()
    assert _tiers(ws)["L3"].items == 4  # type: ignore[attr-defined]
    again = ws.lifecycle.promote()  # below the trigger now: a re-run converges
    assert not [s for s in again.steps if s.kind == "extract"]


def test_l4_past_its_threshold_runs_consolidation(tmp_path: Path) -> None:
    ws = _ws(tmp_path, extra="[consolidate]\nthreshold = 3")
    for fact in FACTS[:4]:
        ws.remember(fact)
    assert "consolidate" in _tiers(ws)["L4"].next  # type: ignore[attr-defined]
    report = ws.lifecycle.promote()
    step = next(s for s in report.steps if s.kind == "consolidate")
    assert "no embeddings" in step.detail or "memories" in step.detail


def test_old_compacted_sessions_move_to_the_archive_still_found(tmp_path: Path) -> None:
    ws = _ws(tmp_path, archive=30)
    old = _summarized(ws, "20260105_100000_old", "2026-01-05T10:00:00", FACTS[0])
    raw = _summarized(ws, "20260106_100000_raw", "2026-01-06T10:00:00", FACTS[1])
    raw.write_text(raw.read_text().split("## Summary")[0])  # never compacted: stays
    running = _summarized(ws, "20260107_100000_run", "2026-01-07T10:00:00", FACTS[2], "running")
    data = old.read_bytes()
    report = ws.lifecycle.promote()
    moved = ws.root / ".sessions/archive/2026-01/20260105_100000_old.md"
    assert [m.target for m in report.moves if m.done] == [
        ".sessions/archive/2026-01/20260105_100000_old.md"
    ]
    assert not old.exists() and moved.read_bytes() == data  # nothing lost
    assert raw.exists() and running.exists()
    assert ws.sessions.record("20260105_100000_old").path == moved.relative_to(ws.root).as_posix()
    hits = ws.search("PostgreSQL invoices database", mode="keyword")
    assert any(h.path.startswith(".sessions/archive/2026-01/") for h in hits)


def test_minimal_mode_promotes_the_compact_memorys_oldest_events(tmp_path: Path) -> None:
    ws = _ws(tmp_path, mode="minimal", extra="l3_share = 0.25")
    facts = [*FACTS, *(f"{fact} since March" for fact in FACTS)]
    events = "\n".join(f"- 2026-01-{n + 1:02} [decision] {fact}" for n, fact in enumerate(facts))
    (ws.root / ".compact_memory.md").write_text(
        f"# Compact Memory\n\n## State\n- working on invoices\n\n## Key Events\n{events}\n"
    )
    assert _tiers(ws)["L3"].items == 12  # type: ignore[attr-defined]
    ws.lifecycle.promote()
    text = (ws.root / ".compact_memory.md").read_text()
    key_events, archive = text.split("## Key Events")[1].split("## Archive")
    assert FACTS[0] in archive and FACTS[2] in archive and FACTS[3] in key_events
    assert "working on invoices" in text.split("## Key Events")[0]  # the state stays
    assert "source=compact_memory" in (ws.root / "memory.md").read_text()


def test_bad_tier_config_names_the_key(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws.root / "mdmem.toml").write_text("[tiers]\nl2_target = 0.9\nl2_trigger = 0.8\n")
    with pytest.raises(ConfigError, match="l2_target < l2_trigger"):
        Workspace.open(ws.root)
    (ws.root / "mdmem.toml").write_text('[tiers]\nstrategy = "random"\n')
    with pytest.raises(ConfigError, match=r"tiers\.strategy must be"):
        Workspace.open(ws.root)


def test_cli_tiers_and_promote(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    for n, fact in enumerate(FACTS):
        _summarized(ws, f"2026010{n + 1}_100000_s{n}", f"2026-01-0{n + 1}T10:00:00", fact)
    runner = CliRunner()
    out = runner.invoke(app, ["-w", str(ws.root), "tiers", "--json"])
    assert out.exit_code == 0, out.output
    assert [t["name"] for t in json.loads(out.stdout)] == ["L1", "L2", "L3", "L4"]
    out = runner.invoke(app, ["-w", str(ws.root), "promote", "--dry-run", "--json"])
    data = json.loads(out.stdout)
    assert data["dry_run"] and data["diff"] and not data["after"]
    out = runner.invoke(app, ["-w", str(ws.root), "promote"])
    assert out.exit_code == 0 and "L3" in out.stdout
    assert [t["name"] for t in ws.lifecycle.stats().tiers] == ["L1", "L2", "L3", "L4"]


def test_context_draws_on_the_live_sessions_tiers(tmp_path: Path) -> None:
    ws = _ws(tmp_path, auto=False)
    for n, fact in enumerate(FACTS[:4]):  # the 3 newest are recent sessions, the oldest is L3
        _summarized(ws, f"2026010{n + 1}_100000_s{n}", f"2026-01-0{n + 1}T10:00:00", fact)
    s = ws.session("cookie work")
    s.request("Make the login test stable")
    _events(s, 30)
    ctx = ws.build_context(budget_tokens=1500)
    names = [u.name for u in ctx.sources]
    assert {"recent", "important", "summaries"} <= set(names)
    assert "## Current Session: cookie work" in ctx.text
    assert "step 29:" in ctx.text  # L1: the newest event
    assert "Important Earlier Events" in ctx.text and "[error] step 0:" in ctx.text
    assert "PostgreSQL 16" in ctx.text  # L3: an older session's summary
    lines = [ln for ln in ctx.text.splitlines() if ln.startswith("- ")]
    assert len(lines) == len(set(lines))
    s.close()


def test_extraction_records_contradicts_and_refines(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    root = _ws(tmp_path).root
    (root / "mdmem.toml").write_text('agent = "coder"\n[compact]\ndedupe_similarity = 0.9\n')
    ws = Workspace.open(root, embedder=embedder)
    old = ws.remember("The user's staging database port is 5432", type="fact")
    report = ws.extract([{"role": "user", "content": "My staging database port is 6543"}])
    change = next(c for c in report.changes if c.action == "replace")
    new = ws.get(change.entry_id or "")
    assert new.meta.get("contradicts") == old.id and new.meta.get("supersedes") == old.id
    assert ws.lifecycle.related(old.id)[0].kind == "contradicts"
    base = ws.remember("The user prefers dark mode in VS Code", type="preference")
    said = "I prefer dark mode in VS Code and in the terminal"
    report = ws.extract([{"role": "user", "content": said}])
    change = next(c for c in report.changes if c.action == "merge")
    assert ws.get(change.entry_id or "").meta.get("refines") == base.id


def test_an_interrupted_archive_move_is_finished_by_the_next_run(tmp_path: Path) -> None:
    """Killed between the copy and the removal, both names hold the same bytes: the next run
    removes the old one; a copy with other text is never overwritten."""
    ws = _ws(tmp_path, archive=30)
    old = _summarized(ws, "20260105_100000_old", "2026-01-05T10:00:00", FACTS[0])
    other = _summarized(ws, "20260106_100000_other", "2026-01-06T10:00:00", FACTS[1])
    archive = ws.root / ".sessions/archive/2026-01"
    archive.mkdir(parents=True)
    (archive / old.name).write_bytes(old.read_bytes())  # the copy made before the kill
    (archive / other.name).write_text("a person's own file of that name\n")
    moves = {m.session: m for m in ws.lifecycle.promote().moves}
    assert moves["20260105_100000_old"].done and not old.exists()
    assert not moves["20260106_100000_other"].done and other.exists()
    assert (archive / other.name).read_text() == "a person's own file of that name\n"


def test_promoting_an_old_summary_never_brings_back_a_changed_value(tmp_path: Path) -> None:
    """The summary of January says the old port; the port changed since (the old memory is
    superseded): promoting January's summary must not put the old value back over the new."""
    ws = _ws(tmp_path)
    ws.extract([{"role": "user", "content": "My staging database port is 5432"}])
    ws.extract([{"role": "user", "content": "My staging database port is 6543"}])
    for n in range(6):
        fact = "My staging database port is 5432" if n == 0 else FACTS[n]
        _summarized(ws, f"2026010{n + 1}_100000_s{n}", f"2026-01-0{n + 1}T10:00:00", fact)
    ws.lifecycle.promote()
    active = [e.text for e in ws.entries("memory.md")]
    assert "The user's staging database port is 6543" in active
    assert not any("5432" in text for text in active)


def _restating_session(ws: Workspace) -> Path:
    path = ws.root / ".sessions" / "20260105_100000_gym.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "---\nagent: coder\nstarted: 2026-01-05T10:00:00\nstatus: completed\n---\n"
        "# Session: gym\n\n## Events\n\n"
        "- 10:00:00 [user] My gym is Iron Works, near the harbour\n"
        "- 10:01:00 [user] The harbour gym opens at six\n\n"
        "## Summary\n\n### Key Events\n"
        "- 2026-01-05 [fact] User's gym is Iron Works, near the harbour\n"
        "- 2026-01-05 [fact] User swims at the harbour pool on Sundays\n"
    )
    return path


def test_a_summary_line_never_crowds_out_the_event_it_restates(tmp_path: Path) -> None:
    """A session's summary restates its own events (which stay in the file): below a hit of
    the same file saying the same, it gives its place to the next passage; a summary line
    that says something no hit above says stays."""
    ws = _ws(tmp_path)
    _restating_session(ws)
    hits = ws.search("harbour gym Iron Works", k=3, mode="keyword")
    texts = [h.text for h in hits]
    assert texts[0].endswith("My gym is Iron Works, near the harbour")
    assert not any("User's gym is Iron Works" in t for t in texts)  # the restatement
    assert any(t.endswith("The harbour gym opens at six") for t in texts)
    assert any("harbour pool on Sundays" in t for t in texts)  # says something new: stays
    only = ws.search("swims pool Sundays", k=3, mode="keyword")
    assert only and "harbour pool on Sundays" in only[0].text


def test_archived_sessions_keep_their_entry_ids_and_access_counts(tmp_path: Path) -> None:
    """Moving a session to .sessions/archive/ must not make its lines new entries: their ids
    (which access counts and relations use) stay."""
    ws = _ws(tmp_path, archive=30)
    path = _restating_session(ws)
    before = {e.text: e.id for e in ws.entries(path.relative_to(ws.root).as_posix())}
    for _ in range(3):
        ws.search("harbour gym opens at six", k=1, mode="keyword")
    event = before["10:01:00 [user] The harbour gym opens at six"]
    counted = ws.index._backend.access_counts([event])[event]
    assert counted >= 3
    assert [m.done for m in ws.lifecycle.promote().moves] == [True]
    moved = ".sessions/archive/2026-01/20260105_100000_gym.md"
    assert {e.text: e.id for e in ws.entries(moved)} == before
    ws.index.update()
    assert ws.index._backend.access_counts([event])[event] == counted
