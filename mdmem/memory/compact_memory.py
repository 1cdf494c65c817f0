"""The compact-memory format: its one reader, its one renderer, and the file a person shares
with the program.

A compact memory is a ``State`` list and a ``Key Events`` list::

    # Compact Memory

    ## State
    - Branch feat/invoice-status; 27 tests pass locally

    ## Key Events
    - 2026-11-16 [error→fix] `database "invoice_test" does not exist`; fixed: initdb script

The program owns only the bullets directly under the State and Key Events headings; everything
else in the file (frontmatter, a preamble, notes, sub-sections, fences, comments) is a person's
and stays byte for byte. Replaced state lines and key events past the cap move to ``## Archive``
instead of disappearing. The same rules serve ``.compact_memory.md`` (level-2 sections) and a
session's ``## Summary`` (level-3 sections inside it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mdmem.markdown import edits
from mdmem.markdown.entries import ARCHIVE_TITLE, Entry
from mdmem.markdown.parse import Document, Heading, parse_document
from mdmem.text import one_line

TITLE = "Compact Memory"
STATE_TITLE = "State"
EVENTS_TITLE = "Key Events"
EVENTS_HEADING = re.compile(r"\b(?:events?|history|timeline)\b", re.I)
STATE_HEADING = re.compile(r"\b(?:state|status)\b", re.I)
"""Headings of a compact memory's two parts, as whole words ("Estate" and "Prevention"
are a person's own sections)."""
STAMP = re.compile(r"(?m)^<!-- mdmem compacted: .*?-->[ \t]*\n?")
"""The line compaction writes atop a session's summary (replaced on each compaction)."""
_EVENT_LINE = re.compile(
    r"^(?:(?P<date>\d{4}-\d{2}-\d{2})(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\s+)?"
    r"(?:\[(?P<tag>[^\]\n]{1,40})\]\s*)?(?P<text>.*)$",
    re.S,
)


@dataclass(frozen=True)
class KeyEvent:
    """One line of ``## Key Events``: ``- 2026-11-16 [error→fix] text``."""

    date: str | None
    tag: str
    text: str

    def render(self) -> str:
        parts = [self.date, f"[{self.tag}]" if self.tag else "", one_line(self.text)]
        return "- " + " ".join(p for p in parts if p)

    @classmethod
    def parse(cls, text: str) -> KeyEvent:
        match = _EVENT_LINE.match(text)
        assert match is not None  # the pattern matches any string
        return cls(match.group("date"), (match.group("tag") or "").strip(), match.group("text"))


@dataclass(frozen=True)
class CompactMemory:
    """The current state and the key events, in time order."""

    state: tuple[str, ...] = ()
    events: tuple[KeyEvent, ...] = ()

    def render(self) -> str:
        """The memory as a fresh file (what :func:`write_memory` writes into an empty one)."""
        return write_memory("", self, max_events=-1, today="")

    def __bool__(self) -> bool:
        return bool(self.state or self.events)


def without_stamp(body: str) -> str:
    """A session summary's body without compaction's stamp line (replaced on each run)."""
    return STAMP.sub("", body).strip("\n")


def stamp(engine: str, date: str, tokens_before: int, tokens_after: int) -> str:
    """The comment atop a session summary saying which compaction wrote it."""
    return (
        f"<!-- mdmem compacted: engine={engine} date={date} "
        f"tokens={tokens_before}->{tokens_after} -->"
    )


@dataclass(frozen=True)
class _Owned:
    """The heading of a section the program owns and the entries under it."""

    heading: Heading | None
    items: tuple[Entry, ...]


def read_memory(text: str, level: int | None = 2) -> CompactMemory:
    """What the program owns in ``text``: the bullets directly under the State and Key Events
    headings of ``level`` (2 in ``.compact_memory.md``, 3 in a session's summary).

    ``level=None`` reads a model's reply: the headings may be of any level, and plain lines
    under them count as bullets."""
    doc = parse_document("compact.md", STAMP.sub("", text))
    state = _owned(doc, STATE_HEADING, level)
    events = _owned(doc, EVENTS_HEADING, level)
    return CompactMemory(
        state=tuple(t for e in state.items for t in _lines(e, level)),
        events=tuple(KeyEvent.parse(t) for e in events.items for t in _lines(e, level)),
    )


def _lines(entry: Entry, level: int | None) -> list[str]:
    if entry.kind == "item" or level is not None:
        return [one_line(entry.text)] if entry.text.strip() else []
    return [one_line(line) for line in entry.text.splitlines() if line.strip()]


