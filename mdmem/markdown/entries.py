"""Entries, memory types, and the metadata convention.

Metadata the program adds lives in one HTML comment at the end of an entry's first line::

    - User prefers dark mode <!-- mdmem id=m-3f9a2c71d0 type=preference importance=0.8 -->

It is invisible in rendered Markdown, quiet in an editor, and survives a person rewriting the
text before it. Entries with no comment at all are first-class and get defaults.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

MEMORY_TYPES = ("preference", "fact", "pattern", "skill")
"""Types of lasting memory. Other entries are ``event`` (sessions) or ``note``."""

ENTRY_TYPES = (*MEMORY_TYPES, "event", "note")
DEFAULT_IMPORTANCE = 0.5

# Heading words that give their entries a type (innermost matching heading wins).
_HEADING_WORDS: dict[str, tuple[str, ...]] = {
    "preference": ("preference", "preferences", "likes", "dislikes"),
    "fact": ("fact", "facts"),
    "pattern": ("pattern", "patterns"),
    "skill": ("skill", "skills", "learnings", "learning", "how-to", "howto"),
}
SECTION_TITLES = {
    "preference": "Preferences",
    "fact": "Facts",
    "pattern": "Patterns",
    "skill": "Skills",
}
ARCHIVE_TITLE = "Archive"

# The lookbehind keeps a search linear in a line's whitespace (each attempt would otherwise
# rescan the run of spaces before it).
_META_RE = re.compile(r"(?<![ \t])[ \t]*<!--\s*mdmem\b(?P<body>.*?)-->")
_META_OPEN = re.compile(r"(?<![ \t])[ \t]*<!--\s*mdmem\b")
_PAIR_RE = re.compile(r'([A-Za-z_][\w-]*)=("(?:[^"\\]|\\.)*"|\S+)')
_WORD_RE = re.compile(r"[\w-]+")


@dataclass(frozen=True)
class Entry:
    """One memory entry: a list item or a paragraph, with where it stands in its file."""

    path: str
    """Workspace-relative POSIX path of the file."""
    start_line: int
    """First line, 1-based, inclusive."""
    end_line: int
    """Last line, 1-based, inclusive."""
    text: str
    """The entry's text: no list marker, no checkbox, no metadata comment."""
    heading_path: tuple[str, ...]
    """The headings above it, outermost first (``("Memory", "Facts")``)."""
    kind: str
    """``item`` (list item) or ``paragraph``."""
    type: str
    """One of :data:`MEMORY_TYPES`: from the metadata comment, else from the heading it is
    under (``## Preferences`` → ``preference``), else ``note``."""
    importance: float
    """0 to 1: from the metadata comment, else 0.5."""
    id: str
    """The metadata comment's ``id`` (``m-…``: kept through edits and moves), or for a
    hand-written entry one derived from its file and text (``h-…``: a new one when either
    changes)."""
    created: str | None = None
    """``YYYY-MM-DD`` the program wrote it (its metadata comment's ``created``); None for a
    hand-written entry, which the index dates from when it first saw it."""
    source: str | None = None
    """The session it was extracted or remembered from (its id), if any."""
    archived: bool = False
    """Under ``## Archive``: superseded, consolidated or archived by hand; searched only
    with ``include_archived``."""
    checked: bool | None = None
    """For task-list items (``- [x]``): whether the box is ticked; else None."""
    meta: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Every key the metadata comment holds, as written."""
    redacted: int = field(default=0, compare=False)
    """Secrets masked (``[REDACTED:kind]``) in the text of the call that returned this entry
    (``remember``, ``update``, ``supersede``); 0 for an entry read from a file."""

    @property
    def lines(self) -> tuple[int, int]:
        """``(start_line, end_line)``."""
        return (self.start_line, self.end_line)

    @property
    def heading(self) -> str:
        """The headings above it as one string, ``Memory > Facts``."""
        return " > ".join(self.heading_path)

    @property
    def written_by_program(self) -> bool:
        """Whether it carries mdmem's metadata comment (a hand-written entry does not)."""
        return "id" in self.meta

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "heading_path": list(self.heading_path),
            "kind": self.kind,
            "type": self.type,
            "importance": self.importance,
            "created": self.created,
            "source": self.source,
            "archived": self.archived,
            "checked": self.checked,
            "text": self.text,
            "meta": dict(self.meta),
        }


