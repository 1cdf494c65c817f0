"""Compaction and extraction through the Workspace: where results land, dedupe, dry runs,
the memory flush, and the LLM engine through a provider registered with litellm."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.memory.compact_memory import read_memory

REPO = Path(__file__).resolve().parents[2]

LLM_COMPACT = """```markdown
# Compact Memory

## State
- CI is red: the "Create test DB" step has no PGPASSWORD

## Key Events
- 2026-11-19 [error→fix] alembic autogenerate missed the enum; fixed with checkfirst=True
```"""
LLM_MEMORIES = json.dumps(
    {
        "memories": [
            {
                "type": "skill",
                "text": "CI steps that run psql need PGPASSWORD in env",
                "importance": 0.8,
            },
            {"type": "preference", "text": "User wants Heroku gone from ci.yml", "importance": 0.6},
        ]
    }
)


def _keyword_only(ws: Workspace, extra: str = "") -> Workspace:
    """Same workspace, no embedding model: dedupe by exact text only (fast tests)."""
    mode = ws.config.mode
    (ws.root / "mdmem.toml").write_text(
        f'mode = "{mode}"\nagent = "coder"\n[embedding]\nmodel = ""\n{extra}'
    )
    return Workspace.open(ws.root)


def _files(ws: Workspace) -> dict[str, bytes]:
    return {
        p.relative_to(ws.root).as_posix(): p.read_bytes()
        for p in ws.root.rglob("*.md")
        if ".mdmem" not in p.parts
    }


def test_extract_writes_attributed_memories_once(example: Workspace) -> None:
    ws = _keyword_only(example)
    report = ws.extract("bootstrap", offline=True)
    added = [c for c in report.changes if c.action == "add"]
    assert added and report.engine == "offline"
    assert report.source == "20261116_091204_bootstrap-invoice-api"
    for change in added:
        entry = ws.get(change.entry_id)
        assert entry.source == report.source and entry.importance == change.importance
        expected = "learnings.md" if change.type == "skill" else "memory.md"
        assert entry.path == expected and entry.type == change.type
    again = ws.extract("bootstrap", offline=True)
    assert again.count("add") == 0 and again.count("skip") == len(report.changes)


def test_dry_run_changes_no_file_and_shows_the_diff(example: Workspace) -> None:
    ws = _keyword_only(example)
    before = _files(ws)
    report = ws.compact("enum-ci", dry_run=True, offline=True)
    assert _files(ws) == before
    assert report.dry_run and report.extraction is not None and report.extraction.dry_run
    assert "would change" in report.extraction.summary()
    assert "+## Summary" in report.diff and "+++ b/memory.md" in report.diff
    extract = ws.extract("enum-ci", dry_run=True, offline=True)
    assert _files(ws) == before and extract.diff.startswith("--- a/")


def test_full_mode_writes_a_summary_section_in_the_session(example: Workspace) -> None:
    ws = _keyword_only(example)
    report = ws.compact("enum-ci", offline=True, flush=False)
    assert report.path == ".sessions/20261119_142210_invoice-status-enum-ci.md"
    assert report.extraction is None
    record = ws.sessions.record("enum-ci")
    assert len(record.events) == 20 and record.status == "failed"  # the session is intact
    assert "<!--" not in record.summary  # the stamp is not part of the summary
    summary = read_memory(record.summary, level=None)
    assert any("invoice_status" in e.text and e.tag == "error→fix" for e in summary.events)
    again = ws.compact("enum-ci", offline=True, flush=False)
    text = (ws.root / again.path).read_text()
    assert text.count("## Summary") == 1  # re-compacting replaces it
    ctx = ws.build_context(budget_tokens=4000)
    assert "Summary:" in ctx.text


def test_minimal_mode_merges_into_the_compact_memory(example: Workspace, tmp_path: Path) -> None:
    example.set_mode("minimal")
    ws = _keyword_only(example)
    bare = tmp_path / "bare"  # the same workspace with no previous compact memory
    shutil.copytree(ws.root, bare)
    (bare / ".compact_memory.md").unlink()
    without = Workspace.open(bare).compact("enum-ci", offline=True, flush=False, dry_run=True)
    old = read_memory((ws.root / ".compact_memory.md").read_text())
    report = ws.compact("enum-ci", offline=True, flush=False)
    assert report.path == ".compact_memory.md"
    new = read_memory((ws.root / ".compact_memory.md").read_text())
    kept = {e.text for e in new.events}
    assert {e.text for e in old.events if e.date != "2026-11-19"} <= kept  # nothing thrown away
    dates = [e.date for e in new.events if e.date]
    assert dates == sorted(dates)  # time order
    # the previous memory counts as input: the same session compacted with none has fewer
    assert report.tokens_before >= without.tokens_before + len(old.events) > len(old.events)
    assert 0 < report.ratio < 1.5


def test_compacting_plain_messages_and_a_jsonl_transcript(ws: Workspace, tmp_path: Path) -> None:
    ws = _keyword_only(ws)
    messages = [
        {"role": "user", "content": "I prefer type hints in all Python code."},
        {"role": "assistant", "content": "Running the tests now."},
        {"role": "tool", "content": "FAILED tests/test_api.py::test_login - KeyError: 'token'"},
        {"role": "assistant", "content": "Fixed app/auth.py: read the token from the header."},
        {"role": "tool", "content": "12 passed in 0.8s"},
    ]
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("\n".join(json.dumps(m) for m in messages) + "\n")
    report = ws.compact(str(transcript), offline=True)
    assert report.path == ".compact_memory.md"  # a transcript is not a session
    memory = read_memory((ws.root / ".compact_memory.md").read_text())
    assert any("KeyError" in e.text for e in memory.events)
    prefs = [e.text for e in ws.entries("memory.md") if e.type == "preference"]
    assert any("type hints" in text for text in prefs)  # flushed before compacting
    assert ws.should_compact(messages) is False
    big = messages * 3000
    assert ws.should_compact(big) is True


def test_bad_transcript_names_the_file_and_line(ws: Workspace, tmp_path: Path) -> None:
    from mdmem.errors import FileProblem

    bad = tmp_path / "t.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{not json\n')
    with pytest.raises(FileProblem) as err:
        ws.compact(str(bad), offline=True)
    assert err.value.line == 2 and "t.jsonl" in str(err.value)


def test_llm_engine_through_litellm(example: Workspace, scripted) -> None:
    ws = _keyword_only(example, '[llm]\nmodel = "scripted/m"\n')
    calls = scripted(LLM_MEMORIES, LLM_COMPACT)
    report = ws.compact("enum-ci")
    assert report.engine == "llm" and report.extraction.engine == "llm"
    assert len(calls) == 2 and all(c[0]["role"] == "system" for c in calls)
    record = ws.sessions.record("enum-ci")
    assert "no PGPASSWORD" in record.summary
    skills = [e.text for e in ws.entries("learnings.md")]
    assert "CI steps that run psql need PGPASSWORD in env" in skills
    assert ws.get(report.extraction.changes[0].entry_id).source == record.id


def test_a_bad_model_reply_is_reported_not_raised(example: Workspace, scripted) -> None:
    ws = _keyword_only(example, '[llm]\nmodel = "scripted/m"\n')
    before = _files(ws)
    scripted("Sure! Here are the memories: [oops", "still {not json")
    report = ws.extract("enum-ci")
    assert report.changes == () and len(report.problems) == 2
    assert _files(ws) == before


def test_auth_error_is_clear(example: Workspace, scripted) -> None:
    from mdmem.distill.llm import LLMError
    from mdmem.tokens import import_litellm

    litellm = import_litellm()
    ws = _keyword_only(example, '[llm]\nmodel = "scripted/m"\n')
    scripted(litellm.AuthenticationError("bad key", llm_provider="scripted", model="m"))
    with pytest.raises(LLMError, match="scripted/m"):
        ws.extract("enum-ci")


@pytest.mark.slow
def test_near_duplicates_are_resolved_with_the_embedding_model(indexed: Workspace) -> None:
    messages = [
        {"role": "user", "content": "My favourite editor is Helix."},
    ]
    first = indexed.extract(messages, offline=True)
    assert first.count("add") == 1
    # the same statement worded a little differently is not a new memory
    second = indexed.extract(
        [{"role": "user", "content": "My favorite editor is Helix!"}], offline=True
    )
    assert second.count("add") == 0
    # a changed value supersedes the old memory; the old one is archived with a pointer
    third = indexed.extract(
        [{"role": "user", "content": "My favourite editor is Zed."}], offline=True
    )
    assert [c.action for c in third.changes] == ["replace"]
    old = indexed.get(first.changes[0].entry_id)
    assert old.archived and old.meta["superseded_by"] == third.changes[0].entry_id
    assert indexed.get(third.changes[0].entry_id).meta["supersedes"] == old.id
    # a broad subject ("Ana is …") is not a conflict: both facts stay
    indexed.remember("Ana is from Porto.", type="fact")
    msg = {"role": "user", "name": "Ana", "content": "I am a nurse at the city hospital."}
    facts = indexed.extract([msg], offline=True)
    assert [(c.action, c.text) for c in facts.changes] == [
        ("add", "Ana is a nurse at the city hospital.")
    ]


@pytest.mark.slow
def test_cli_compact_and_extract(tmp_path: Path) -> None:
    ws = tmp_path / "ex"
    shutil.copytree(REPO / "example_workspace", ws)
    (ws / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    mdmem = str(Path(sys.executable).parent / "mdmem")
    out = subprocess.run(
        [mdmem, "-w", ws, "compact", "enum-ci", "--dry-run"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("--- a/") and "would write" in out.stderr
    out = subprocess.run(
        [mdmem, "-w", ws, "extract", "bootstrap", "--json"], capture_output=True, text=True
    )
    data = json.loads(out.stdout)
    assert data["engine"] == "offline" and data["changes"]
    out = subprocess.run(
        [mdmem, "-w", ws, "compact", "no-such-session"], capture_output=True, text=True
    )
    assert out.returncode == 1 and "no session matching" in out.stderr


def test_compact_memory_keeps_a_persons_sections_and_archives_old_events(
    tmp_path: Path,
) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    (ws.root / "mdmem.toml").write_text(
        'mode = "minimal"\n[embedding]\nmodel = ""\n[compact]\nmax_events = 3\n'
    )
    ws = Workspace.open(ws.root)
    events = "\n".join(f"- 2026-11-0{d} [decision] decision number {d}" for d in range(1, 6))
    (ws.root / ".compact_memory.md").write_text(
        f"# Compact Memory\n\n## State\n- old state\n\n## Key Events\n{events}\n\n"
        "## My notes\nDon't lose this paragraph.\n"
    )
    ws.compact([{"role": "tool", "content": "FAILED test_x - ValueError: bad input"}], offline=True)
    text = (ws.root / ".compact_memory.md").read_text()
    memory = read_memory(text, level=None)
    assert len(memory.events) == 3
    assert "## My notes\nDon't lose this paragraph." in text
    archive = text.split("## Archive", 1)[1]
    assert "decision number 1" in archive and "decision number 2" in archive
    assert "decision number 1" not in text.split("## Archive", 1)[0]
    ws.compact([{"role": "tool", "content": "FAILED test_y - KeyError: 'id'"}], offline=True)
    again = (ws.root / ".compact_memory.md").read_text()
    assert again.count("decision number 1") == 1 and again.count("## Archive") == 1
    assert "decision number 3" in again.split("## Archive", 1)[1]


def test_async_agents_get_the_same_results(example: Workspace) -> None:
    import asyncio

    ws = _keyword_only(example)

    def same(report) -> str:  # new entries get fresh random ids
        return re.sub(r"\bm-[0-9a-f]{10}\b", "m-ID", json.dumps(report.to_dict()))

    def hits(results) -> list[tuple]:  # (the final score moves: each search counts its hits)
        return [(h.path, h.start_line, h.end_line, h.text, h.scores.keyword) for h in results]

    async def turn() -> tuple:
        ctx = await ws.abuild_context("test database port", budget_tokens=500)
        report = await ws.acompact("enum-ci", offline=True, dry_run=True)
        found = await ws.aextract("bootstrap", offline=True, dry_run=True)
        results = await ws.asearch("invoice numbering", k=5)
        return ctx, report, found, results

    ctx, report, found, results = asyncio.run(turn())
    assert ctx == ws.build_context("test database port", budget_tokens=500)  # text and sources
    assert same(report) == same(ws.compact("enum-ci", offline=True, dry_run=True))
    assert same(found) == same(ws.extract("bootstrap", offline=True, dry_run=True))
    assert hits(results) == hits(ws.search("invoice numbering", k=5)) != []
    assert report.path.endswith("enum-ci.md") and report.diff and report.extraction is not None
    assert found.changes and found.diff


PERSONS_COMPACT = """---
owner: ana
---
# Compact Memory

