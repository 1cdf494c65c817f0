"""Promotion between the memory tiers (:mod:`mdmem.memory.tiers`), each step a visible
Markdown edit:

- L2 → L3: when L2 reaches ``tiers.l2_trigger`` of its budget, its least important (or least
  accessed) events are compacted into the session's ``## Summary`` (the offline compaction
  engine) until L2 is at ``tiers.l2_target``; the summary records which events it took in.
  The event lines stay as they are.
- L3 → L4: when L3 reaches ``tiers.l3_trigger``, the oldest ``tiers.l3_share`` of summaries
  have their lasting facts extracted (offline rules, deduplicated) into memory.md and
  learnings.md with ``source=`` the session; the summary is marked promoted.
- L4 → consolidation: past ``consolidate.threshold`` memories, consolidation runs (offline).
- Compacted sessions older than ``sessions.archive_days`` move to ``.sessions/archive/``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mdmem.config import Config
from mdmem.errors import ConflictError, EditNotApplicable, FileProblem
from mdmem.layout import COMPACT_FILE
from mdmem.markdown.parse import parse_document
from mdmem.markdown.sections import section_text, set_section
from mdmem.memory.archive_sessions import Move, archive_sessions, due
from mdmem.memory.compact_memory import read_memory, stamp, without_stamp, write_memory
from mdmem.memory.documents import Documents
from mdmem.memory.knowledge_store import today
from mdmem.memory.session_format import SUMMARY_SECTION, SessionRecord, parse_session
from mdmem.memory.tiers import (
    EventItem,
    SummaryItem,
    Tier,
    TierView,
    evicted_in,
    tiers_of,
    view,
    with_marks,
)
from mdmem.memory.writers import DryRunWriter, Writer
from mdmem.redact import Redactor
from mdmem.tokens import TokenCounter
from mdmem.writes.safe_writer import SafeWriter

if TYPE_CHECKING:
    from mdmem.distill.consolidate import ConsolidateReport
    from mdmem.distill.workflow import Distiller

log = logging.getLogger("mdmem")
_RUNNING = re.compile(r"^status:[ \t]*[\"']?running\b", re.M)
HEAD_CHARS = 4096
"""A session's status is read from the head of its text (the frontmatter, a few lines)."""
KEEP_REPORTS = 20
COMPACT_SOURCE = "compact_memory"
"""The ``source=`` of memories promoted from ``.compact_memory.md`` (minimal mode)."""


@dataclass(frozen=True)
class Step:
    kind: str
    """``compact`` (L2 → L3), ``extract`` (L3 → L4), ``consolidate`` (L4), ``archive``."""
    path: str
    detail: str
    items: int = 0
    tokens: int = 0
    done: bool = False

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


@dataclass(frozen=True)
class PromoteReport:
    tiers: tuple[Tier, ...]
    """The tiers before promotion (with what the next promotion would do)."""
    steps: tuple[Step, ...]
    after: tuple[Tier, ...] = ()
    """The tiers after it (empty in a dry run)."""
    moves: tuple[Move, ...] = ()
    dry_run: bool = False
    diff: str = ""
    problems: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        if not self.steps:
            return "nothing to promote: every tier is below its trigger"
        verb = "would be" if self.dry_run else "was"
        lines = [f"{len(self.steps)} promotion step(s) {verb.replace('was', 'were')} run:"]
        lines += [f"- {s.kind}: {s.detail}" for s in self.steps]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "tiers": [t.to_dict() for t in self.tiers],
            "steps": [s.to_dict() for s in self.steps],
            "after": [t.to_dict() for t in self.after],
            "moves": [m.to_dict() for m in self.moves],
            "dry_run": self.dry_run,
            "diff": self.diff,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Plan:
    view: TierView
    evict: tuple[EventItem, ...]
    promote: tuple[SummaryItem, ...]
    consolidate: bool
    archive: tuple[SessionRecord, ...]

    def tiers(self, config: Config) -> list[Tier]:
        return tiers_of(
            self.view,
            config,
            _say_evict(self.evict),
            _say_promote(self.promote),
            _say_consolidate(self.consolidate, self.view.l4_items, config),
        )


