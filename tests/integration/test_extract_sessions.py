"""Offline extraction from a coding agent's sessions, each written through a real
``ws.session``: which step fixed an error, preferences stated about the user, environment
facts from logged steps, decisions not worded "decided", reversals that supersede the old
decision, hand-written entries left alone, and re-running that changes nothing.

The defects were found by benchmarks/consolidate_agent.py (docs/performance.md: "Compaction,
extraction and consolidation")."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from mdmem import Workspace

Step = tuple[str, str]


@pytest.fixture
def agent_ws(tmp_path: Path, embedder) -> Workspace:
    Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    return Workspace(tmp_path / "ws", embedder=embedder)


def run(ws: Workspace, request: str, steps: list[Step]) -> str:
    """One session through the product's session API, extracted offline; its path."""
    with ws.session(request[:30]) as s:
        s.request(request)
        for action, text in steps:
            s.event(action, text)
    assert s.path is not None
    ws.extract(s.path, offline=True)
    return s.path


def memories(ws: Workspace, type_: str | None = None) -> list[str]:
    return [
        e.text
        for f in ("memory.md", "learnings.md")
        for e in ws.entries(f)
        if type_ is None or e.type == type_
    ]


def test_an_error_is_paired_with_the_step_that_fixed_it(agent_ws: Workspace) -> None:
    """Before: the step logged right after the error (a test run, an edit) was taken as the
    fix, not the event that says it fixed it one step later."""
    run(
        agent_ws,
        "Add credit notes in invoices/credit_notes.py.",
        [
            ("error", "alembic upgrade failed: Multiple head revisions are present"),
            ("execute", "Ran pytest tests/test_credit_notes.py: 23 passed"),
            ("fix", "Resolved the multiple heads with alembic merge heads"),
            ("error", "mypy error: Incompatible types in assignment in invoices/numbering.py"),
            ("execute", "Edited invoices/credit_notes.py: split the long function in two"),
            ("execute", "Annotated next_number as int | None; mypy passes now, that fixed it"),
            ("execute", "Ran pytest: 402 passed"),
        ],
    )
    skills = memories(agent_ws, "skill")
    assert len(skills) == 2, skills
    heads = next(s for s in skills if "Multiple head" in s)
    assert "alembic merge heads" in heads and "passed" not in heads
    mypy = next(s for s in skills if "mypy" in s)
    assert "next_number as int | None" in mypy and "split the long function" not in mypy


def test_a_step_after_which_the_error_came_back_is_no_fix(agent_ws: Workspace) -> None:
    run(
        agent_ws,
        "Fix the reminder test.",
        [
            ("error", "test_send_reminder failed: the reminder date is one day off"),
            ("execute", "Edited invoices/reminders.py: renamed the helper"),
            ("error", "test_send_reminder failed: the reminder date is one day off"),
            ("execute", "Edited invoices/scheduler.py: compute reminder dates in UTC"),
            ("execute", "Ran pytest tests/test_reminders.py: 31 passed"),
        ],
    )
    [skill] = memories(agent_ws, "skill")
    assert "in UTC" in skill and "renamed the helper" not in skill


def test_preferences_stated_about_the_user(agent_ws: Workspace) -> None:
    """Before: only "I prefer" in the user's own words counted, so a preference the request
    or the agent states about the user was lost."""
    run(
        agent_ws,
        "Add CSV export in invoices/export/csv.py. The user prefers small pull requests, "
        "under 400 changed lines.",
        [
            ("decision", "User preference: every public function is fully typed"),
            ("execute", "Wrote the tests with pytest fixtures, not setUp, as the user asked"),
            ("decision", "Always use British English in texts customers read"),
        ],
    )
    prefs = memories(agent_ws, "preference")
    assert any("small pull requests, under 400 changed lines" in p for p in prefs), prefs
    assert any("every public function is fully typed" in p for p in prefs), prefs
    assert any("pytest fixtures, not setUp" in p for p in prefs), prefs
    assert any("British English" in p for p in prefs), prefs


def test_environment_facts_from_logged_steps(agent_ws: Workspace) -> None:
    """Before: a fact logged by a step ([execute]) never became a memory; log lines about the
    agent's own work (runs, edits, reads) must still not."""
    run(
        agent_ws,
        "Speed up API pagination in invoices/api/pagination.py.",
        [
            ("execute", "Read invoices/services.py to see how it is called"),
            ("execute", "Checked the server version: production PostgreSQL is 15"),
            ("execute", "GUNICORN_WORKERS is 4 in the production config"),
            ("execute", "Rendered PDFs are stored in the S3 bucket invoices-pdf-prod"),
            ("execute", "The GitHub Actions matrix uses Python 3.11"),
            ("execute", "Edited invoices/api/pagination.py: added a test for the empty case"),
            ("execute", "Ran pytest: 435 passed"),
            ("complete", "Speed up API pagination: done, PR opened"),
        ],
    )
    facts = memories(agent_ws, "fact")
    for wanted in ("PostgreSQL is 15", "GUNICORN_WORKERS is 4", "invoices-pdf-prod", "3.11"):
        assert any(wanted in f for f in facts), (wanted, facts)
    assert len(facts) == 4, facts


