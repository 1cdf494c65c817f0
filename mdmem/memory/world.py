"""world_state.md: facts about the environment, one ``- **key**: value`` bullet each.

Sections group them (``## Environment``, ``## Repository`` …). Keys match case-insensitively;
a plain ``- key: value`` bullet written by hand counts too. A fact's value is the rest of the
bullet's first line plus its continuation lines that are not list items; a list nested in the
bullet (a person's notes) is not part of the value. Setting a key rewrites only the value's
lines, keeping the key as written (bold or plain, its spelling), the metadata comment and any
nested bullets byte for byte; removing one moves the whole bullet to ``## Archive``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

from mdmem.errors import EditNotApplicable
from mdmem.markdown import edits
from mdmem.markdown.entries import ARCHIVE_TITLE, Entry, find_meta
from mdmem.markdown.parse import Document, parse_document
from mdmem.memory.task import ItemPart, item_parts, own_text
from mdmem.text import one_line
from mdmem.writes.safe_writer import EditFile

WORLD_FILE = "world_state.md"
DEFAULT_SECTION = "Environment"
_FACT = re.compile(
    r"^(?:\*\*(?P<bold>[^*\n]+?)\*\*\s*:|(?P<plain>[^:\n*`]{1,60}?)\s*:)\s*(?P<value>.*)$", re.S
)
_KEY = re.compile(r"^[^\n:*`<>]{1,60}$")
_LEAD = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?")
_KEY_PART = re.compile(r"^(?:\*\*[^*\n]+?\*\*\s*:|[^:\n*`]{1,60}?\s*:)")


@dataclass(frozen=True)
class WorldFact:
    """One key and value of world_state.md, with its section and line."""

    key: str
    value: str
    section: str
    line: int

    def to_dict(self) -> dict[str, object]:
        return vars(self).copy()


def parse_world(doc: Document) -> list[WorldFact]:
    facts = []
    parts = item_parts(doc)
    for entry in doc.entries:
        fact = _fact(doc, entry, parts)
        if fact is not None:
            facts.append(fact)
    return facts


def _fact(doc: Document, entry: Entry, parts: dict[int, ItemPart]) -> WorldFact | None:
    if entry.archived or entry.kind != "item":
        return None
    part = parts.get(entry.start_line)
    match = _FACT.match(own_text(doc, part) if part else entry.text)
    if match is None:
        return None
    key = (match.group("bold") or match.group("plain") or "").strip()
    # the innermost heading below the file's title (a file of ## sections only has no title)
    above = [h for h in doc.headings if h.line < entry.start_line and h.level > 1]
    section = above[-1].title if above else ""
    return WorldFact(key, match.group("value").strip(), section, entry.start_line)


def key_span(line: str) -> tuple[int, int, int] | None:
    """Where a ``- **key**: value`` (or ``- key: value``) bullet's key is in ``line``: the key's
    start and end, and where its head (``**key**:``) ends; None for any other line. The key is
    structure: the redactor never rewrites it (:mod:`mdmem.memory.structure`)."""
    lead = _LEAD.match(line)
    part = _KEY_PART.match(line[lead.end() :]) if lead else None
    if lead is None or part is None:
        return None
    head = part.group(0)
    inner = head[2 : head.rindex("**")] if head.startswith("**") else head[: head.rindex(":")]
    offset = lead.end() + (2 if head.startswith("**") else 0)
    start = offset + len(inner) - len(inner.lstrip())
    return start, offset + len(inner.rstrip()), lead.end() + part.end()


def check_key(key: str) -> str:
    key = one_line(str(key))
    if not _KEY.match(key):
        raise ValueError(
            f"invalid world key {key!r}: one short line without ':', '*', '`', '<' or '>'"
        )
    return key


def set_fact(text: str, path: str, key: str, value: str, section: str | None) -> str:
    doc = parse_document(path, text)
    value = edits.check_text(value)
    if "\n" in value:
        # a second line could read as a heading or a bullet of its own and change the file's
        # structure; a fact is one line (notes go in bullets under it, by hand)
        raise ValueError(f"world facts are one line each; {key!r} got {value.count(chr(10)) + 1}")
    found = _find(doc, key)
    if found is not None:
        return _rewrite_value(doc, found[0], value)
    title = section or _first_section(doc) or DEFAULT_SECTION
    block = "- " + _render(key, value, doc.newline, "  ") + doc.newline
    return edits.insert_entry(doc, "world", title, block)


def remove_fact(text: str, path: str, key: str) -> str:
    doc = parse_document(path, text)
    found = _find(doc, key)
    if found is None:
        raise KeyError(key)
    entry, _ = found
    stamp = {"archived": dt.date.today().isoformat()}
    return edits.archive_entry(text, path, entry.id, stamp)


def _rewrite_value(doc: Document, entry: Entry, value: str) -> str:
    """Replace the value's lines of ``entry``'s bullet; every other byte stays as it was."""
    lines = doc.lines
    part = item_parts(doc).get(entry.start_line)
    end = part.own_end if part else entry.end_line
    while end > entry.start_line and not lines[end - 1].strip():
        end -= 1  # blank lines before a nested list stay
    first = lines[entry.start_line - 1].rstrip("\r\n")
    comment = ""
    if meta := find_meta(first):
        comment = " " + meta.group(0).strip()
        first = first[: meta.start()] + first[meta.end() :]
    lead = _LEAD.match(first)
    key_part = _KEY_PART.match(first[lead.end() :]) if lead else None
    if lead is None or key_part is None:  # _fact matched this bullet: cannot happen
        raise EditNotApplicable(f"{doc.path}:{entry.start_line}: not a key: value bullet")
    head = first[: lead.end() + key_part.end()]
    after = first[len(head) :]
    space = after[: len(after) - len(after.lstrip(" \t"))] or " "
    marker = re.match(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+", first)
    pad = " " * len(marker.group(0).expandtabs(4)) if marker else "  "
    top, *rest = value.split("\n")
    out = [head + space + top + comment] + [pad + line if line.strip() else "" for line in rest]
    last = lines[end - 1]
    ending = last[len(last.rstrip("\r\n")) :]
    lines[entry.start_line - 1 : end] = [doc.newline.join(out) + ending]
    return "".join(lines)


def _render(key: str, value: str, newline: str, pad: str) -> str:
    first, *rest = value.split("\n")
    out = [f"**{key}**: {first}"] + [pad + line if line.strip() else "" for line in rest]
    return newline.join(out)


def _find(doc: Document, key: str) -> tuple[Entry, WorldFact] | None:
    wanted = key.casefold()
    parts = item_parts(doc)
    for entry in doc.entries:
        fact = _fact(doc, entry, parts)
        if fact is not None and fact.key.casefold() == wanted:
            return entry, fact
    return None


def _first_section(doc: Document) -> str | None:
    for heading in doc.headings:
        if heading.level == 2 and heading.title.strip().lower() != ARCHIVE_TITLE.lower():
            return heading.title.strip()
    return None


class World:
    """``ws.world``: the environment's state, read and written as world_state.md bullets."""

    def __init__(self, read: Callable[[], Document | None], write: EditFile) -> None:
        self._read = read
        self._write = write

    def facts(self) -> list[WorldFact]:
        doc = self._read()
        return parse_world(doc) if doc is not None else []

    def get(self, key: str, default: str | None = None) -> str | None:
        wanted = check_key(key).casefold()
        for fact in self.facts():
            if fact.key.casefold() == wanted:
                return fact.value
        return default

    def set(self, key: str, value: str, section: str | None = None) -> WorldFact:
        """Set ``key`` (rewritten in place if present, else added under ``section``, by
        default the file's first section)."""
        key = check_key(key)
        new = self._write(lambda text: set_fact(text, WORLD_FILE, key, value, section))
        wanted = key.casefold()
        return next(
            f for f in parse_world(parse_document(WORLD_FILE, new)) if f.key.casefold() == wanted
        )

    def remove(self, key: str) -> None:
        """Move ``key``'s bullet to ``## Archive`` (nothing is deleted). KeyError if absent."""
        key = check_key(key)
        self._write(lambda text: remove_fact(text, WORLD_FILE, key))

    def as_dict(self) -> dict[str, str]:
        return {fact.key: fact.value for fact in self.facts()}
