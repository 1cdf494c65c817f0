"""Context building: per-mode sources, budget shares, marked truncation, real token counts."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.context.pack import Source, Unit, pack
from mdmem.tokens import estimate_tokens, token_counter

MARKER = re.compile(r"\[\.\.\. ([\d,]+) tokens of (.+?) omitted\]")


TIER_LABELS = {
    "sessions": ".sessions/",
    "recent": "the current session",
    "important": "earlier events",
    "summaries": "session summaries",
}


@pytest.fixture
def live(example: Workspace, tmp_path: Path) -> Workspace:
    """A copy of the example workspace while the coder runs a long session (L1 and L2 in the
    context), with an older compacted session (L3)."""
    root = Path(shutil.copytree(example.root, tmp_path / "live"))
    old = root / ".sessions" / "20261101_090000_old-work.md"
    old.write_text(
        "---\nagent: coder\nstarted: 2026-11-01T09:00:00\nstatus: completed\n---\n"
        "# Session: old work\n\n## Summary\n\n### State\n- invoices API scaffolded\n\n"
        "### Key Events\n- 2026-11-01 [decision] chose FastAPI with SQLAlchemy 2\n"
    )
    ws = Workspace.open(root)
    session = ws.session("long refactor")
    session.request("Split app/invoices.py into a package")
    for n in range(30):
        action = ("error", "execute", "thinking")[n % 3]
        session.event(action, f"step {n}: moved invoices/part_{n}.py and ran pytest ({n} passed)")
    return ws


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=0, max_value=4000), running=st.booleans())
def test_never_over_budget_and_every_cut_is_marked(
    example: Workspace, live: Workspace, budget: int, running: bool
) -> None:
    """Also while a session runs: its tiers (recent, important events) and older summaries
    are sources like the others, and never repeat a line."""
    ws = live if running else example
    ctx = ws.build_context(budget_tokens=budget)
    assert ctx.tokens == estimate_tokens(ctx.text) <= budget
    markers = {label: int(n.replace(",", "")) for n, label in MARKER.findall(ctx.text)}
    for source in ctx.sources:
        if source.omitted and source.used:
            label = TIER_LABELS.get(source.name, ", ".join(source.files))
            assert markers[label] == source.omitted
        assert source.used <= source.share  # a source never takes more than it was given
    lines = [line for line in ctx.text.splitlines() if line.startswith("- ")]
    assert len(lines) == len(set(lines))  # nothing is said twice


def test_everything_fits_in_a_large_budget(example: Workspace) -> None:
    ctx = example.build_context(budget_tokens=50_000)
    assert ctx.omitted == 0 and not MARKER.search(ctx.text)
    assert [s.name for s in ctx.sources] == ["task", "sessions", "world", "knowledge"]
    headings = re.findall(r"^#+ .+$", ctx.text, re.M)
    assert headings[:2] == ["## Current Task", "### Instructions"]
    for group in ("User Preferences", "Known Facts", "Patterns", "Proven Skills"):
        assert f"### {group}" in headings
    # own sessions only: the reviewer's session is not the coder's memory
    assert "review-pr-9" not in ctx.text and "invoice-status-enum-ci" in ctx.text
    assert "Now: 4. tests/test_numbering_concurrency.py" in ctx.text
    assert "- alembic head: 0004_invoice_counters" in ctx.text
    # the sum of the parts is the whole (give or take the blank lines between sources)
    assert abs(sum(s.used for s in ctx.sources) - ctx.tokens) <= 2 * len(ctx.sources)


def test_unused_share_flows_to_the_others(example: Workspace) -> None:
    ctx = example.build_context(budget_tokens=3000)
    by = {s.name: s for s in ctx.sources}
    assert by["task"].omitted == 0 and by["task"].share < 0.15 * 3000  # gives the rest away
    assert by["knowledge"].share > 0.3 * 3000
    assert ctx.tokens >= 0.9 * 3000  # the budget is used, not wasted


def test_slack_is_shared_by_weight_not_by_order(example: Workspace) -> None:
    """The world (weight 4) needs less than its share; what it leaves goes to the sources still
    short of room by their weights (knowledge 2, task 1), not to the first one (the task)."""
    weights = {"task": 1.0, "sessions": 1.0, "world": 4.0, "knowledge": 2.0}
    table = ", ".join(f"{name} = {w}" for name, w in weights.items())
    (example.root / "mdmem.toml").write_text(
        f'mode = "full"\nagent = "coder"\n[context]\nshares = {{{table}}}\n'
    )
    budget = 1200
    by = {
        s.name: s for s in Workspace.open(example.root).build_context(budget_tokens=budget).sources
    }
    assert set(by) == set(weights)
    base = {name: budget * w / sum(weights.values()) for name, w in weights.items()}
    assert by["world"].omitted == 0 and by["world"].share < base["world"] - 50  # the slack
    assert by["task"].omitted and by["knowledge"].omitted  # both still short of room
    gain_task = by["task"].share - base["task"]
    gain_knowledge = by["knowledge"].share - base["knowledge"]
    assert gain_task > 0 and gain_knowledge > 0
    assert 1.5 <= gain_knowledge / gain_task <= 2.5  # by weight: 2 to 1 (whole-item cuts aside)


def test_shares_are_configurable(example: Workspace) -> None:
    (example.root / "mdmem.toml").write_text(
        'mode = "full"\nagent = "coder"\n[context]\nshares = {knowledge = 3.0}\n'
    )
    ws = Workspace.open(example.root)
    wide = {s.name: s.used for s in ws.build_context(budget_tokens=1500).sources}
    narrow = {s.name: s.used for s in example.build_context(budget_tokens=1500).sources}
    assert wide["knowledge"] > narrow["knowledge"] + 200
    assert wide["world"] < narrow["world"]


def test_priority_inside_a_source_keeps_the_current_item(example: Workspace) -> None:
    ctx = example.build_context(budget_tokens=600)
    assert "Now: 4." in ctx.text
    assert "[x] 1." not in ctx.text  # done items go first when the task is cut


def test_counts_with_the_models_tokenizer(example: Workspace) -> None:
    ctx = example.build_context(budget_tokens=700, model="gpt-4o")
    assert ctx.model == "gpt-4o"
    assert ctx.tokens == token_counter("gpt-4o")(ctx.text) <= 700
    estimate = example.build_context(budget_tokens=700)
    assert estimate.model is None and estimate.tokens <= 700


def test_minimal_mode_uses_knowledge_and_compact_memory(example: Workspace) -> None:
    example.set_mode("minimal")
    ctx = example.build_context(budget_tokens=50_000)
    assert [s.name for s in ctx.sources] == ["knowledge", "compact"]
    assert "## Compact Memory" in ctx.text and "### Key Events" in ctx.text
    assert "Current Task" not in ctx.text and "World State" not in ctx.text
    small = example.build_context(budget_tokens=400)
    # the newest key events are kept first
    assert "2026-11-21 [progress]" in small.text
    assert "2026-11-16 [setup]" not in small.text


def test_pack_is_exact_with_many_tiny_sources() -> None:
    sources = [
        Source(
            f"s{n}", f"Source {n}", f"f{n}.md", tuple(Unit(f"- item {i} of {n}") for i in range(20))
        )
        for n in range(6)
    ]
    for budget in (0, 5, 30, 100, 400):
        text, usage = pack(sources, {f"s{n}": 1.0 for n in range(6)}, budget, estimate_tokens)
        assert estimate_tokens(text) <= budget
        for u in usage:
            assert u.units + u.omitted_units == 20
            assert (u.omitted > 0) == (u.omitted_units > 0)
            if u.omitted and u.used:
                assert (
                    f"[... {u.omitted:,} tokens of {u.name[1:] and 'f' + u.name[1:]}.md omitted]"
                    in text
                )
    with pytest.raises(ValueError):
        pack(sources, {}, -1, estimate_tokens)


@pytest.mark.slow
def test_query_brings_matching_memories_first(indexed: Workspace) -> None:
    ctx = indexed.build_context("which port does the test database use", budget_tokens=900)
    knowledge = ctx.text.split("## Memory", 1)[1].split("\n## ", 1)[0]
    # the memories about the test database made the cut; unrelated ones did not
    assert "host port 5433" in knowledge
    assert "WeasyPrint" not in knowledge and "httpx" not in knowledge
    assert "omitted]" in knowledge
    assert "## Related Memories" in ctx.text
    assert re.search(r"\(\.sessions/[^)]+\.md:\d+(-\d+)?\)", ctx.text)  # cited passages


@pytest.mark.slow
def test_cli_context_prints_text_and_reports_usage(example: Workspace) -> None:
    out = subprocess.run(
        [
            Path(sys.executable).parent / "mdmem",
            "-w",
            example.root,
            "context",
            "--budget-tokens",
            "500",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("## Current Task")
    assert "of 500 tokens" in out.stderr and "omitted" in out.stderr


def test_agent_loop_full_mode_with_a_person_editing_mid_run(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "agent", mode="full", agent="coder")
    ws.task.new("Add rate limiting", ["design", "implement", "test"])
    prompts = []
    with ws.session("Add rate limiting to the API") as s:
        s.request("Please add rate limiting, 100 requests per minute per key")
        while (item := ws.task.current()) is not None:
            s.round()
            s.event("planning", f"work on: {item.text}")
            if item.text == "implement":
                ws.world.set("rate limiter", "redis token bucket, 100/min per API key")
                # a person edits the files mid-run: adds a TODO and a fact by hand
                path = ws.root / "task_process.md"
                path.write_text(path.read_text().replace("- [ ] test", "- [ ] test\n- [ ] docs"))
                facts = ws.root / "world_state.md"
                facts.write_text(facts.read_text() + "- **redis**: 7.2 on port 6379\n")
            s.tool("shell", "pytest -q", "12 passed")
            ws.task.complete(item.n)
            prompts.append(ws.build_context("rate limit", budget_tokens=600).text)
        s.response("Rate limiting is in; docs updated.")
    assert [i.text for i in ws.task.items()] == ["design", "implement", "test", "docs"]
    assert all(i.done for i in ws.task.items())
    assert len(prompts) == 4  # the hand-added item was worked on too
    assert "redis: 7.2 on port 6379" in prompts[-1]
    assert "rate limiter: redis token bucket" in prompts[-1]
    last = ws.build_context(budget_tokens=2000).text
    assert "Add rate limiting to the API [completed]" in last
    record = ws.sessions.list(agent="coder", limit=1)[0]
    assert record.rounds == 4 and record.tools == {"shell": 4}


def test_agent_loop_minimal_mode(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "chat", mode="minimal")
    ws.remember("User prefers short answers", type="preference", importance=0.9)
    compact = ws.root / ".compact_memory.md"
    compact.write_text(
        "# Compact Memory\n\n## State\n- Planning a trip to Lisbon in May\n\n"
        "## Key Events\n- 2026-11-20 [decision] flights booked for May 3\n"
    )
    with ws.session("trip planning") as s:
        s.request("What should I pack?")
        ctx = ws.build_context("packing", budget_tokens=300)
        s.response("Light clothes; May in Lisbon is warm.")
    assert "User prefers short answers" in ctx.text
    assert "Planning a trip to Lisbon in May" in ctx.text
    assert list(ws.root.glob(".sessions/*")) == []


def test_context_is_built_from_the_files_when_the_index_server_is_down(tmp_path: Path) -> None:
    """Issue 32 §4: `mdmem context` failed outright when PostgreSQL was down, though the task,
    world, memory and pool sections need no index. They are built; the retrieved part says it
    is missing, and why, in `Context.problems` (and on stderr), never with the password."""
    from typer.testing import CliRunner

    from mdmem.cli import app

    ws = Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    ws.remember("The staging database listens on port 5433", type="fact")
    ws.task.new("Move staging to the new cluster")
    ws.world.set("region", "eu-west-1")
    ws.sharing.pool().write("plan", "drain, then switch")
    down = f"postgresql://mdmem:pw-never-shown@/memory?host={tmp_path}/no-server-here"
    config = ws.root / "mdmem.toml"
    text = config.read_text().replace('model = "all-MiniLM-L6-v2"', 'model = ""')
    config.write_text(text + f'\n[index]\nbackend = "postgres"\nurl = "{down}"\n')
    context = Workspace.open(ws.root).build_context("which port does staging use", 2000)
    for part in ("port 5433", "Move staging to the new cluster", "eu-west-1", "drain, then"):
        assert part in context.text
    assert "[related memories missing: the index could not be searched]" in context.text
    assert len(context.problems) == 1 and "cannot reach PostgreSQL" in context.problems[0]
    assert "the retrieved part of the context is missing" in context.problems[0]
    out = CliRunner().invoke(app, ["-w", str(ws.root), "context", "staging port"])
    assert out.exit_code == 0, out.output
    assert "port 5433" in out.stdout and "retrieved part of the context is missing" in out.stderr
    assert "pw-never-shown" not in out.stdout + out.stderr
