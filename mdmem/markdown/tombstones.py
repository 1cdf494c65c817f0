"""Tombstones: the trace ``forget`` leaves in a file so that a merge never brings an entry back.

``forget`` deletes an entry's text for good; another clone may still hold the entry (edited,
superseded, archived) when they meet in a git merge. The file keeps one comment line per
forgotten entry, at its end, naming the entry's id and a digest of its text (never the text):

    <!-- mdmem forgotten id=m-3f9a2c71d0 sum=5d41402abc4b2a76 -->

The merge driver takes the tombstones of both sides and drops every version of those entries
(their id, a variant of it, or the same text under another id): ``forget`` wins over any
concurrent change. The line is a comment: Markdown shows nothing, the parser sees no entry.
"""

from __future__ import annotations

import hashlib
import re

from mdmem.text import same_text

_LINE = re.compile(r"^<!-- mdmem forgotten id=(?P<id>[\w-]+) sum=(?P<sum>[0-9a-f]{16}) -->\r?$")


def digest(text: str) -> str:
    """What a tombstone records of a forgotten text: a digest of it as compared (case and
    spacing aside), so an archived copy of the same words is known too."""
    return hashlib.sha256(same_text(text).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def line(entry_id: str, text: str, newline: str = "\n") -> str:
    return f"<!-- mdmem forgotten id={entry_id} sum={digest(text)} -->{newline}"


def is_tombstone(row: str) -> bool:
    return _LINE.match(row.rstrip("\n")) is not None


def read(text: str) -> dict[str, str]:
    """The tombstones a file holds: id → digest."""
    found: dict[str, str] = {}
    for row in text.splitlines():
        if (match := _LINE.match(row)) is not None:
            found[match.group("id")] = match.group("sum")
    return found


def strip(text: str) -> str:
    """``text`` without its tombstone lines."""
    return "".join(row for row in text.splitlines(keepends=True) if not is_tombstone(row))


def append(text: str, marks: dict[str, str], newline: str = "\n") -> str:
    """``text`` with ``marks`` (id → digest) as tombstone lines at its end, after one blank
    line; those already there are not repeated."""
    have = read(text)
    rows = [
        f"<!-- mdmem forgotten id={i} sum={s} -->{newline}"
        for i, s in marks.items()
        if have.get(i) != s
    ]
    if not rows:
        return text
    body = text.rstrip("\r\n") if not have else text
    if not have:
        body = body + newline + newline if body else ""
    elif not body.endswith(("\n", "\r")):
        body += newline
    return body + "".join(rows)
