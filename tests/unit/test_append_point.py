"""Appending events after a parse the writer already has (issue 41: a Stop hook on a long
session parsed its file three times to append two messages).

``edits.append_point`` says where ``insert_entry`` would put a ``- `` item with nothing added
around it; a :class:`Session` resumed from a parse appends there without parsing again. Both
must give exactly the text of the slow path (``insert_entry`` / a session that parses), on
every shape a person may leave a session file in: that is what these properties check."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from mdmem.markdown.edits import append_point, insert_entry
from mdmem.markdown.parse import parse_document
from mdmem.memory.session_writer import Session

HEAD = "---\nagent: a\nstarted: 2026-03-01T08:00:00\nstatus: running\n---\n# Session: t\n\n"
PIECES = [
    "- 08:00:01 [user] hello <!-- mdmem importance=0.5 -->\n",
    "- 08:00:02 [assistant] two\n  lines <!-- mdmem importance=0.5 -->\n",
    "* 08:00:03 [user] a star bullet\n",
    "  - 08:00:04 [user] a nested item\n",
    "1. an ordered item\n",
    "A paragraph a person wrote.\n",
    "\n",
    "\n",
    "### A subsection\n",
    "<!-- a comment -->\n",
    "- no final newline",
]
AFTER = [
    "",
    "## Response\n",
    "\n## Response\n\nSome text.\n",
    "## Metadata\n- k: v\n",
    "## Archive\n",
]


@st.composite
def session_texts(draw: st.DrawFn) -> str:
    """A session file: its ``## Events`` section made of arbitrary pieces, maybe a section
    after it, LF or CRLF."""
    body = draw(st.lists(st.sampled_from(PIECES), max_size=8))
    body = [p for i, p in enumerate(body) if "\n" in p or i == len(body) - 1]
    after = draw(st.sampled_from(AFTER))
    text = HEAD + "## Request\n\n## Events\n\n" + "".join(body)
    if after:
        text += ("" if text.endswith("\n") else "\n") + after
    return text.replace("\n", "\r\n") if draw(st.booleans()) else text


BLOCK = "- 09:00:00 [user] new <!-- mdmem importance=0.5 -->\n"


@given(session_texts())
def test_append_point_is_where_insert_entry_puts_the_item(text: str) -> None:
    doc = parse_document(".sessions/s.md", text)
    block = BLOCK.replace("\n", doc.newline)
    at = append_point(doc, "Events")
    if at is not None:
        assert text[:at] + block + text[at:] == insert_entry(doc, "event", "Events", block)


def test_append_point_is_found_in_a_session_as_mdmem_writes_it() -> None:
    """(The property above would hold vacuously if it were always None.)"""
    for after in ("", "\n## Response\n\n## Metadata\n"):
        text = HEAD + "## Events\n\n" + PIECES[0] + PIECES[1] + after
        at = append_point(parse_document("s.md", text), "Events")
        assert at == len(HEAD + "## Events\n\n" + PIECES[0] + PIECES[1])
    for odd in ("\n" + PIECES[5], PIECES[2], PIECES[10], "### Sub\n"):  # each needs the slow path
        text = HEAD + "## Events\n\n" + PIECES[0] + odd
        assert append_point(parse_document("s.md", text), "Events") is None


def record(text: str, events: list[str], resumed: bool) -> str:
    """``events`` recorded by a Session into ``text``, as an import writes them (in memory)."""
    buffer = [text]

    def write(edit):  # type: ignore[no-untyped-def]
        buffer[0] = edit(buffer[0])
        return buffer[0]

    clock = dt.datetime(2026, 3, 1, 9, 0, 0)
    session = Session(
        "s", "t", "a", path=".sessions/s.md", write=write, started=clock, clock=lambda: clock
    )
    if resumed:
        session.resume(parse_document(".sessions/s.md", text))
    for n, event in enumerate(events):
        session.event("user" if n % 2 else "assistant", event)
    session.close("completed")
    return buffer[0]


@given(session_texts(), st.lists(st.sampled_from(["one", "two\nlines", "x" * 30]), max_size=4))
def test_a_resumed_session_writes_what_a_parsing_one_writes(text: str, events: list[str]) -> None:
    assert record(text, events, resumed=True) == record(text, events, resumed=False)
