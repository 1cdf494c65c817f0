"""An import that appends to a session file it wrote takes where the new turns go (and the
session's record) from what it remembered of the text it wrote (mdmem/integrations/importers/
append_points.py) instead of parsing the file (issue 41: a Stop on a session of 2,400 records
spent ~280 ms parsing it), and reads the log on from where it stopped last time
(mdmem/integrations/importers/log_resume.py) instead of reading every record again. It must
write and report exactly what an import that parses the file and reads the whole log does.

Two workspaces import the same Claude Code log step by step: one as a hook does (both memories
kept between imports), the other with them removed before each import (the parse and the whole
read, as before). After every step their session files are byte for byte the same, but for the
``imported:`` id (each workspace numbers its own imports by the second), their reports are the
same, and whenever the memory of the session file would be used, it holds what a parse of the
file finds. Claude Code appends records (a title, a bad line, a record half written and
finished later among them), rewrites or truncates its log."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from mdmem import Workspace
from mdmem.integrations.importers import ImportReport, append_points, import_path, log_resume
from mdmem.markdown import edits
from mdmem.markdown.parse import parse_document
from mdmem.memory.session_format import parse_session

SESSION = "5e55a0f0-0000-4000-8000-00000000a11e"
TEXT = st.lists(
    st.sampled_from([*"ab #`<>-*_~=[]:!\n\t", "é", "<!--", "-->", "```", "word"]),
    min_size=1,
    max_size=30,
).map("".join)
TOOLS = st.sampled_from(["Bash", "Read", "yes", "0x1f", "mcp__x__y", "Edit"])


@st.composite
def records(draw: Any) -> dict[str, Any]:
    """One record's content (the rest is filled in by its position): a user's or assistant's
    message, mostly; a title (Claude Code's summary line), a side conversation's message, a
    meta record, a line that is not JSON."""
    kinds = ["user", "assistant", "tool", "thinking", "result", "title", "side", "meta", "bad"]
    kind = draw(st.sampled_from(kinds))
    text = draw(TEXT)
    if kind in ("title", "bad"):
        return {"type": kind, "content": text, "leaf": draw(st.integers(0, 12))}
    if kind == "side":
        return {"type": "user", "content": text, "isSidechain": True}
    if kind == "meta":
        return {"type": "user", "content": text, "isMeta": True}
    if kind == "user":
        return {"type": "user", "content": text}
    if kind == "assistant":
        return {"type": "assistant", "content": [{"type": "text", "text": text}]}
    if kind == "thinking":
        return {"type": "assistant", "content": [{"type": "thinking", "thinking": text}]}
    if kind == "tool":
        block = {"type": "tool_use", "id": "t1", "name": draw(TOOLS), "input": {"q": text}}
        return {"type": "assistant", "content": [block]}
    block = {"type": "tool_result", "tool_use_id": "t1", "content": text}
    return {"type": "user", "content": [block]}


def line(n: int, record: dict[str, Any]) -> str:
    kind = record["type"]
    if kind == "bad":
        return "{not json " + json.dumps(record["content"]) + "\n"
    if kind == "title":
        summary = {
            "type": "summary",
            "summary": record["content"],
            "leafUuid": f"u-{record['leaf']}",
        }
        return json.dumps(summary) + "\n"
    return json.dumps({
        "sessionId": SESSION, "isSidechain": record.get("isSidechain", False), "type": kind,
        "uuid": f"u-{n}", "parentUuid": f"u-{n - 1}", "isMeta": record.get("isMeta", False),
        "timestamp": f"2026-03-01T08:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "message": {"role": kind, "content": record["content"]},
    }) + "\n"  # fmt: skip


def stop(root: Path, log: Path, *, remember: bool) -> ImportReport:
    """One Stop's import, in a workspace opened and closed as a hook process does."""
    if not remember:
        (root / ".mdmem" / append_points.STATE_FILE).unlink(missing_ok=True)
        (root / ".mdmem" / log_resume.STATE_FILE).unlink(missing_ok=True)
    ws = Workspace.open(root)
    try:
        return import_path(ws, log, "claude-code", agent="claude-code")
    finally:
        ws.close()


def sessions(root: Path) -> dict[str, str]:
    """Each session file's text, the import's id masked (each workspace numbers its own)."""
    return {
        p.name: re.sub(r"(?m)^imported: .*$", "imported: …", p.read_text(encoding="utf-8"))
        for p in sorted((root / ".sessions").glob("*.md"))
    }


def check_memory(root: Path) -> bool:
    """Whenever the remembered point would be used, it is what a parse finds; True if it would
    be used for a session file now."""
    used = False
    for path in (root / ".sessions").glob("*.md"):
        rel = f".sessions/{path.name}"
        text = path.read_text(encoding="utf-8")
        point = append_points.recall(root / ".mdmem", rel, text)
        if point is None:
            continue
        used = True
        doc = parse_document(rel, text)
        record = parse_session(doc)
        assert point.offset == edits.append_point(doc, "Events")
        assert (point.title, point.agent, point.started) == (
            record.title,
            record.agent,
            record.started,
        )
        assert (point.rounds, point.tools) == (record.rounds, record.tools)
    return used


def check_log_memory(root: Path, log: Path) -> bool:
    """Whenever the log's remembered point would be used, the read from it gives what a read
    of the whole log gives: the same conversation from the skipped turns on (its title, its
    digests, where it starts), the same bad records, the same point to remember; True if it
    would be used now."""
    on: list[Any] = []
    whole: list[Any] = []
    read = log_resume.read(log, root / ".mdmem", on.append)
    if not read.resumed:
        return False
    full = log_resume.read(log, root / ".mdmem", whole.append, fresh=True)
    assert on == whole
    assert read.state == full.state
    conv, all_ = read.conversation, full.conversation
    assert conv is not None and all_ is not None
    assert (conv.source, conv.id, conv.title, conv.where, conv.count, conv.start) == (
        all_.source, all_.id, all_.title, all_.where, all_.count, all_.start
    )  # fmt: skip
    assert conv.turns == all_.turns[conv.skipped :]
    assert conv.chain(conv.count) == all_.chain(all_.count)
    assert conv.digest(conv.skipped) == all_.digest(conv.skipped)
    return True


class Twins:
    """The two workspaces and the log they import."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="mdmem-append-points-"))
        kept = Workspace.init(self.tmp / "kept", mode="full", agent="coder")
        kept.close()
        shutil.copytree(self.tmp / "kept", self.tmp / "parsed")
        self.kept, self.parsed = self.tmp / "kept", self.tmp / "parsed"
        self.log = self.tmp / f"{SESSION}.jsonl"
        self.lines: list[str] = []
        self.partial = ""
        """A record being written: the start of a line, no end yet."""
        self.next = 0
        self.write()

    def append(self, items: list[dict[str, Any]]) -> None:
        for record in items:
            self.lines.append(line(self.next, record))
            self.next += 1
        self.write()

    def write(self) -> None:
        self.log.write_text("".join(self.lines) + self.partial, encoding="utf-8")

    def start_writing(self, record: dict[str, Any], cut: int) -> None:
        """Claude Code is writing a record: its first ``cut`` characters are in the log."""
        whole = line(self.next, record)
        self.partial = whole[: min(cut, len(whole) - 1)]
        self.pending = whole

    def finish_writing(self) -> None:
        self.lines.append(self.pending)
        self.next += 1
        self.partial = ""
        self.write()

    def stop(self) -> None:
        kept = stop(self.kept, self.log, remember=True)
        parsed = stop(self.parsed, self.log, remember=False)
        assert kept.outcomes == parsed.outcomes
        assert kept.problems == parsed.problems

    def edit_both(self, edit: Any) -> None:
        for root in (self.kept, self.parsed):
            for path in (root / ".sessions").glob("*.md"):
                path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")

    def same(self) -> bool:
        assert sessions(self.kept) == sessions(self.parsed)
        check_log_memory(self.kept, self.log)
        return check_memory(self.kept)


HAND_EDITS = {
    "a line at the end": lambda t: t + "\nA note by hand.\n",
    "an event by hand": lambda t: t.replace("## Events\n\n", "## Events\n\n- by hand\n", 1),
    "a frontmatter key": lambda t: t.replace("---\n", "---\nnote: mine\n", 1),
    "the title": lambda t: t.replace("# Session: ", "# Session: renamed ", 1),
    "the Events heading gone": lambda t: t.replace("## Events", "## Happenings", 1),
}


class AppendPointsModel(RuleBasedStateMachine):
    """Actors: Claude Code appending to its log (and, rarely, rewriting or truncating it), the
    Stop hook importing it, a person editing the session file between Stops."""

    def __init__(self) -> None:
        super().__init__()
        self.twins = Twins()

    @precondition(lambda self: not self.twins.partial)
    @rule(items=st.lists(records(), min_size=1, max_size=4))
    def claude_code_appends(self, items: list[dict[str, Any]]) -> None:
        self.twins.append(items)

    @precondition(lambda self: not self.twins.partial)
    @rule(record=records(), cut=st.integers(1, 200))
    def claude_code_starts_writing_a_record(self, record: dict[str, Any], cut: int) -> None:
        self.twins.start_writing(record, cut)
        self.twins.write()

    @precondition(lambda self: self.twins.partial)
    @rule()
    def claude_code_finishes_the_record(self) -> None:
        self.twins.finish_writing()

    @precondition(lambda self: self.twins.lines)
    @rule(data=st.data())
    def the_log_is_rewritten(self, data: Any) -> None:
        n = data.draw(st.integers(0, len(self.twins.lines) - 1))
        self.twins.lines[n] = line(n, data.draw(records()))
        self.twins.write()

    @precondition(lambda self: self.twins.lines)
    @rule(data=st.data())
    def the_log_is_truncated(self, data: Any) -> None:
        keep = data.draw(st.integers(0, len(self.twins.lines) - 1))
        del self.twins.lines[keep:]
        self.twins.partial = ""
        self.twins.write()

    @rule()
    def stop(self) -> None:
        self.twins.stop()

    @rule(what=st.sampled_from(sorted(HAND_EDITS)))
    def a_person_edits_the_session(self, what: str) -> None:
        self.twins.edit_both(HAND_EDITS[what])

    @invariant()
    def the_same_files(self) -> None:
        self.twins.same()

    def teardown(self) -> None:
        shutil.rmtree(self.twins.tmp, ignore_errors=True)


TestAppendPointsModel = AppendPointsModel.TestCase
TestAppendPointsModel.settings = settings(
    settings.default,
    # each step imports into two workspaces (two writes, two journals): bounded so that the ci
    # profile's run stays near half a minute on a 2-core machine; `deep`
    # (HYPOTHESIS_PROFILE=deep) runs 2000 examples of 50 steps
    max_examples=min(settings.default.max_examples, 40)
    if settings.default.max_examples <= 100
    else settings.default.max_examples,
    stateful_step_count=20 if settings.default.max_examples <= 100 else 50,
)


def _twins_after_stops(*batches: list[dict[str, Any]]) -> Twins:
    twins = Twins()
    for batch in batches:
        twins.append(batch)
        twins.stop()
        twins.same()
    return twins


USER = {"type": "user", "content": "fix the login test"}
ANSWER = {"type": "assistant", "content": [{"type": "text", "text": "# done, see `x`"}]}
TOOL = {
    "type": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"q": "ls"}}],
}


def test_a_stop_after_a_stop_uses_what_the_last_one_wrote() -> None:
    """Created, appended (parsed: remembered), appended again from the memory: the same bytes
    as the parse's, and the memory is there to be used."""
    twins = _twins_after_stops([USER, ANSWER], [TOOL, USER], [ANSWER, TOOL])
    twins.append([USER])
    assert twins.same()  # (the next Stop would use it)
    assert check_log_memory(twins.kept, twins.log)  # (and read only the new record)
    twins.stop()
    assert twins.same()
    shutil.rmtree(twins.tmp)


def test_a_hand_edit_between_stops_makes_the_next_one_parse() -> None:
    for edit in HAND_EDITS.values():
        twins = _twins_after_stops([USER, ANSWER], [TOOL, USER])
        twins.edit_both(edit)
        assert not check_memory(twins.kept)  # another text: not used
        twins.append([ANSWER, USER])
        twins.stop()
        twins.same()
        twins.append([TOOL])
        twins.stop()
        twins.same()
        shutil.rmtree(twins.tmp)


def test_a_truncated_or_rewritten_log_writes_what_a_parse_writes() -> None:
    twins = _twins_after_stops([USER, ANSWER], [TOOL, USER], [ANSWER])
    del twins.lines[-2:]
    twins.write()
    twins.stop()
    twins.same()
    twins.lines[0] = line(0, {"type": "user", "content": "another start"})
    twins.write()
    twins.stop()
    twins.same()
    twins.append([USER, ANSWER])
    twins.stop()
    twins.same()
    shutil.rmtree(twins.tmp)


def test_an_earlier_record_rewritten_in_place_is_seen_and_the_log_read_whole() -> None:
    """A record before the remembered point changed to one of the same length (the log's size
    and its last records as they were): the digest of the bytes read before tells, the whole
    log is read, and the import says what a whole read says (the session is left alone)."""
    twins = _twins_after_stops([USER, ANSWER], [TOOL, USER])
    assert twins.lines[0].count("fix") == 1
    twins.lines[0] = twins.lines[0].replace("fix", "fax")
    twins.write()
    assert not check_log_memory(twins.kept, twins.log)
    twins.append([ANSWER])
    twins.stop()  # (the reports compared: 'changed', as a whole read finds)
    twins.same()
    shutil.rmtree(twins.tmp)


def test_a_record_half_written_at_a_stop_is_read_again_once_finished() -> None:
    twins = _twins_after_stops([USER, ANSWER])
    twins.start_writing(TOOL, 40)
    twins.write()
    twins.stop()  # (the half record: a bad line, reported as a whole read reports it)
    twins.same()
    assert not check_log_memory(twins.kept, twins.log)  # (nothing kept on half a line)
    twins.finish_writing()
    twins.stop()
    twins.same()
    twins.append([USER])
    assert check_log_memory(twins.kept, twins.log)
    twins.stop()
    twins.same()
    shutil.rmtree(twins.tmp)


def test_titles_and_bad_lines_before_the_point_count_as_in_a_whole_read() -> None:
    """The title comes from a summary line or the first user message read before the point
    (read again from its line, never kept as text); bad lines before it are reported again."""
    title = {"type": "title", "content": "Login flake", "leaf": 1}
    bad = {"type": "bad", "content": "x", "leaf": 0}
    twins = _twins_after_stops([bad, USER, ANSWER], [title, TOOL])
    twins.append([USER])
    assert check_log_memory(twins.kept, twins.log)
    twins.stop()
    twins.same()
    state = json.loads((twins.kept / ".mdmem" / log_resume.STATE_FILE).read_text())
    assert "Login flake" not in json.dumps(state) and "fix the login" not in json.dumps(state)
    shutil.rmtree(twins.tmp)


def test_a_session_an_older_import_stamped_gets_the_new_turns() -> None:
    """A session file whose source_digest is the single hash imports wrote before the chain
    (an older mdmem's): the next import appends to it, as before, and stamps the chain."""
    from mdmem.integrations.importers.common import Conversation

    twins = _twins_after_stops([USER, ANSWER])
    for root in (twins.kept, twins.parsed):
        (root / ".mdmem" / log_resume.STATE_FILE).unlink()
        path = next((root / ".sessions").glob("*.md"))
        text = path.read_text(encoding="utf-8")
        read = log_resume.read(twins.log, root / ".mdmem", lambda bad: None, fresh=True)
        conv = read.conversation
        assert isinstance(conv, Conversation)
        old = conv.legacy_digest(2)
        assert old is not None and old != conv.digest(2)
        path.write_text(re.sub(r"source_digest: \w+", f"source_digest: {old}", text))
    twins.append([TOOL, USER])
    twins.stop()
    twins.same()
    text = next((twins.kept / ".sessions").glob("*.md")).read_text(encoding="utf-8")
    assert "source_messages: 4" in text and "fix the login test" in text
    shutil.rmtree(twins.tmp)
