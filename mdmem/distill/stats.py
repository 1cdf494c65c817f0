"""What the memory holds and how it is used (``ws.lifecycle.stats()``, ``mdmem stats``): counts
from the files, access counts and search latency from the index's cheap records, and the last
consolidation's report. Reading it changes nothing."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mdmem.distill.consolidate import REPORT_DIR
from mdmem.index.latency import recent
from mdmem.markdown.entries import MEMORY_TYPES, Entry
from mdmem.memory.documents import Documents
from mdmem.memory.restore import ARCHIVED_BY, CONSOLIDATED_INTO

SHOWN = 5
"""How many most- and least-returned memories are listed."""


@dataclass(frozen=True)
class Accessed:
    id: str
    path: str
    text: str
    count: int | None
    """Times returned by a search; None when the index has no count (never returned since it
    was built, or another machine)."""


@dataclass(frozen=True)
class Stats:
    by_type: dict[str, int]
    """Active entries of every file, by type."""
    by_file: dict[str, int]
    memories: int
    """Active lasting memories (preference, fact, pattern, skill)."""
    average_importance: float | None
    archived: dict[str, int]
    """Archived entries by why: ``consolidated``, ``by_importance``, ``superseded``, ``other``."""
    most_accessed: tuple[Accessed, ...]
    least_accessed: tuple[Accessed, ...]
    searches: int
    """Recent searches timed (at most 1,000)."""
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    last_consolidation: dict[str, object] | None
    """The newest report in ``.mdmem/consolidation/`` (its summary, when and where)."""
    tiers: tuple[dict[str, object], ...] = ()
    """Tokens, budget and items per memory tier, L1 to L4 (``ws.lifecycle.tiers()``)."""

    def to_dict(self) -> dict[str, object]:
        out = dict(vars(self))
        out["most_accessed"] = [vars(a) for a in self.most_accessed]
        out["least_accessed"] = [vars(a) for a in self.least_accessed]
        out["tiers"] = list(self.tiers)
        return out


def collect(
    documents: Documents,
    access_counts: Callable[[Sequence[str]], dict[str, int]],
    state_dir: Path,
    tiers: Sequence[dict[str, object]] = (),
) -> Stats:
    entries = list(documents.all().entries(include_archived=True))
    active = [e for e in entries if not e.archived]
    lasting = [e for e in active if e.type in MEMORY_TYPES]
    try:
        counts = access_counts([e.id for e in lasting])
    except Exception:  # no usable index: every count unknown
        counts = {}
    ranked = sorted(lasting, key=lambda e: (-counts.get(e.id, 0), e.path, e.start_line))
    times = recent(state_dir)
    return Stats(
        by_type=dict(Counter(e.type for e in active).most_common()),
        by_file=dict(Counter(e.path for e in active).most_common()),
        memories=len(lasting),
        average_importance=(
            round(statistics.fmean(e.importance for e in lasting), 3) if lasting else None
        ),
        archived=dict(Counter(_why(e) for e in entries if e.archived).most_common()),
        most_accessed=tuple(_accessed(e, counts) for e in ranked[:SHOWN] if e.id in counts),
        least_accessed=tuple(_accessed(e, counts) for e in ranked[::-1][:SHOWN]),
        searches=len(times),
        latency_p50_ms=_quantile(times, 0.5),
        latency_p99_ms=_quantile(times, 0.99),
        last_consolidation=last_report(state_dir),
        tiers=tuple(tiers),
    )


def last_report(state_dir: Path) -> dict[str, object] | None:
    """The newest consolidation report (an unreadable one is skipped for the one before)."""
    folder = state_dir / REPORT_DIR
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json"), reverse=True):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            keys = ("when", "engine", "summary", "merged", "written", "tokens_before")
            return {
                **{k: data.get(k) for k in keys},
                "tokens_after": data.get("tokens_after"),
                "report": str(path.relative_to(state_dir.parent)),
            }
    return None


def _why(entry: Entry) -> str:
    if CONSOLIDATED_INTO in entry.meta:
        return "consolidated"
    if ARCHIVED_BY in entry.meta:
        return "by_importance"
    if "superseded_by" in entry.meta:
        return "superseded"
    return "other"


def _accessed(entry: Entry, counts: dict[str, int]) -> Accessed:
    return Accessed(entry.id, entry.path, entry.text[:120], counts.get(entry.id))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)
