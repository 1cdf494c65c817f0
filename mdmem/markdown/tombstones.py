"""Tombstones: the trace ``forget`` leaves in a file so that a merge never brings an entry back.

``forget`` deletes an entry's text for good; another clone may still hold the entry (edited,
superseded, archived) when they meet in a git merge. The file keeps one comment line per
forgotten entry, at its end, naming the entry's id, a digest of its text (never the text) and
the day it was forgotten:

    <!-- mdmem forgotten id=m-3f9a2c71d0 sum=5d41402abc4b2a76 at=2026-11-28 -->

The merge driver takes the tombstones of both sides and drops every version of those entries
(their id, a variant of it, or the same text under another id): ``forget`` wins over any
concurrent change. The line is a comment: Markdown shows nothing, the parser sees no entry.

They are bounded (invariant 8: nothing mdmem keeps grows without bound): a tombstone is kept
for :data:`MAX_AGE` after its day, and a file keeps at most :data:`MAX_COUNT` of them (the
newest). A tombstone is needed only until every clone has pulled the commit that made it: a
clone that merges after that holds no version the forget did not see. git cannot tell mdmem
which clones exist, so the bound is time: a clone that syncs within a year of a forget never
brings the text back; one that was away longer (or a file with more than 1,000 forgets in
that year) may, and ``forget`` must be run again there (docs/sharing.md says so).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from mdmem.text import same_text

MAX_AGE = dt.timedelta(days=365)
"""How long a tombstone is kept after the day of its ``forget``."""
MAX_COUNT = 1000
"""The most tombstones one file keeps (the newest; about 75 bytes each)."""

_LINE = re.compile(
    r"^<!-- mdmem forgotten id=(?P<id>[\w-]+) sum=(?P<sum>[0-9a-f]{16})"
    r"(?: at=(?P<at>\d{4}-\d{2}-\d{2}))? -->\r?$"
)


@dataclass(frozen=True, order=True)
class Tombstone:
    """One forgotten entry: when (``""`` for a line written before tombstones were dated),
    its id and the digest of its text. Ordered by day, then id: the order a file lists them."""

    at: str
    id: str
    sum: str

    def line(self, newline: str = "\n") -> str:
        day = f" at={self.at}" if self.at else ""
        return f"<!-- mdmem forgotten id={self.id} sum={self.sum}{day} -->{newline}"


def digest(text: str) -> str:
    """What a tombstone records of a forgotten text: a digest of it as compared (case and
    spacing aside), so an archived copy of the same words is known too."""
    return hashlib.sha256(same_text(text).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def of(entry_id: str, text: str, day: dt.date) -> Tombstone:
    """The tombstone of forgetting ``text`` (the entry ``entry_id``) on ``day``."""
    return Tombstone(day.isoformat(), entry_id, digest(text))


def is_tombstone(row: str) -> bool:
    return _LINE.match(row.rstrip("\n")) is not None


def read(text: str) -> set[Tombstone]:
    """The tombstones a file holds."""
    found: set[Tombstone] = set()
    for row in text.splitlines():
        if (match := _LINE.match(row)) is not None:
            found.add(Tombstone(match.group("at") or "", match.group("id"), match.group("sum")))
    return found


def strip(text: str) -> str:
    """``text`` without its tombstone lines."""
    return "".join(row for row in text.splitlines(keepends=True) if not is_tombstone(row))


def bounded(marks: Iterable[Tombstone], today: dt.date) -> list[Tombstone]:
    """The tombstones a file keeps on ``today``, in its order: one per forgotten text (the
    latest day), none older than :data:`MAX_AGE` (an undated one is kept: its age is not
    known), at most :data:`MAX_COUNT`, the newest. The same whichever side of a merge has
    which: a pure function of the set."""
    latest: dict[tuple[str, str], Tombstone] = {}
    for mark in marks:
        key = (mark.id, mark.sum)
        if key not in latest or latest[key] < mark:
            latest[key] = mark
    oldest = (today - MAX_AGE).isoformat()
    kept = sorted(m for m in latest.values() if not m.at or m.at >= oldest)
    return kept[-MAX_COUNT:]


def append(text: str, marks: Iterable[Tombstone], today: dt.date, newline: str = "\n") -> str:
    """``text`` with its own tombstones and ``marks``, :func:`bounded`, as lines at its end
    after one blank line (in the order :func:`bounded` gives: the same bytes whoever writes
    them)."""
    rows = [m.line(newline) for m in bounded([*read(text), *marks], today)]
    body = strip(text)
    if not rows:  # none left: the file ends as its last line did, with one line ending
        return body.rstrip("\r\n") + newline if body != text and body.strip() else body
    body = body.rstrip("\r\n")
    return (body + newline + newline if body else "") + "".join(rows)


def ids(marks: Iterable[Tombstone]) -> set[str]:
    return {m.id for m in marks}


def sums(marks: Iterable[Tombstone]) -> set[str]:
    return {m.sum for m in marks}
