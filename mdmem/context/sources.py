"""What goes into the memory section of a prompt, one source at a time: the task, recent
sessions, the world state, lasting memories, search hits, the compact memory."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from mdmem.context.pack import Source, Unit
from mdmem.markdown.entries import Entry
from mdmem.memory.compact_memory import CompactMemory, read_memory
from mdmem.memory.session_format import SessionRecord
from mdmem.memory.task import TaskItem, TaskState
from mdmem.memory.world import WorldFact
from mdmem.sharing.pool import DEFAULT_POOL, PoolEntry
from mdmem.text import one_line

MEMORY_GROUPS = {
    "preference": "User Preferences",
    "fact": "Known Facts",
    "pattern": "Patterns",
    "skill": "Proven Skills",
}


KEY_EVENT_MIN_IMPORTANCE = 0.75
"""Session events at least this important are shown in the recent-sessions source."""


def task_source(state: TaskState, path: str) -> Source:
    units: list[Unit] = []
    if not (state.title or state.items):
        return Source("task", "Current Task", path, (), files=(path,))
    done = f"{state.done} of {len(state.items)} done"
    units.append(Unit(f"Task: {state.title or '(untitled)'} (phase {state.phase}; {done})", "", 0))
    current = state.current
    if current is not None:
        units.append(Unit(f"Now: {current.n}. {_item(current)}", "", 1))
    units += [
        Unit(f"- {rule.text}", "Instructions", 100 + rule.line) for rule in state.instructions
    ]
    open_items = [i for i in state.items if not i.done and i is not current]
    units += [Unit(f"- [ ] {i.n}. {_item(i)}", "TODO", 1000 + i.n) for i in open_items]
    done_items = [i for i in reversed(state.items) if i.done]
    units += [Unit(f"- [x] {i.n}. {_item(i)}", "TODO", 1000 + i.n) for i in done_items]
    return Source(
        "task", "Current Task", path, tuple(units), ("Instructions", "TODO"), files=(path,)
    )


def sessions_source(records: Sequence[SessionRecord], folder: str) -> Source:
    """The agent's recent sessions, newest first: what was asked, how it ended, key events."""
    heads: list[Unit] = []
    outcomes: list[Unit] = []
    asks: list[Unit] = []
    details: list[Unit] = []
    for rank, record in enumerate(records):
        base = rank * 10_000
        when = (record.started or "")[:16].replace("T", " ")
        head = f"- {when} {record.title} [{record.status}] ({record.path or record.id})"
        heads.append(Unit(head, "", base))
        if record.request:
            asks.append(Unit(f"  Request: {one_line(record.request)}", "", base + 1))
        summary = read_memory(record.summary, level=3) if record.summary else None
        if summary and summary.state:
            outcomes.append(Unit(f"  Summary: {'; '.join(summary.state)}", "", base + 2))
        elif record.response:
            outcomes.append(Unit(f"  Response: {one_line(record.response)}", "", base + 2))
        if summary and summary.events:
            # a compacted session: its key events stand for the raw stream
            for position, key_event in reversed(list(enumerate(summary.events))):
                line = f"  - [{key_event.tag}] {one_line(key_event.text)}"
                details.append(Unit(line, "", base + 10 + position))
            continue
        key = [
            (position, e)
            for position, e in enumerate(record.events)
            if e.importance >= KEY_EVENT_MIN_IMPORTANCE
        ]
        for position, event in sorted(key, key=lambda pe: -pe[1].importance)[:8]:
            line = f"  - {event.time} [{event.action}] {one_line(event.text)}"
            details.append(Unit(line, "", base + 10 + position))
    # priority: which sessions there were, how they ended, what was asked, key events
    units = heads + outcomes + asks + details
    return Source("sessions", "Recent Sessions", folder, tuple(units), files=(folder,))


def world_source(facts: Sequence[WorldFact], path: str) -> Source:
    groups: list[str] = []
    units = []
    for n, fact in enumerate(facts):
        group = fact.section or "World"
        if group not in groups:
            groups.append(group)
        units.append(Unit(f"- {fact.key}: {one_line(fact.value)}", group, n))
    return Source("world", "World State", path, tuple(units), tuple(groups), files=(path,))