def new_id() -> str:
    """A fresh id for an entry the program writes: 40 random bits, ``m-`` + 10 hex."""
    return "m-" + secrets.token_hex(5)


def text_sum(text: str) -> str:
    """A short checksum of an entry's text as the program wrote it (the ``sum=`` key): when the
    text no longer matches it, a person has edited the entry since."""
    return hashlib.sha1(" ".join(text.split()).encode()).hexdigest()[:8]


def edited_by_hand(entry: Entry) -> bool:
    """Hand-written (no program id), or edited since the program wrote it (or written before
    the program kept a ``sum=``, so no one can tell): never changed automatically."""
    if not entry.id.startswith("m-") or "id" not in entry.meta:
        return True
    return entry.meta.get("sum") != text_sum(entry.text)


RELATION_KINDS = ("supports", "contradicts", "refines")
"""How one memory bears on another; stored as ``refines=m-a,m-b`` in the source's metadata."""


def related_ids(entry: Entry, kind: str) -> tuple[str, ...]:
    """The ids ``entry`` names under ``kind`` (comma-separated, blanks ignored)."""
    value = entry.meta.get(kind, "")
    return tuple(dict.fromkeys(p.strip() for p in value.split(",") if p.strip()))


_ARCHIVED_SESSION = re.compile(r"^\.sessions/archive/\d{4}-\d{2}/(?=[^/]+$)")


def derived_id(path: str, text: str) -> str:
    """A stable id for a hand-written entry with no metadata, from its file and text. A
    session moved to ``.sessions/archive/YYYY-MM/`` keeps its entries' ids (and so their
    access counts and the relations naming them)."""
    path = _ARCHIVED_SESSION.sub(".sessions/", path)
    digest = hashlib.sha1(f"{path}\0{' '.join(text.split())}".encode()).hexdigest()
    return "h-" + digest[:10]


def find_meta(line: str) -> re.Match[str] | None:
    """The metadata comment in ``line``, in time linear in its length (lines can be huge)."""
    if "<!--" not in line:
        return None
    if "\n" in line:
        return _META_RE.search(line)
    opening = _META_OPEN.search(line)
    # No "-->" after the first opening means none after any later one: no match at all.
    if opening is None or line.find("-->", opening.end()) < 0:
        return None
    return _META_RE.match(line, opening.start())


def parse_meta(body: str) -> dict[str, str]:
    """Parse ``key=value`` pairs; values with spaces are JSON-quoted strings."""
    out: dict[str, str] = {}
    for key, value in _PAIR_RE.findall(body):
        if value.startswith('"'):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = value.strip('"')
        out[key] = value
    return out


def format_meta(meta: Mapping[str, object]) -> str:
    """Render metadata as the comment, in a stable key order, skipping empty values."""
    order = ["id", "type", "importance", "created", "updated", "source"]
    keys = [k for k in order if k in meta] + sorted(k for k in meta if k not in order)
    parts = []
    for key in keys:
        value = meta[key]
        if value is None or value == "":
            continue
        text = _format_value(value)
        parts.append(f"{key}={text}")
    return "<!-- mdmem " + " ".join(parts) + " -->"


def _format_value(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:.2f}".rstrip("0").rstrip(".")
        return text if text else "0"
    text = str(value)
    if not text or any(c.isspace() for c in text) or '"' in text or "-->" in text:
        return json.dumps(text, ensure_ascii=False)
    return text


def type_from_heading(heading: str) -> str | None:
    words = {w.lower() for w in _WORD_RE.findall(heading)}
    for type_, keys in _HEADING_WORDS.items():
        if words.intersection(keys):
            return type_
    return None


def default_type_for_file(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if name == "learnings.md":
        return "skill"
    if name == "memory.md":
        return "fact"
    if path.startswith(".sessions/"):
        return "event"
    return "note"


def parse_importance(value: str | None, default: float = DEFAULT_IMPORTANCE) -> float:
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        return default
    return min(1.0, max(0.0, number))


def check_type(type_: str) -> str:
    if type_ not in ENTRY_TYPES:
        raise ValueError(f"unknown memory type {type_!r}: use one of {', '.join(MEMORY_TYPES)}")
    return type_


def check_importance(value: float) -> float:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"importance must be between 0 and 1, got {value}")
    return float(value)
