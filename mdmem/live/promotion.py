"""Automatic promotion for what other processes write, seen by the watcher after each sync.

An agent's own process promotes as it writes its sessions (``AutoPromote``). A session file
written by another process (another agent, a tool with ``tiers.auto`` off, a process killed
before its pass) is seen only by the watcher: after each sync, for the files it re-indexed,

- a session file whose ``status`` left ``running`` asks for a pass (its end; the first time
  this watcher sees it, and the shared state skips it if its own process already handled it);
- if a file of L3 changed (a session file, ``.compact_memory.md``), L3 is counted again (only
  the changed files; the others from a cache) and a pass is asked for when it is past its
  trigger.

The pass is the agent processes' own (``AutoPromote``'s worker, one at a time per workspace
across processes): nothing here writes, and the watcher's thread returns at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mdmem.distill.promote import HEAD_CHARS, AutoPromote, Promoter
from mdmem.errors import FileProblem
from mdmem.layout import COMPACT_FILE
from mdmem.memory.compact_memory import read_memory
from mdmem.memory.session_format import is_session_path, parse_session
from mdmem.memory.tiers import promoted_in, raw_summary, summaries

if TYPE_CHECKING:
    from mdmem.index.sync import SyncReport

log = logging.getLogger("mdmem")
ARCHIVE_PREFIX = ".sessions/archive/"


def after_sync(
    auto: AutoPromote | None, promoter: Callable[[], Promoter]
) -> Callable[[SyncReport], None] | None:
    """The watcher's hook, or None when automatic promotion is off (``tiers.auto``)."""
    return None if auto is None else SyncPromotion(auto, promoter)


class SyncPromotion:
    def __init__(self, auto: AutoPromote, promoter: Callable[[], Promoter]) -> None:
        self.auto = auto
        self.promoter = promoter
        self.l3: dict[str, int] | None = None
        """L3's tokens per file, counted when the file last changed."""

    def __call__(self, report: SyncReport) -> None:
        try:
            self._after(report)
        except Exception as exc:  # never stops the watcher
            log.warning("tiers: automatic promotion after a sync skipped: %s", exc)

    def _after(self, report: SyncReport) -> None:
        changed = [p for p in report.paths if p == COMPACT_FILE or is_session_path(p)]
        if not changed:
            return
        promoter = self.promoter()
        for rel in changed:
            if is_session_path(rel) and not rel.startswith(ARCHIVE_PREFIX):
                head = _head(promoter, rel)
                if head is not None:
                    self.auto.seen(rel, head)
        tokens = self._l3_tokens(promoter, changed)
        t = promoter.config.tiers
        if tokens >= t.l3_tokens * t.l3_trigger:
            self.auto.wake()

    def _l3_tokens(self, promoter: Promoter, changed: list[str]) -> int:
        if self.l3 is None:  # the first time: every file once
            self.l3 = {}
            for item in summaries(promoter.config, promoter.documents, promoter.count):
                self.l3[item.path] = self.l3.get(item.path, 0) + item.tokens
        else:
            for rel in changed:
                self.l3[rel] = _file_l3(promoter, rel)
        return sum(self.l3.values())


def _head(promoter: Promoter, rel: str) -> str | None:
    """The first characters of a file, or None when it is gone."""
    try:
        with (promoter.documents.root / rel).open(encoding="utf-8", errors="replace") as f:
            return f.read(HEAD_CHARS)
    except OSError:
        return None


def _file_l3(promoter: Promoter, rel: str) -> int:
    """The tokens one file holds in L3 now (0 when it is gone or holds none)."""
    documents, count = promoter.documents, promoter.count
    try:
        if rel == COMPACT_FILE:
            if promoter.config.mode != "minimal" or documents.or_none(rel) is None:
                return 0
            memory = read_memory(documents.read(rel).text)
            return sum(count(e.render()) for e in memory.events)
        if promoter.config.mode != "full" or not (documents.root / rel).exists():
            return 0
        record = parse_session(documents.read(rel))
    except (FileProblem, TypeError, ValueError, OverflowError):
        return 0
    if not record.summary or promoted_in(raw_summary(documents, record)):
        return 0
    return count(record.summary)
