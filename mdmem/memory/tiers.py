"""The memory tiers, L1 to L4, as views over the files: nothing is stored apart from them.

- L1: the live session's most recent events, whole, within ``tiers.l1_tokens``.
- L2: the live session's important events (importance above ``tiers.important``) that have
  not been compacted into its summary yet.
- L3: session summaries (each session's ``## Summary``), and ``.compact_memory.md``'s key
  events in minimal mode, not yet promoted to L4.
- L4: the lasting memories of memory.md and learnings.md.

What moved is written in the session's ``## Summary`` as two comments a person can read:
``<!-- mdmem evicted: 1-12,15 -->`` (the events, by their position in ``## Events``, that were
compacted out of L2; their lines stay as they are) and ``<!-- mdmem promoted: 2026-11-23 -->``
(the summary's lasting facts went to L4).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mdmem.config import Config
from mdmem.errors import FileProblem
from mdmem.layout import COMPACT_FILE, KNOWLEDGE_FILES, SESSIONS_DIR
from mdmem.markdown.entries import MEMORY_TYPES
from mdmem.markdown.sections import section_text
from mdmem.memory.compact_memory import read_memory
from mdmem.memory.documents import Documents
from mdmem.memory.session_format import SUMMARY_SECTION, Event, SessionRecord, parse_session
from mdmem.tokens import TokenCounter

log = logging.getLogger("mdmem")

ARCHIVE_DIR = f"{SESSIONS_DIR}/archive"
EVICTED = re.compile(r"<!-- mdmem evicted: (?P<ranges>[0-9, -]*) -->[ \t]*\n?")
PROMOTED = re.compile(r"<!-- mdmem promoted: (?P<date>[0-9-]+) -->[ \t]*\n?")
TIER_NAMES = ("L1", "L2", "L3", "L4")
LIVE_SCAN = 50
"""Session files looked at (newest first) for the agent's live session."""


def parse_ranges(text: str) -> frozenset[int]:
    """``1-3,7`` → {1, 2, 3, 7}; anything unreadable is left out."""
    found: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            found.update(range(int(low), int(high or low) + 1))
    return frozenset(found)


def format_ranges(numbers: Iterable[int]) -> str:
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for n in [*ordered, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ",".join(parts)


def evicted_in(summary: str) -> frozenset[int]:
    """The event positions (1-based) a raw ``## Summary`` says were compacted out of L2."""
    match = EVICTED.search(summary)
    return parse_ranges(match.group("ranges")) if match else frozenset()


def promoted_in(summary: str) -> str | None:
    match = PROMOTED.search(summary)
    return match.group("date") if match else None


def with_marks(body: str, evicted: Iterable[int] = (), promoted: str | None = None) -> str:
    """A summary body with its tier marks set (kept on top, one line each)."""
    rest = PROMOTED.sub("", EVICTED.sub("", body)).strip("\n")
    old_evicted, old_promoted = evicted_in(body), promoted_in(body)
    numbers = set(old_evicted) | set(evicted)
    marks = []
    if numbers:
        marks.append(f"<!-- mdmem evicted: {format_ranges(numbers)} -->")
    if promoted or old_promoted:
        marks.append(f"<!-- mdmem promoted: {promoted or old_promoted} -->")
    return "\n".join([*marks, rest]).strip("\n") if rest or marks else ""


@dataclass(frozen=True)
class EventItem:
    """An event of the live session in tiers L1 or L2, with its token count."""

    position: int
    """1-based position among the session's events."""
    event: Event
    tokens: int

    @property
    def line(self) -> str:
        return f"{self.event.time} [{self.event.action}] {self.event.text}".strip()


@dataclass(frozen=True)
class SummaryItem:
    """A summary in tier L3: a compacted session's, or a key event of the compact memory."""

    path: str
    """The session file, or ``.compact_memory.md``."""
    session: str | None
    """The session's id; None for a key event of ``.compact_memory.md``."""
    started: str
    text: str
    tokens: int


@dataclass(frozen=True)
class Tier:
    """One tier's tokens against its budget, and when its next promotion runs."""

    name: str
    tokens: int
    budget: int
    items: int
    trigger: int
    """Tokens at which the next promotion from this tier runs (L4: ``consolidate.threshold``
    memories, not tokens: see ``trigger_items``)."""
    next: str
    """What the next promotion from this tier would do, in words."""

    @property
    def share(self) -> float:
        return round(self.tokens / self.budget, 4) if self.budget else 0.0

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "share": self.share}


@dataclass(frozen=True)
class TierView:
    """The memory tiers of one agent: what each holds now."""

    live: SessionRecord | None
    """The agent's newest session, if it is still running (else L1 and L2 are empty)."""
    evicted: frozenset[int]
    l1: tuple[EventItem, ...]
    """Newest first."""
    l2: tuple[EventItem, ...]
    """In time order."""
    l3: tuple[SummaryItem, ...]
    """Oldest first."""
    l4_tokens: int
    l4_items: int

    def tokens(self, name: str) -> int:
        if name == "L4":
            return self.l4_tokens
        layers: dict[str, Sequence[EventItem | SummaryItem]] = {
            "L1": self.l1,
            "L2": self.l2,
            "L3": self.l3,
        }
        return sum(i.tokens for i in layers[name])


