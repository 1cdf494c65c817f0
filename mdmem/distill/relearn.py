"""Extracting a session again must teach nothing new, and an older session never undoes what
a newer one taught: what was superseded or merged since stays in the archive, and an old
session's stale value never replaces the newer one. Sessions are ordered by their ids
(``YYYYMMDD_HHMMSS_…``: when they started)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from mdmem.markdown.entries import Entry

if TYPE_CHECKING:
    from mdmem.distill.extract import Candidate, Decision

_STARTED = re.compile(r"^\d{8}_\d{6}")


def newer(session: str | None, than: str | None) -> bool:
    """Did ``session`` start after ``than``? Unknown (no session, or an id without its start
    time): no."""
    a, b = _STARTED.match(session or ""), _STARTED.match(than or "")
    return a is not None and b is not None and a.group(0) > b.group(0)


def not_learned_before(
    candidates: list[Candidate],
    entries: Sequence[Entry],
    source: str | None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    threshold: float = 0.95,
) -> list[Candidate]:
    """``candidates`` of session ``source`` without those that repeat an archived memory (the
    same text, or, with ``embed``, cosine ≥ ``threshold``): one consolidation merged (its
    content lives on in the merged memory), or one superseded by a memory of a session no
    older than ``source`` (a value said again later, in a newer session, is news)."""
    from mdmem.distill.extract import text_hash

    if source is None:
        return candidates  # a transcript of no session: nothing to order it by
    by_id = {e.id: e for e in entries}
    gone = [e for e in entries if e.archived and _settled(e, source, by_id)]
    if not gone or not candidates:
        return candidates
    hashes = {text_hash(e.text) for e in gone}
    kept = [c for c in candidates if text_hash(c.text) not in hashes]
    if embed is None or not kept:
        return kept
    ours = np.asarray(embed([c.text for c in kept]), dtype=np.float32)
    theirs = np.asarray(embed([e.text for e in gone]), dtype=np.float32)
    best = (ours @ theirs.T).max(axis=1)
    return [c for c, sim in zip(kept, best, strict=True) if float(sim) < threshold]


def newest_wins(decisions: list[Decision], source: str | None) -> list[Decision]:
    """A replace or merge of a memory a newer session taught becomes a skip: the older
    session's statement is the stale one."""
    out = []
    for d in decisions:
        existing = d.existing
        older = existing is not None and newer(existing.source, source)
        if d.action in ("replace", "merge") and existing is not None and older:
            why = f"{d.reason}; {existing.id} comes from a newer session: kept"
            d = replace(d, action="skip", text=d.candidate.text, reason=why)
        out.append(d)
    return out


def _settled(entry: Entry, source: str | None, by_id: dict[str, Entry]) -> bool:
    """An archived memory a candidate of ``source`` must not bring back: merged, or
    superseded by a memory of a session no older than ``source``."""
    if "consolidated_into" in entry.meta:
        return True
    if "superseded_by" not in entry.meta:
        return False
    replacer = by_id.get(entry.meta["superseded_by"])
    return not newer(source, replacer.source if replacer is not None else None)
