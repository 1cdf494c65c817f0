"""world_state.md: facts about the environment, one ``- **key**: value`` bullet each.

Sections group them (``## Environment``, ``## Repository`` …). Keys match case-insensitively;
a plain ``- key: value`` bullet written by hand counts too. Setting a key rewrites only that
bullet; removing one moves it to ``## Archive``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

from mdmem import edits
from mdmem.entries import ARCHIVE_TITLE, Entry
from mdmem.markdown import Document, parse_document

WORLD_FILE = "world_state.md"
DEFAULT_SECTION = "Environment"
_FACT = re.compile(
    r"^(?:\*\*(?P<bold>[^*\n]+?)\*\*\s*:|(?P<plain>[^:\n*`]{1,60}?)\s*:)\s*(?P<value>.*)$", re.S
)
_KEY = re.compile(r"^[^\n:*`<>]{1,60}$")


@dataclass(frozen=True)
class WorldFact:
    key: str
    value: str
    section: str
    line: int

    def to_dict(self) -> dict[str, object]:
        return vars(self).copy()


def parse_world(doc: Document) -> list[WorldFact]:
    facts = []
    for entry in doc.entries:
        fact = _fact(entry)
        if fact is not None:
            facts.append(fact)
    return facts


def _fact(entry: Entry) -> WorldFact | None:
    if entry.archived or entry.kind != "item":
        return None
    match = _FACT.match(entry.text)
    if match is None:
        return None
    key = (match.group("bold") or match.group("plain") or "").strip()
    section = entry.heading_path[-1] if len(entry.heading_path) > 1 else ""
    return WorldFact(key, match.group("value").strip(), section, entry.start_line)


def check_key(key: str) -> str:
    key = " ".join(str(key).split())
    if not _KEY.match(key):
        raise ValueError(
            f"invalid world key {key!r}: one short line without ':', '*', '`', '<' or '>'"
        )
    return key


def set_fact(text: str, path: str, key: str, value: str, section: str | None) -> str:
    doc = parse_document(path, text)
    value = edits.check_text(value)
    found = _find(doc, key)
    if found is not None:
        entry, fact = found
        lines = doc.lines
        first = lines[entry.start_line - 1]
        marker = re.match(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+", first)
        lead = marker.group(0) if marker else "- "
        ending = lines[entry.end_line - 1][len(lines[entry.end_line - 1].rstrip("\r\n")) :]
        body = _render(fact.key, value, doc.newline, " " * len(lead))
        lines[entry.start_line - 1 : entry.end_line] = [lead + body + (ending or "")]
        return "".join(lines)
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


def _render(key: str, value: str, newline: str, pad: str) -> str:
    first, *rest = value.split("\n")
    out = [f"**{key}**: {first}"] + [pad + line if line.strip() else "" for line in rest]
    return newline.join(out)


def _find(doc: Document, key: str) -> tuple[Entry, WorldFact] | None:
    wanted = key.casefold()
    for entry in doc.entries:
        fact = _fact(entry)
        if fact is not None and fact.key.casefold() == wanted:
            return entry, fact
    return None


def _first_section(doc: Document) -> str | None:
    for heading in doc.headings:
        if heading.level == 2 and heading.title.strip().lower() != ARCHIVE_TITLE.lower():
            return heading.title.strip()
    return None


Writer = Callable[[Callable[[str], str]], str]


class World:
    """``ws.world``: the environment's state, read and written as world_state.md bullets."""

    def __init__(self, read: Callable[[], Document | None], write: Writer) -> None:
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