A preamble a person wrote: read me first.

## State
- state one
- state two
<!-- a comment between the bullets -->
- state three

### Caveats
- a person's caveat under State

```text
a fenced block
```

## Key Events
- 2026-11-01 [decision] chose Postgres

## My notes
Don't lose this paragraph.
"""


def _persons_part(text: str) -> str:
    """The text without the bullets compaction owns (directly under ``## State`` and
    ``## Key Events``, outside fences) and without its ``## Archive``: what a person wrote."""
    kept, section, fenced = [], "", False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            section = line[3:].strip()
            if section == "Archive":
                break
        elif not fenced and line.startswith("#"):
            section = "sub-section"
        owned = section in ("State", "Key Events") and line.startswith("- ") and not fenced
        if not owned:
            kept.append(line)
    return "".join(kept)


def test_compaction_keeps_every_byte_a_person_wrote(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    ws = _keyword_only(ws)
    path = ws.root / ".compact_memory.md"
    path.write_text(PERSONS_COMPACT)
    ws.compact(
        [{"role": "tool", "content": "FAILED test_x - ValueError: bad input"}],
        offline=True,
        flush=False,
    )
    text = path.read_text()
    # every byte of the person's, in the same order: frontmatter, preamble, the comment, the
    # sub-section and its bullet, the fence, the notes paragraph
    assert _persons_part(text) == _persons_part(PERSONS_COMPACT)
    assert "a person's caveat" in _persons_part(text) and "a fenced block" in _persons_part(text)
    memory = read_memory(text.split("## Archive")[0], level=None)
    assert any("ValueError" in e.text for e in memory.events)
    assert "- 2026-11-01 [decision] chose Postgres" in text
    # state lines the new state did not replace stay; none is dropped
    for old in ("state one", "state two", "state three"):
        assert f"- {old}\n" in text


def test_a_persons_edit_to_a_session_summary_survives_recompaction(example: Workspace) -> None:
    ws = _keyword_only(example)
    report = ws.compact("enum-ci", offline=True, flush=False)
    path = ws.root / report.path
    text = path.read_text()
    path.write_text(text.replace("### Key Events", "A note on the summary.\n\n### Key Events"))
    ws.compact("enum-ci", offline=True, flush=False)
    again = path.read_text()
    assert "A note on the summary." in again
    assert again.count("## Summary") == 1 and again.count("mdmem compacted:") == 1


def test_skills_land_under_the_matching_topic(example: Workspace) -> None:
    ws = _keyword_only(example)
    report = ws.extract("enum-ci", offline=True)
    skills = [ws.get(c.entry_id) for c in report.changes if c.type == "skill" and c.entry_id]
    assert skills
    assert {s.heading_path[-1] for s in skills} <= {"Testing", "Database", "CI", "Docker"}
    assert any(s.heading_path[-1] == "CI" for s in skills)
    assert "## Skills" not in (ws.root / "learnings.md").read_text()


def test_a_dry_run_does_not_swallow_other_threads_writes(example: Workspace) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    ws = _keyword_only(example)
    inside, release = threading.Event(), threading.Event()

    def dry_run_in_a_worker() -> str:
        from mdmem.memory.knowledge_store import KnowledgeStore
        from mdmem.memory.writers import DryRunWriter

        run = DryRunWriter(ws._w.documents, ws.files._redactor)  # a dry run is a writer, not a mode
        KnowledgeStore(ws._w.documents, run, ws.files._redactor).remember("only in the dry run")
        inside.set()
        release.wait(10)
        return run.diff()

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(dry_run_in_a_worker)
        assert inside.wait(10)
        ws.remember("User likes tea", type="preference")  # a real write meanwhile
        release.set()
        diff = future.result()
    text = (ws.root / "memory.md").read_text()
    assert "User likes tea" in text and "only in the dry run" not in text
    assert "+- only in the dry run" in diff and "tea" not in diff


def test_only_the_stamp_line_is_replaced(example: Workspace) -> None:
    ws = _keyword_only(example)
    report = ws.compact("enum-ci", offline=True, flush=False)
    path = ws.root / report.path
    path.write_text(path.read_text() + "\nSee the mdmem compacted: marker docs.\n")
    ws.compact("enum-ci", offline=True, flush=False)
    text = path.read_text()
    assert "See the mdmem compacted: marker docs." in text
    assert text.count("<!-- mdmem compacted:") == 1


def test_similar_headings_of_a_person_are_not_the_memorys(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "m", mode="minimal"))
    path = ws.root / ".compact_memory.md"
    path.write_text(
        "# Compact Memory\n\n## Statement from the user\n- Never deploy on Fridays\n\n"
        "## Prevention checklist\n- check backups\n\n## State\n- person bullet\n"
        "  - nested person note\n\n## Key Events\n- 2026-11-01 [decision] chose Postgres\n"
    )
    ws.compact([{"role": "tool", "content": "FAILED test_x - ValueError: bad"}], offline=True)
    text = path.read_text()
    assert "## Statement from the user\n- Never deploy on Fridays\n" in text
    assert "## Prevention checklist\n- check backups\n" in text
    assert "- person bullet\n  - nested person note\n" in text  # kept as written
    assert "ValueError" in text.split("## Key Events")[1]