@dataclass(frozen=True)
class Promoter:
    config: Config
    documents: Documents
    writer: Writer
    safe: SafeWriter
    distiller: Callable[[], Distiller]
    consolidate: Callable[[Writer | None], ConsolidateReport]
    """Runs consolidation (offline); the argument is a dry run's writer (None: for real), so
    the dry run's diff holds consolidation's edits too."""
    access_counts: Callable[[Sequence[str]], dict[str, int]]
    count: TokenCounter
    agent: str
    redactor: Redactor
    today: Callable[[], dt.date] = dt.date.today
    """The day sessions are archived against (a simulation sets its own)."""

    # ---- what would happen ------------------------------------------------------------------

    def plan(self, *, live: bool = True, consolidate_above: int = 0) -> Plan:
        """What is due. ``live=False`` leaves the live session's L2 alone (its writer does
        that step); consolidation is due past ``consolidate.threshold`` memories and past
        ``consolidate_above``."""
        seen = view(self.config, self.documents, self.count, self.agent)
        evict = self._evict(seen.l2, seen.live) if live and seen.live is not None else ()
        t = self.config.tiers
        promote: tuple[SummaryItem, ...] = ()
        if seen.tokens("L3") >= t.l3_tokens * t.l3_trigger and seen.l3:
            promote = seen.l3[: max(1, math.ceil(len(seen.l3) * t.l3_share))]
        limit = max(self.config.consolidate.threshold, consolidate_above)
        consolidate = seen.l4_items > limit
        archive = tuple(due(self.documents, self.config.sessions.archive_days, self.today()))
        return Plan(seen, evict, promote, consolidate, archive)

    def tiers(self) -> list[Tier]:
        return self.plan().tiers(self.config)

    def _evict(
        self, l2: Sequence[EventItem], record: SessionRecord | None
    ) -> tuple[EventItem, ...]:
        """The events to compact out of L2: none below the trigger; else, in strategy order,
        until L2 is at its target."""
        t = self.config.tiers
        total = sum(i.tokens for i in l2)
        if total < t.l2_tokens * t.l2_trigger:
            return ()
        access = self._event_access(record, l2) if t.strategy == "frequency" else {}
        order = sorted(
            l2, key=lambda i: (access.get(i.position, 0), i.event.importance, i.position)
        )
        chosen: list[EventItem] = []
        target = t.l2_tokens * t.l2_target
        for item in order:
            if total <= target:
                break
            chosen.append(item)
            total -= item.tokens
        return tuple(sorted(chosen, key=lambda i: i.position))

    def _event_access(
        self, record: SessionRecord | None, items: Sequence[EventItem]
    ) -> dict[int, int]:
        """How often each event's chunk was returned by searches (the index's counts)."""
        if record is None or not record.path:
            return {}
        from mdmem.index.chunks import chunk_document, sha

        chunks = chunk_document(self.documents.read(record.path), self.redactor)
        keys: dict[int, str] = {}
        for item in items:
            for chunk in chunks:
                if chunk.start_line <= item.event.line <= chunk.end_line:
                    keys[item.position] = chunk.entry_id or sha(chunk.text)
                    break
        try:
            counts = self.access_counts(list(keys.values()))
        except Exception:  # no usable index: every event counts as unused
            counts = {}
        return {position: counts.get(key, 0) for position, key in keys.items()}

    # ---- doing it ---------------------------------------------------------------------------

    def run(
        self, *, dry_run: bool = False, live: bool = True, consolidate_above: int = 0
    ) -> PromoteReport:
        """Every step that is due (see :meth:`plan` for ``live`` and ``consolidate_above``)."""
        plan = self.plan(live=live, consolidate_above=consolidate_above)
        before = tuple(plan.tiers(self.config))
        writer: Writer = DryRunWriter(self.documents, self.redactor) if dry_run else self.writer
        steps: list[Step] = []
        problems: list[str] = []
        if plan.evict and plan.view.live is not None:
            steps.append(self._compact(plan.view.live, plan.evict, writer, problems))
        for item in plan.promote:
            steps.append(self._promote(item, writer, problems))
        if plan.consolidate:
            steps.append(self._consolidate(writer if dry_run else None))
        moves: tuple[Move, ...] = ()
        if plan.archive:
            moves = tuple(archive_sessions(self.documents, self.safe, list(plan.archive), dry_run))
            for move in moves:
                why = f" ({move.reason})" if move.reason else ""
                what = f"{move.source} → {move.target}{why}"
                steps.append(Step("archive", move.source, what, 1, 0, move.done))
        diff = writer.diff() if isinstance(writer, DryRunWriter) else ""
        after = () if dry_run else tuple(self.tiers())
        return PromoteReport(before, tuple(steps), after, moves, dry_run, diff, tuple(problems))

    def promote_l2(self, rel: str) -> Step | None:
        """L2 → L3 for one session file, if its L2 is past the trigger (the automatic step)."""
        record = parse_session(self.documents.read(rel))
        evicted = evicted_in(section_text(self.documents.read(rel).text, rel, SUMMARY_SECTION))
        t = self.config.tiers
        items = [
            EventItem(n, e, 0)
            for n, e in enumerate(record.events, start=1)
            if e.importance > t.important and n not in evicted
        ]
        l2 = [replace(i, tokens=self.count(i.line)) for i in items]
        chosen = self._evict(l2, record)
        if not chosen:
            return None
        return self._compact(record, chosen, self.writer, [])

    def _compact(
        self,
        record: SessionRecord,
        chosen: Sequence[EventItem],
        writer: Writer,
        problems: list[str],
    ) -> Step:
        from mdmem.distill.compact import compact, merge

        path = record.path or ""
        tokens = sum(i.tokens for i in chosen)
        part = replace(record, events=tuple(i.event for i in chosen), requests=(), responses=())
        result = compact(part.to_messages(), offline=True, count=self.count)
        wanted = [(i.event.time, i.event.action, i.event.text) for i in chosen]
        line = stamp("offline", today(), result.tokens_before, result.tokens_after)
        limit = self.config.compact.max_events

        def edit(current: str) -> str:
            now = parse_session(parse_document(path, current))
            positions = _positions(now, wanted)
            body = section_text(current, path, SUMMARY_SECTION)
            merged = merge(read_memory(body, level=3), result.memory)
            body = write_memory(
                without_stamp(body), merged, max_events=limit, today=today(), level=3
            )
            body = with_marks(body, evicted=positions)
            return set_section(current, path, SUMMARY_SECTION, line + "\n\n" + body)

        detail = f"{len(chosen)} events ({tokens:,} tokens) of {path} compacted into its summary"
        try:
            writer.write(path, edit, create=False)
        except (FileProblem, ConflictError, EditNotApplicable) as exc:
            problems.append(f"{path}: {exc}")
            return Step("compact", path, f"{detail}: not done ({exc})", len(chosen), tokens)
        return Step("compact", path, detail, len(chosen), tokens, done=True)

    def _promote(self, item: SummaryItem, writer: Writer, problems: list[str]) -> Step:
        if item.session is None:
            return self._promote_compact(item, writer, problems)
        messages = _summary_messages(item.text)
        report = self.distiller().extract_into(messages, item.session, writer)
        mark = today()

        def edit(current: str) -> str:
            body = section_text(current, item.path, SUMMARY_SECTION)
            return set_section(current, item.path, SUMMARY_SECTION, with_marks(body, promoted=mark))

        detail = (
            f"summary of {item.path} ({item.tokens:,} tokens): {report.written} memories "
            f"written to L4 ({report.count('skip')} already there)"
        )
        try:
            writer.write(item.path, edit, create=False)
        except (FileProblem, ConflictError, EditNotApplicable) as exc:
            problems.append(f"{item.path}: {exc}")
            return Step("extract", item.path, f"{detail}; not marked ({exc})", 1, item.tokens)
        return Step("extract", item.path, detail, 1, item.tokens, done=True)

    def _promote_compact(self, item: SummaryItem, writer: Writer, problems: list[str]) -> Step:
        """Minimal mode: one of the compact memory's oldest key events, extracted to L4, then
        moved to the compact memory's ``## Archive``."""
        report = self.distiller().extract_into(
            [{"role": "assistant", "content": item.text.removeprefix("- ")}], COMPACT_SOURCE, writer
        )

        def edit(current: str) -> str:
            memory = read_memory(current)
            events = [e.render() for e in memory.events]
            if item.text not in events:
                return current
            keep = len(events) - events.index(item.text) - 1
            return write_memory(current, memory, max_events=keep, today=today())

        detail = f"{item.text[:60]}: {report.written} memories written to L4, event archived"
        try:
            writer.write(COMPACT_FILE, edit, create=False)
        except (FileProblem, ConflictError, EditNotApplicable) as exc:
            problems.append(f"{COMPACT_FILE}: {exc}")
            return Step("extract", COMPACT_FILE, f"{detail}: not archived ({exc})", 1, item.tokens)
        return Step("extract", COMPACT_FILE, detail, 1, item.tokens, done=True)

    def _consolidate(self, dry_run: Writer | None) -> Step:
        report = self.consolidate(dry_run)
        return Step(
            "consolidate",
            "memory.md, learnings.md",
            report.summary(),
            report.memories,
            report.tokens_before - report.tokens_after,
            done=dry_run is None,
        )