def write_memory(
    text: str,
    memory: CompactMemory,
    *,
    max_events: int,
    today: str,
    level: int = 2,
    title: str = TITLE,
) -> str:
    """``text`` with its State and Key Events bullets replaced by ``memory``'s.

    State lines that were there and are not any more, and the oldest key events past
    ``max_events``, are appended to the Archive (dated) so nothing the file held is lost.
    """
    before = read_memory(text, level)
    events = memory.events
    overflow: tuple[KeyEvent, ...] = ()
    if 0 <= max_events < len(events):
        overflow, events = events[: len(events) - max_events], events[len(events) - max_events :]
    if not text.strip():
        text = f"# {title}\n" if level == 2 else ""
    hashes = "#" * level
    state = [f"- {one_line(s)}" for s in memory.state]
    text = _replace_items(text, STATE_HEADING, level, state, f"{hashes} {STATE_TITLE}")
    lines = [e.render() for e in events]
    text = _replace_items(text, EVENTS_HEADING, level, lines, f"{hashes} {EVENTS_TITLE}")
    kept = set(memory.state)
    gone = [f"- (state until {today}) {one_line(s)}" for s in before.state if s not in kept]
    gone += [e.render() for e in overflow]
    if gone:
        doc = parse_document("compact.md", text)
        block = doc.newline.join(gone) + doc.newline
        text = _append_under(doc, ARCHIVE_TITLE, level, block)
    return text


def _owned(doc: Document, words: re.Pattern[str], level: int | None) -> _Owned:
    candidates = [
        h
        for h in doc.headings
        if (level is None or h.level == level)
        and words.search(h.title)
        and h.title.strip().lower() != ARCHIVE_TITLE.lower()
    ]
    # "State" / "Key Events" as written by mdmem first, then any heading naming them
    exact = [h for h in candidates if h.title.strip().lower() in ("state", "key events")]
    found = exact or candidates
    heading = found[0] if found else None
    if heading is None:
        return _Owned(None, ())
    items = tuple(
        e
        for e in doc.entries
        if (e.kind == "item" or level is None)
        and not e.archived
        and e.start_line > heading.line
        and _direct_heading(doc, e) == heading
    )
    return _Owned(heading, items)


def _direct_heading(doc: Document, entry: Entry) -> Heading | None:
    """The nearest heading above an entry (of any level)."""
    above = [h for h in doc.headings if h.line < entry.start_line]
    return above[-1] if above else None


def _replace_items(
    text: str, words: re.Pattern[str], level: int, bullets: list[str], heading_text: str
) -> str:
    doc = parse_document("compact.md", text)
    owned = _owned(doc, words, level)
    newline = doc.newline
    lines = doc.lines
    # a bullet that stays as it was keeps its own lines (a person's sub-bullets, wrapping)
    raw = {
        f"- {one_line(e.text)}": "".join(lines[e.start_line - 1 : e.end_line]) for e in owned.items
    }
    ended = ("\n", "\r")
    block = "".join(raw[b] if b in raw and raw[b].endswith(ended) else b + newline for b in bullets)
    if owned.heading is None:
        if not bullets:
            return text
        sep = "" if text.endswith(newline * 2) or not text else newline
        if text and not text.endswith(("\n", "\r")):
            sep = newline * 2
        return text + sep + heading_text + newline + block
    if owned.items:
        first, last = owned.items[0].start_line, owned.items[-1].end_line
        # only the program's bullets go; anything between them (a comment, a paragraph) stays
        between = [
            lines[n - 1]
            for n in range(first, last + 1)
            if not any(e.start_line <= n <= e.end_line for e in owned.items)
        ]
        lines[first - 1 : last] = [block, *between]
        return "".join(lines)
    if not bullets:
        return text
    return edits.insert_entry(doc, "compact", owned.heading.title, block)


def _append_under(doc: Document, title: str, level: int, block: str) -> str:
    heading = next(
        (h for h in doc.headings if h.level == level and h.title.strip().lower() == title.lower()),
        None,
    )
    if heading is not None:
        return edits.insert_entry(doc, "archive", heading.title, block)
    text = doc.text
    newline = doc.newline
    sep = newline if text.endswith(newline) else newline * 2
    if text.endswith(newline * 2):
        sep = ""
    return text + sep + f"{'#' * level} {title}{newline}{newline}" + block
