"""The live session's tiers as context sources: L1 (its most recent events), L2 (its
important events before those) and L3 (summaries of older sessions). L4, lasting knowledge, is
the knowledge and retrieved sources. The three never say the same line twice: L1 takes the
newest events that fit its nominal share of the budget, L2 only older ones, L3 only sessions
the recent-sessions source does not show."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mdmem.config import Config
from mdmem.context.pack import Source, Unit
from mdmem.memory.compact_memory import read_memory
from mdmem.memory.documents import Documents
from mdmem.memory.session_format import Event, SessionRecord
from mdmem.memory.tiers import evicted_in, raw_summary, summaries
from mdmem.text import one_line
from mdmem.tokens import TokenCounter

SUMMARY_FILES = 20
"""The L3 source looks at the newest this many session files (a prompt has no room for
more, and reading every session of a long-lived workspace per prompt would be slow)."""
FULL_SOURCES = (
    "task",
    "sessions",
    "recent",
    "important",
    "summaries",
    "world",
    "shared",
    "knowledge",
    "retrieved",
)


def tier_sources(
    config: Config,
    documents: Documents,
    count: TokenCounter,
    live: SessionRecord | None,
    shown: Sequence[SessionRecord],
    budget: int,
) -> list[Source]:
    """``live``: the agent's running session (None: no L1 and L2); ``shown``: the sessions the
    recent-sessions source shows (their summaries are not repeated)."""
    sources: list[Source] = []
    if live is not None:
        window = _nominal(config.context.shares, "recent", budget)
        recent, older = _split(live, count, window)
        sources.append(_recent(live, recent))
        evicted = evicted_in(raw_summary(documents, live))
        important = [
            (n, e) for n, e in older if e.importance > config.tiers.important and n not in evicted
        ]
        sources.append(_important(live, important))
    skip = {r.id for r in shown} | ({live.id} if live is not None else set())
    found = summaries(config, documents, count, newest=SUMMARY_FILES)
    items = [i for i in found if i.session not in skip]
    units: list[Unit] = []
    for rank, item in enumerate(reversed(items)):  # newest first
        base = rank * 10_000
        memory = read_memory(item.text, level=3)
        head = "; ".join(memory.state) or f"{len(memory.events)} key events"
        units.append(Unit(f"- {item.started[:10]} {item.session}: {one_line(head)}", "", base))
        for n, event in reversed(list(enumerate(memory.events))):
            units.append(Unit(f"  - [{event.tag}] {one_line(event.text)}", "", base + 1 + n))
    sources.append(
        Source(
            "summaries",
            "Session Summaries",
            "session summaries",
            tuple(units),
            files=(".sessions/",),
        )
    )
    return sources


def _nominal(shares: Mapping[str, float], name: str, budget: int) -> int:
    total = sum(shares.get(s, 0.0) for s in FULL_SOURCES)
    return int(budget * shares.get(name, 0.0) / total) if total else 0


def _split(
    live: SessionRecord, count: TokenCounter, window: int
) -> tuple[list[tuple[int, str]], list[tuple[int, Event]]]:
    """The newest events that fit ``window`` tokens (as lines), and the events before them."""
    events = list(enumerate(live.events, start=1))
    recent: list[tuple[int, str]] = []
    used = 0
    cut = len(events)
    for n, event in reversed(events):
        line = f"- {event.time} [{event.action}] {one_line(event.text)}"
        cost = count(line) + 1
        if used + cost > window:
            break
        used += cost
        recent.append((n, line))
        cut = n - 1
    return recent, events[:cut]


def _recent(live: SessionRecord, recent: list[tuple[int, str]]) -> Source:
    units = [Unit(line, "", n) for n, line in recent]  # newest first, shown in time order
    if live.request:
        units.insert(0, Unit(f"- Request: {one_line(live.request)}", "", 0))
    path = (live.path or "",)
    return Source(
        "recent", f"Current Session: {live.title}", "the current session", tuple(units), files=path
    )


def _important(live: SessionRecord, events: list[tuple[int, Event]]) -> Source:
    ranked = sorted(events, key=lambda pe: (-pe[1].importance, -pe[0]))
    units = tuple(Unit(f"- {e.time} [{e.action}] {one_line(e.text)}", "", n) for n, e in ranked)
    path = (live.path or "",)
    return Source("important", "Important Earlier Events", "earlier events", units, files=path)