class AutoPromote:
    """Promotion as session files are written, cheaply, never blocking the writer.

    - L2 → L3, in the writer, right after the write: a session file shorter (in characters)
      than L2's trigger (in tokens) cannot hold that many tokens, so most writes cost one
      ``len``; past it, the file is looked at again only after it grew by 1,000 characters,
      or by L2's headroom over its trigger (in tokens) if smaller, so L2 stays in its budget.
    - L3 → L4, consolidation and the session archive, when a session ends (the write that
      takes its ``status`` off ``running``: a regex over the file's head), and after a
      compaction writes ``.compact_memory.md`` or a summary (minimal mode has no session
      files): one worker thread checks what is due and does it, off the writer's path.
      Requests that come while it runs are folded into one more pass; while L3 is still past
      its trigger, the next oldest summaries go in another pass (its budget is hard).
      Consolidation runs past ``consolidate.threshold``, and again only once L4 has grown by a
      tenth of the threshold since the last one it ran (a run that merged little is not
      repeated at every session's end).
    - With ``state_dir``, passes are coordinated across processes (:mod:`.promote_passes`):
      one at a time per workspace, each session's end handled once, whichever process (the
      agent's, or the watcher seeing another process's session end) sees it first.
    """

    def __init__(
        self, config: Config, promoter: Callable[[], Promoter], state_dir: Path | None = None
    ) -> None:
        from mdmem.distill.promote_passes import SharedPasses

        self.trigger = int(config.tiers.l2_tokens * config.tiers.l2_trigger)
        headroom = config.tiers.l2_tokens - self.trigger  # a character is at most a token
        self.step = max(1, min(1_000, headroom))
        self.promoter = promoter
        self.shared = SharedPasses(state_dir) if state_dir is not None else None
        self.checked: dict[str, int] = {}
        self.ended: set[str] = set()
        self.growth = max(1, config.consolidate.threshold // 10)
        self.consolidate_above = 0
        """L4 must pass this (besides the threshold) for the next automatic consolidation."""
        self.passes = 0
        """Promotion passes this process ran (a request already handled elsewhere runs none)."""
        self.reports: list[PromoteReport] = []
        """What the worker did, newest last (the last :data:`KEEP_REPORTS`)."""
        self._lock = threading.Lock()
        self._pending = False
        self._forced = False
        self._sessions: set[str] = set()
        self._worker: threading.Thread | None = None

    def after_write(self, rel: str, text: str) -> None:
        """Called with each session file's new text, in the writer's thread."""
        size = len(text)
        if size >= self.trigger and size >= self.checked.get(rel, 0) + self.step:
            self.checked[rel] = size
            try:
                self.promoter().promote_l2(rel)
            except Exception as exc:  # promotion never breaks the session writing
                log.warning("tiers: automatic promotion of %s skipped: %s", rel, exc)
        self.seen(rel, text[:HEAD_CHARS])

    def seen(self, rel: str, head: str) -> None:
        """A session file's head (its frontmatter): its end, seen the first time, asks the
        worker for a pass. The watcher calls this for files other processes wrote."""
        if rel not in self.ended and not _RUNNING.search(head[:HEAD_CHARS]):
            self.ended.add(rel)
            self.checked.pop(rel, None)
            with self._lock:
                self._sessions.add(rel)
            self._start()

    def after_compact(self, rel: str, text: str) -> None:
        """A compaction wrote L3 (``.compact_memory.md``, or a session's summary) and its
        memory flush L4: the worker checks whether L3 → L4 or consolidation is due."""
        self.wake()

    def wake(self) -> None:
        """Check (in the worker) what promotion is due and do it."""
        with self._lock:
            self._forced = True
        self._start()

    def _start(self) -> None:
        with self._lock:
            self._pending = True
            if self._worker is not None:  # it looks at ``_pending`` before it stops
                return
            # not a daemon: a process that ends its session and exits lets the pass finish
            self._worker = threading.Thread(target=self._work, name="mdmem-promote")
            self._worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker to be idle; False if it still runs after ``timeout``."""
        while (worker := self._worker) is not None:
            worker.join(timeout)
            if worker.is_alive():
                return False
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._worker = None
                    return
                self._pending = False
                sessions, self._sessions = self._sessions, set()
                forced, self._forced = self._forced, False
            try:
                queued, l3_past = self._pass(sessions, forced)
            except Exception as exc:  # a failed pass is retried at the next session's end
                log.warning("tiers: automatic promotion skipped: %s", exc)
                continue
            if queued or l3_past:
                with self._lock:
                    self._pending = True
                    self._forced = self._forced or l3_past

    def _pass(self, sessions: set[str], forced: bool) -> tuple[bool, bool]:
        """One pass if one is due; (requests another process queued while this one held the
        pass, L3 still past its trigger). Either means another look; only the second forces
        a pass: the queue brings its own sessions and its own ``forced``, and a session end
        queued that this pass handled is no reason for another."""
        from mdmem.distill.promote_passes import Claim

        if self.shared is None:
            claim: Claim | None = Claim(frozenset(sessions), forced, self.consolidate_above)
        else:
            claim = self.shared.claim(sessions, forced)
        if claim is None:  # another process runs a pass; it takes this request after
            return False, False
        self.consolidate_above = claim.consolidate_above
        report: PromoteReport | None = None
        try:
            if claim.due:
                above = claim.consolidate_above
                report = self.promoter().run(live=False, consolidate_above=above)
                self.passes += 1
                self._note(report)
        finally:
            queued = False
            if self.shared is not None:
                queued = self.shared.release(
                    claim, handled=report is not None, consolidate_above=self.consolidate_above
                )
        return queued, report is not None and _l3_still_past(report)

    def _note(self, report: PromoteReport) -> None:
        if any(s.kind == "consolidate" for s in report.steps):
            l4 = next((t.items for t in report.after if t.name == "L4"), 0)
            self.consolidate_above = l4 + self.growth
        if report.steps:
            self.reports = [*self.reports, report][-KEEP_REPORTS:]
            log.info("tiers: %s", report.summary())


def _l3_still_past(report: PromoteReport) -> bool:
    """L3's budget is hard: while it is past its trigger and a pass promoted some, the next
    oldest go too."""
    l3 = next((t for t in report.after if t.name == "L3"), None)
    return l3 is not None and l3.tokens >= l3.trigger and _promoted_some(report)


def _promoted_some(report: PromoteReport) -> bool:
    return any(s.kind == "extract" and s.done for s in report.steps)


def _positions(record: SessionRecord, wanted: Sequence[tuple[str, str, str]]) -> list[int]:
    """Where the chosen events are in the file now (a person may have edited it)."""
    free = {n: (e.time, e.action, e.text) for n, e in enumerate(record.events, start=1)}
    found = []
    for key in wanted:
        match = next((n for n, k in free.items() if k == key), None)
        if match is None:
            raise EditNotApplicable("an event to compact was edited meanwhile")
        found.append(match)
        del free[match]
    return found


def _summary_messages(summary: str) -> list[dict[str, str]]:
    memory = read_memory(summary, level=3)
    lines = [*memory.state, *(e.render().removeprefix("- ") for e in memory.events)]
    if not lines:
        lines = [line.strip("- ") for line in summary.splitlines() if line.strip()]
    return [{"role": "assistant", "content": line} for line in lines]


def _say_evict(evict: Sequence[EventItem]) -> str:
    if not evict:
        return "below its trigger: nothing to compact"
    tokens = sum(i.tokens for i in evict)
    return f"compact {len(evict)} events ({tokens:,} tokens) into the session's summary"


def _say_promote(items: Sequence[SummaryItem]) -> str:
    if not items:
        return "below its trigger: nothing to extract"
    tokens = sum(i.tokens for i in items)
    return f"extract lasting facts of the {len(items)} oldest summaries ({tokens:,} tokens) to L4"


def _say_consolidate(run: bool, items: int, config: Config) -> str:
    threshold = config.consolidate.threshold
    if not run:
        return f"{items} of {threshold} memories: no consolidation due"
    return f"{items} memories, past {threshold}: consolidate"
