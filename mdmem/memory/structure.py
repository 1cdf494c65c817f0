"""The structure in the files mdmem writes: what the secret redactor never rewrites.

Redaction is for free text and for values that carry user content (a memory, an event, a
LangGraph item's ``value``, a pool entry's content). These are structure, and a program write
keeps them byte for byte:

- frontmatter values named in :data:`FRONTMATTER_FIELDS`, in the files whose frontmatter mdmem
  writes (sessions, LangGraph items): LangGraph ``namespace``, ``key``,
  ``created``, ``updated`` and ``index``; a session's ``conversation`` and ``session`` ids,
  ``source``, ``agent``, times, counts and writer stamp; an import's id and digest;
- metadata comment values named in :data:`META_FIELDS` (``<!-- mdmem id=… source=… -->``): entry
  ids, the session and file an entry came from, links between entries, versions and hashes;
- world keys (``- **key**: value`` in world_state.md) and pool keys (``## key`` in
  ``shared/<pool>.md``) and the pool's name in its title;
- mdmem's own labels, such as ``# Session:`` before a session's title: the title is content and
  is searched, but the label is never read as the name of an assignment (``Session: X``).

File names never pass through the redactor (a write names its file; it does not write it).
A structural value is checked against provider formats only (``sk-ant-…``, ``ghp_…``,
``AKIA…``: :meth:`Redactor.provider_spans`); one that holds such a secret refuses the write
(:class:`~mdmem.redact.SecretInField`) instead of storing a corrupted key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from mdmem.errors import FileProblem
from mdmem.layout import SESSIONS_DIR, WORLD_FILE
from mdmem.redact import Field

FRONTMATTER_FIELDS = frozenset(
    {
        # LangGraph store items (mdmem.integrations.langgraph_store)
        "namespace",
        "key",
        "created",
        "updated",
        "index",
        # sessions, imported conversations, Agents SDK sessions
        "session",
        "conversation",
        "source",
        "agent",
        "started",
        "ended",
        "status",
        "rounds",
        "duration_s",
        "tools",
        "host",
        "pid",
        "pid_start",
        "imported",
        "source_messages",
        "source_digest",
        "id",
    }
)
"""Frontmatter keys whose values are ids, keys, names, times or counts."""

META_FIELDS = frozenset(
    {
        "id",
        "type",
        "importance",
        "created",
        "updated",
        "source",
        "session",
        "sum",
        "shown",
        "supersedes",
        "superseded",
        "superseded_by",
        "refines",
        "contradicts",
        "consolidated",
        "consolidated_into",
        "archived",
        "archived_by",
        "tier",
        "tiers",
        "version",
        "hash",
        "created_by",
        "updated_by",
        "created_at",
        "updated_at",
        "deleted_at",
        "deleted_by",
    }
)
"""Metadata comment keys whose values are ids, links, dates, versions or hashes. Others (an
Agents SDK ``item``, a pool entry's ``metadata``, a ``parent_note``) carry content."""

_FRONT_LINE = re.compile(r"([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")
_META = re.compile(r"<!--\s*mdmem\b(.*?)-->")
_PAIR = re.compile(r'([A-Za-z_][\w-]*)=("(?:[^"\\\n]|\\.)*"|[^\s"]\S*)')
_LABELS = {SESSIONS_DIR: re.compile(r"#[ \t]+Session:")}
_POOL_TITLE = re.compile(r"#[ \t]+Shared pool:[ \t]*")


def structural_fields(rel: str, text: str, start: int = 0, end: int | None = None) -> list[Field]:
    """The structural fields of ``text`` (the file ``rel``) that meet ``[start, end)``."""
    end = len(text) if end is None else end
    found = list(_frontmatter(text, start, end, rel))
    lines = list(_lines(text, start, end))
    if "<!--" in text[start:end]:
        found += [f for at, line in lines for f in _meta(line, at)]
    folder = rel.partition("/")[0] if "/" in rel else ""
    if rel == WORLD_FILE:
        found += [f for at, line in lines for f in _world(line, at)]
    elif folder == "shared" and rel.endswith(".md"):
        found += _pool(rel, text, start, end)
    if (label := _LABELS.get(folder)) is not None:
        found += [
            Field(at, at + m.end(), "label", False) for at, x in lines if (m := label.match(x))
        ]
    return found


def _lines(text: str, start: int, end: int) -> Iterator[tuple[int, str]]:
    """(offset, line without its ending) for each line meeting ``[start, end)``."""
    at = text.rfind("\n", 0, start) + 1
    while True:
        stop = text.find("\n", at)
        stop = len(text) if stop < 0 else stop
        yield at, text[at:stop].rstrip("\r")
        if stop >= end or stop >= len(text):
            return
        at = stop + 1


def _frontmatter(text: str, start: int, end: int, rel: str) -> Iterator[Field]:
    """The structural values of the frontmatter of a file mdmem formats: a session, or a
    LangGraph item (its frontmatter names a ``namespace`` and a ``key``). Another file's
    frontmatter is the writer's content (``source: postgres://user:pass@…`` is masked there)."""
    head = 1 if text.startswith("\ufeff") else 0
    if not text.startswith("---", head) or text[head + 3 : head + 4] not in ("\n", "\r"):
        return
    rows: list[tuple[int, int, str, re.Match[str] | None]] = []
    at = text.find("\n", head) + 1
    while 0 < at < len(text):
        stop = text.find("\n", at)
        stop = len(text) if stop < 0 else stop
        line = text[at:stop].rstrip("\r")
        if line.strip() in ("---", "..."):
            break
        rows.append((at, stop, line, _FRONT_LINE.match(line)))
        at = stop + 1
    labels = {m.group(1) for _, _, _, m in rows if m}
    if not (rel.startswith(SESSIONS_DIR + "/") or {"namespace", "key"} <= labels):
        return
    for at, stop, line, match in rows:
        if at >= end or stop < start or match is None or not match.group(2):
            continue
        if match.group(1) in FRONTMATTER_FIELDS:
            lo, hi = match.span(2)
            if hi - lo >= 2 and line[lo] == line[hi - 1] and line[lo] in "\"'":
                lo, hi = lo + 1, hi - 1  # a quoted (JSON) value: the field is what it quotes
            yield Field(at + lo, at + hi, match.group(1))


def _meta(line: str, at: int) -> Iterator[Field]:
    for comment in _META.finditer(line):
        base = at + comment.start(1)
        for pair in _PAIR.finditer(comment.group(1)):
            if pair.group(1) in META_FIELDS:
                yield Field(base + pair.start(2), base + pair.end(2), pair.group(1))


def _world(line: str, at: int) -> Iterator[Field]:
    from mdmem.memory.world import key_span  # (world.md's, and the task's, parsers: only here)

    span = key_span(line)
    if span is not None:
        yield Field(at + span[0], at + span[1], "world key")


def _pool(rel: str, text: str, start: int, end: int) -> list[Field]:
    from mdmem.memory.pool_format import ARCHIVED_LEVEL, SECTION_LEVEL, parse_pool

    found: list[Field] = []
    first = next(_lines(text, 0, 0), None)
    if first is not None and (title := _POOL_TITLE.match(first[1])):
        found.append(Field(title.end(), len(first[1]), "pool name"))
    try:
        pool = parse_pool(rel, text)
    except (ValueError, FileProblem):
        return found
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    for section in (*pool.live, *pool.archived):
        at = starts[section.line - 1] if section.line - 1 < len(starts) else len(text)
        if at > end:
            continue
        level = ARCHIVED_LEVEL if section.archived else SECTION_LEVEL
        stop = text.find("\n", at)
        stop = len(text) if stop < 0 else stop
        if stop < start:
            continue
        line = text[at:stop].rstrip("\r")
        found.append(Field(at + level + 1, at + len(line), "pool key"))
    return found
