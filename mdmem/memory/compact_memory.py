"""A compact memory as a file a person shares with the program.

The program owns only the bullets directly under the State and Key Events headings; everything
else in the file (frontmatter, a preamble, notes, sub-sections, fences, comments) is a person's
and stays byte for byte. Replaced state lines and key events past the cap move to ``## Archive``
instead of disappearing. The same rules serve ``.compact_memory.md`` (level-2 sections) and a
session's ``## Summary`` (level-3 sections inside it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from mdmem.distill.compact import (
    EVENTS_HEADING,
    STATE_HEADING,
    CompactMemory,
    KeyEvent,
    parse_compact,
)
from mdmem.markdown import edits
from mdmem.markdown.entries import ARCHIVE_TITLE, Entry
from mdmem.markdown.parse import Document, Heading, parse_document
from mdmem.text import one_line


@dataclass(frozen=True)
class _Owned:
    heading: Heading | None
    items: tuple[Entry, ...]


def read_memory(text: str, level: int = 2) -> CompactMemory:
    """What the program owns in ``text``: the State and Key Events bullets."""
    doc = parse_document("compact.md", text)
    state = _owned(doc, STATE_HEADING, level)
    events = _owned(doc, EVENTS_HEADING, level)
    bullets = "\n".join(f"- {one_line(e.text)}" for e in events.items)
    return CompactMemory(
        state=tuple(one_line(e.text) for e in state.items),
        events=parse_compact(f"## Key Events\n{bullets}\n").events,
    )


def write_memory(
    text: str,
    memory: CompactMemory,
    *,
    max_events: int,
    today: str,
    level: int = 2,
    title: str = "Compact Memory",
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
    text = _replace_items(
        text, STATE_HEADING, level, [f"- {one_line(s)}" for s in memory.state], f"{hashes} State"
    )
    lines = [replace(e, text=one_line(e.text)).render() for e in events]
    text = _replace_items(text, EVENTS_HEADING, level, lines, f"{hashes} Key Events")
    kept = set(memory.state)
    gone = [f"- (state until {today}) {one_line(s)}" for s in before.state if s not in kept]
    gone += [replace(e, text=one_line(e.text)).render() for e in overflow]
    if gone:
        doc = parse_document("compact.md", text)
        block = doc.newline.join(gone) + doc.newline
        text = _append_under(doc, ARCHIVE_TITLE, level, block)
    return text


def _owned(doc: Document, words: re.Pattern[str], level: int) -> _Owned:
    candidates = [
        h
        for h in doc.headings
        if h.level == level
        and words.search(h.title)
        and h.title.strip().lower() != ARCHIVE_TITLE.lower()
    ]
    # "State" / "Key Events" as written by mdmem first, then any heading naming them
    exact = [h for h in candidates if h.title.strip().lower() in ("state", "key events")]
    heading = (exact or candidates or [None])[0]
    if heading is None:
        return _Owned(None, ())
    items = tuple(
        e
        for e in doc.entries
        if e.kind == "item"
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
        return text + sep + heading_text + newline + newline + block
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