def live_session(documents: Documents, agent: str) -> SessionRecord | None:
    """The agent's newest session in ``.sessions/`` when it is still running (files are read
    newest first by name, their start time, and only until the agent's newest is found)."""
    folder = documents.root / SESSIONS_DIR
    if not folder.is_dir():
        return None
    newest = sorted(folder.glob("*.md"), reverse=True)[:LIVE_SCAN]
    for record in _records(documents, newest):
        if record.agent == agent:
            return record if record.status == "running" else None
    return None


def session_records(
    documents: Documents, archived: bool = True, newest: int | None = None
) -> list[SessionRecord]:
    """Every session of ``.sessions/`` (and of ``.sessions/archive/``), oldest first;
    ``newest``: only the files of ``.sessions/`` last by name (their start time)."""
    folder = documents.root / SESSIONS_DIR
    paths = sorted(folder.glob("*.md")) if folder.is_dir() else []
    if newest is not None:
        paths = paths[-newest:] if newest > 0 else []
    elif archived and (documents.root / ARCHIVE_DIR).is_dir():
        paths += sorted((documents.root / ARCHIVE_DIR).glob("*/*.md"))
    return sorted(_records(documents, paths), key=lambda r: (r.started or "", r.id))


def _records(documents: Documents, paths: Iterable[object]) -> Iterable[SessionRecord]:
    for path in paths:
        rel = path.relative_to(documents.root).as_posix()  # type: ignore[attr-defined]
        try:
            yield parse_session(documents.read(rel))
        except (FileProblem, TypeError, ValueError, OverflowError) as exc:
            log.warning("tiers: skipped %s: %s", rel, exc)


def raw_summary(documents: Documents, record: SessionRecord) -> str:
    if not record.path:
        return ""
    doc = documents.read(record.path)
    return section_text(doc.text, record.path, SUMMARY_SECTION)


def view(config: Config, documents: Documents, count: TokenCounter, agent: str) -> TierView:
    tiers = config.tiers
    live = live_session(documents, agent) if config.mode == "full" else None
    evicted: frozenset[int] = frozenset()
    l1: list[EventItem] = []
    l2: list[EventItem] = []
    if live is not None:
        evicted = evicted_in(raw_summary(documents, live))
        items = [EventItem(n, e, 0) for n, e in enumerate(live.events, start=1)]
        items = [EventItem(i.position, i.event, count(i.line)) for i in items]
        used = 0
        for item in reversed(items):
            if used + item.tokens > tiers.l1_tokens:
                break
            used += item.tokens
            l1.append(item)
        l2 = [
            i for i in items if i.event.importance > tiers.important and i.position not in evicted
        ]
    l3 = summaries(config, documents, count)
    entries = [
        e
        for f in KNOWLEDGE_FILES
        if (documents.root / f).exists()
        for e in documents.entries_or_warn(f, "tiers")
        if e.type in MEMORY_TYPES
    ]
    return TierView(
        live,
        evicted,
        tuple(l1),
        tuple(l2),
        tuple(l3),
        sum(count(e.text) for e in entries),
        len(entries),
    )


def summaries(
    config: Config, documents: Documents, count: TokenCounter, newest: int | None = None
) -> list[SummaryItem]:
    """L3, oldest first: every session summary not yet promoted (``newest``: of the last
    session files only); in minimal mode, the compact memory's key events (its state stays:
    it is the present, not history)."""
    items: list[SummaryItem] = []
    if config.mode == "minimal":
        doc = documents.or_none(COMPACT_FILE)
        if doc is not None:
            memory = read_memory(doc.text)
            for event in memory.events:
                text = event.render()
                items.append(SummaryItem(COMPACT_FILE, None, event.date or "", text, count(text)))
        return items
    for record in session_records(documents, newest=newest):
        if not record.summary or not record.path:
            continue
        raw = raw_summary(documents, record)
        if promoted_in(raw):
            continue
        items.append(
            SummaryItem(
                record.path, record.id, record.started or "", record.summary, count(record.summary)
            )
        )
    return items


def tiers_of(
    view_: TierView, config: Config, l2_next: str, l3_next: str, l4_next: str
) -> list[Tier]:
    """The four tiers with their budgets and triggers; ``*_next`` say what promotion would do."""
    t = config.tiers
    return [
        Tier("L1", view_.tokens("L1"), t.l1_tokens, len(view_.l1), t.l1_tokens, "oldest out first"),
        Tier(
            "L2",
            view_.tokens("L2"),
            t.l2_tokens,
            len(view_.l2),
            int(t.l2_tokens * t.l2_trigger),
            l2_next,
        ),
        Tier(
            "L3",
            view_.tokens("L3"),
            t.l3_tokens,
            len(view_.l3),
            int(t.l3_tokens * t.l3_trigger),
            l3_next,
        ),
        Tier("L4", view_.l4_tokens, t.l4_tokens, view_.l4_items, t.l4_tokens, l4_next),
    ]