def knowledge_source(
    entries: Iterable[Entry],
    ranked_ids: Sequence[str],
    files: Sequence[str],
    contradicted: Mapping[str, Sequence[str]] | None = None,
) -> Source:
    """Lasting memories grouped by type; query hits first, then by importance and recency.
    A memory another active one contradicts says so (``contradicted by m-…``)."""
    contradicted = contradicted or {}
    memories = [e for e in entries if not e.archived and e.type in MEMORY_GROUPS]
    rank = {entry_id: n for n, entry_id in enumerate(ranked_ids)}
    memories.sort(
        key=lambda e: (
            rank.get(e.id, len(rank)),
            -e.importance,
            _neg_date(e.created),
        )
    )
    units = [
        Unit(f"- {one_line(e.text)}{_against(contradicted.get(e.id))}", MEMORY_GROUPS[e.type], n)
        for n, e in enumerate(memories)
    ]
    return Source(
        "knowledge",
        "Memory",
        ", ".join(files),
        tuple(units),
        tuple(MEMORY_GROUPS.values()),
        files=tuple(files),
    )


MISSING_RETRIEVED = "- [related memories missing: the index could not be searched]"


def retrieved_source(hits: Sequence[tuple[str, str]], missing: bool = False) -> Source:
    """Search hits not already shown by another source: (``path:lines``, text) pairs.
    ``missing``: the search could not run, and the section says so."""
    units = [Unit(f"- {one_line(text)} ({where})", "", n) for n, (where, text) in enumerate(hits)]
    if missing:
        units = [Unit(MISSING_RETRIEVED)]
    return Source("retrieved", "Related Memories", "search results", tuple(units))


SHARED_UNIT_CHARS = 600
"""A pool value longer than this is cut (marked ``…``): one huge value must not crowd out the
newer entries after it."""


def shared_source(entries: Sequence[PoolEntry], folder: str) -> Source:
    """Shared-pool entries, newest first, ``[SHARED:key] value`` (``[SHARED:pool:key]`` for a
    pool other than the default one)."""
    newest = sorted(entries, key=lambda e: e.updated_at or e.created_at or "", reverse=True)
    units = []
    for n, entry in enumerate(newest):
        name = entry.key if entry.pool == DEFAULT_POOL else f"{entry.pool}:{entry.key}"
        value = entry.content
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = one_line(text)
        if len(text) > SHARED_UNIT_CHARS:
            text = text[: SHARED_UNIT_CHARS - 1].rstrip() + "…"
        units.append(Unit(f"- [SHARED:{name}] {text}", "", n))
    return Source("shared", "Shared Pool", folder, tuple(units), files=(folder,))


def compact_source(memory: CompactMemory, path: str) -> Source:
    """``.compact_memory.md`` as its one reader sees it: the State first, then the key
    events, newest first (a person's notes around them are theirs, not the prompt's)."""
    units = [Unit(f"- {one_line(s)}", "State", n) for n, s in enumerate(memory.state)]
    units += [
        Unit(e.render(), "Key Events", 10_000 + n)
        for n, e in reversed(list(enumerate(memory.events)))
    ]
    return Source("compact", "Compact Memory", path, tuple(units), ("State", "Key Events"), (path,))


def _item(item: TaskItem) -> str:
    """A TODO item on one line, its sub-items (ticked or not) after it."""
    subs = [
        f"{'' if done is None else '[x] ' if done else '[ ] '}{one_line(text)}"
        for text, done in item.subitems
    ]
    return one_line(item.text) + (f" ({'; '.join(subs)})" if subs else "")


def _against(sources: Sequence[str] | None) -> str:
    return f" (contradicted by {', '.join(sources)})" if sources else ""


def _neg_date(value: str | None) -> str:
    # newest first under an ascending sort: invert the digits of YYYY-MM-DD
    return "".join(chr(ord("9") - ord(c) + ord("0")) if c.isdigit() else c for c in value or "")
