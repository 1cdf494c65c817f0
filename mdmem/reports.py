"""What compaction and extraction did (or, with a dry run, would do): for people and programs."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MemoryChange:
    """One extracted memory and what became of it."""

    action: str
    """``add``, ``skip``, ``replace``, ``merge`` or ``keep_both``."""
    type: str
    text: str
    importance: float
    reason: str
    evidence: str = ""
    entry_id: str | None = None
    """The entry written (None when skipped)."""
    path: str | None = None
    replaced: str | None = None
    """The id of the entry it superseded (replace, merge) or repeats (skip)."""

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


@dataclass(frozen=True)
class ExtractReport:
    """What an extraction changed in memory, from which source and by which engine."""

    source: str | None
    engine: str
    changes: tuple[MemoryChange, ...]
    problems: tuple[str, ...] = ()
    """What was wrong with the model's replies (reported, never raised)."""
    cost: float | None = None
    dry_run: bool = False
    diff: str = ""
    """Unified diff of the files changed (or that would change, with dry_run)."""

    def count(self, action: str) -> int:
        return sum(change.action == action for change in self.changes)

    @property
    def written(self) -> int:
        return sum(change.action != "skip" for change in self.changes)

    def summary(self) -> str:
        if not self.changes:
            return f"no lasting memories found ({self.engine})"
        parts = [f"{self.count(a)} {a}" for a in ("add", "replace", "merge", "keep_both", "skip")]
        verb = "would change" if self.dry_run else "changed"
        return (
            f"{len(self.changes)} memories extracted ({self.engine}): "
            + ", ".join(p for p in parts if not p.startswith("0 "))
            + f"; {self.written} {verb} in the files"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "engine": self.engine,
            "changes": [c.to_dict() for c in self.changes],
            "problems": list(self.problems),
            "cost": self.cost,
            "dry_run": self.dry_run,
            "diff": self.diff,
        }


@dataclass(frozen=True)
class CompactReport:
    """What a compaction did: its engine, tokens before and after, and where it wrote."""

    engine: str
    tokens_before: int
    tokens_after: int
    ratio: float
    path: str | None
    """Where the compact memory went: ``.compact_memory.md`` or the session's file."""
    text: str
    """The compact memory as written (merged with what was there)."""
    cost: float | None = None
    dry_run: bool = False
    diff: str = ""
    extraction: ExtractReport | None = field(default=None)
    """The memory flush that ran first (None when turned off)."""

    def summary(self) -> str:
        verb = "would write" if self.dry_run else "wrote"
        cost = f", cost ${self.cost:.4f}" if self.cost else ""
        return (
            f"compacted {self.tokens_before:,} → {self.tokens_after:,} tokens "
            f"(ratio {self.ratio:.2f}, {self.engine} engine{cost}); {verb} {self.path}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": self.ratio,
            "cost": self.cost,
            "path": self.path,
            "text": self.text,
            "dry_run": self.dry_run,
            "diff": self.diff,
            "extraction": self.extraction.to_dict() if self.extraction else None,
        }


def unified_diff(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """One unified diff over every file whose text changed."""
    out: list[str] = []
    for path in sorted(after):
        old, new = before.get(path, ""), after[path]
        if old == new:
            continue
        out += difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{path}" if path in before else "/dev/null",
            tofile=f"b/{path}",
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