def test_decisions_not_worded_decided(agent_ws: Workspace) -> None:
    run(
        agent_ws,
        "Add the data layer.",
        [
            ("decision", "Going with SQLAlchemy 2.0 (async) for all database access"),
            ("thinking", "Rule: never use float for money; integer cents everywhere"),
            ("thinking", "The failing case is an empty list, not a missing key"),
        ],
    )
    facts = memories(agent_ws)
    assert any("SQLAlchemy 2.0" in f for f in facts), facts
    assert any("integer cents everywhere" in f for f in facts), facts
    assert not any("empty list" in f for f in facts), facts


HAND = "- Invoice PDFs from wkhtmltopdf are checked by eye before a release\n"
"""A person's fact that names the old choice: never superseded automatically."""


def test_a_reversal_supersedes_the_old_decision(agent_ws: Workspace) -> None:
    """Before: "switched from A to B" was not extracted; once it is, the memories that still
    say A is used are superseded by it (archived with superseded_by), never a hand-written
    one."""
    run(
        agent_ws,
        "Add PDF export.",
        [
            ("decision", "We decided to render invoice PDFs with wkhtmltopdf"),
            ("decision", "Invoice PDF rendering uses wkhtmltopdf"),
            ("decision", "We decided to use Celery with Redis for background jobs"),
        ],
    )
    memory = agent_ws.root / "memory.md"  # a person adds a fact, and edits a written one
    text = memory.read_text().replace("## Facts\n\n", "## Facts\n\n" + HAND)
    memory.write_text(
        text.replace("Invoice PDF rendering uses", "Invoice PDF rendering still uses")
    )
    run(
        agent_ws,
        "Fix the PDF layout.",
        [("decision", "We switched PDF rendering from wkhtmltopdf to WeasyPrint")],
    )
    active = memories(agent_ws)
    assert any("from wkhtmltopdf to WeasyPrint" in t for t in active), active
    assert not any("render invoice PDFs with wkhtmltopdf" in t for t in active), active
    assert "Invoice PDF rendering still uses wkhtmltopdf" in active  # edited by hand: kept
    assert any("Celery" in t for t in active)  # another decision: untouched
    new = next(e for e in agent_ws.entries("memory.md") if "WeasyPrint" in e.text)
    archived = [e for e in agent_ws.entries("memory.md", include_archived=True) if e.archived]
    assert {e.meta.get("superseded_by") for e in archived} == {new.id}
    assert [e.text for e in archived] == [
        "The team decided to render invoice PDFs with wkhtmltopdf"
    ]
    assert HAND[2:].strip() in active and HAND in memory.read_text()  # hand-written: untouched


def test_re_extracting_changes_nothing(agent_ws: Workspace) -> None:
    """Extracting the same sessions again, in any order, adds, archives and brings back
    nothing (before: an old session re-extracted brought back what a later one superseded)."""
    first = run(
        agent_ws,
        "Deploy.",
        [
            ("decision", "We decided to render invoice PDFs with wkhtmltopdf"),
            ("execute", "The staging database listens on port 5432"),
            ("error", "Deploy failed: health check on /healthz timed out"),
            ("fix", "Fixed by raising the health check grace period to 30 seconds in fly.toml"),
        ],
    )
    second = run(
        agent_ws,
        "Move staging.",
        [
            ("decision", "We switched PDF rendering from wkhtmltopdf to WeasyPrint"),
            ("execute", "The staging database listens on port 6543 now"),
        ],
    )
    files = ("memory.md", "learnings.md")
    before = {f: (agent_ws.root / f).read_text() for f in files}
    active = memories(agent_ws)
    assert not any("5432" in t or "render invoice PDFs with" in t for t in active), active
    for path in (first, second, first):
        report = agent_ws.extract(path, offline=True)
        assert {c.action for c in report.changes} <= {"skip"}, report.changes
    assert {f: (agent_ws.root / f).read_text() for f in files} == before


def test_re_extracting_after_consolidation_brings_back_no_original(agent_ws: Workspace) -> None:
    """Before: the originals consolidation merged (archived with consolidated_into) came back
    when their session was extracted again, beside the merged memory."""
    deploys = [
        "The deploy target is Fly.io in region ams",
        "Deploys go to Fly.io, region ams",
        "Production deploys go to Fly.io in the ams region",
    ]
    path = run(agent_ws, "Deploy.", [("execute", text) for text in deploys])
    memory = agent_ws.root / "memory.md"
    old = (dt.date.today() - dt.timedelta(days=200)).isoformat()
    memory.write_text(re.sub(r"created=\S+", f"created={old}", memory.read_text()))
    agent_ws.index._backend.bump_access([e.id for e in agent_ws.entries("memory.md")])
    assert agent_ws.lifecycle.consolidate(offline=True).count("merged") == 1
    before = memory.read_text()
    report = agent_ws.extract(path, offline=True)
    assert {c.action for c in report.changes} <= {"skip"}, report.changes
    assert memory.read_text() == before
