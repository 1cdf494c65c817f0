"""Context building: the memory section of a system prompt, within a token budget.

Each source (task, sessions, world, knowledge, retrieved, compact) is a list of units (one
line or entry each) in priority order. Every source gets a share of the budget; a source that
needs less than its share gives the rest to the others. A source that does not fit keeps its
most important units and says what it left out, in the text and in ``Context.sources``:
``[... 1,234 tokens of world_state.md omitted]``. The result never exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mdmem.tokens import TokenCounter


@dataclass(frozen=True)
class Unit:
    """One line or entry of a source: dropped whole or kept whole."""

    text: str
    group: str = ""
    order: int = 0
    """Position when rendered (units are given in priority order, rendered in this order)."""


@dataclass(frozen=True)
class Source:
    """One part of the context (a file or a kind of memory) with its units, in the order they
    are packed."""

    name: str
    title: str
    label: str
    """What an omission marker names: ``world_state.md``, ``.sessions/`` …"""
    units: tuple[Unit, ...]
    groups: tuple[str, ...] = ()
    """Group headings in the order they are rendered."""
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceUsage:
    """What one source took of the budget, and which files it came from (the context's
    report)."""

    name: str
    files: tuple[str, ...]
    share: int
    """Tokens this source was allotted."""
    used: int
    """Tokens of its text in the context (heading and omission marker included)."""
    omitted: int
    """Tokens of the units left out."""
    units: int
    omitted_units: int

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "files": list(self.files)}


@dataclass(frozen=True)
class Context:
    """``text`` goes into the system prompt; ``sources`` says what each source used and lost."""

    text: str
    tokens: int
    budget: int
    model: str | None
    mode: str
    query: str | None
    sources: tuple[SourceUsage, ...] = field(default=())
    problems: tuple[str, ...] = ()
    """What the context lacks and why (a search that could not run: the retrieved part is
    missing, the files' own sections are whole)."""

    def __str__(self) -> str:
        return self.text

    @property
    def omitted(self) -> int:
        return sum(s.omitted for s in self.sources)

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "tokens": self.tokens,
            "budget": self.budget,
            "model": self.model,
            "mode": self.mode,
            "query": self.query,
            "omitted": self.omitted,
            "sources": [s.to_dict() for s in self.sources],
            "problems": list(self.problems),
        }


# ---- packing ---------------------------------------------------------------------------------


def pack(
    sources: Sequence[Source],
    shares: Mapping[str, float],
    budget: int,
    count: TokenCounter,
) -> tuple[str, tuple[SourceUsage, ...]]:
    """Fit ``sources`` into ``budget`` tokens by share; returns the text and the usage."""
    if budget < 0:
        raise ValueError(f"budget must be >= 0 tokens, got {budget}")
    present = [s for s in sources if s.units]
    unit_cost = {id(s): [count(u.text) + 1 for u in s.units] for s in present}
    need = {id(s): _cost(s, len(s.units), count, omitted=0) for s in present}
    sep = count("\n\n") if len(present) > 1 else 0
    allot = _allot(present, shares, need, budget - sep * max(0, len(present) - 1))

    def fit(x: Source) -> int:
        if need[id(x)] <= allot[id(x)]:
            return len(x.units)  # all of it, and no marker to make room for
        return _fit(x, allot[id(x)], unit_cost[id(x)], count)

    kept = {id(s): fit(s) for s in present}
    # slack left by whole-unit cuts goes to the sources that were cut, by their shares
    for _ in range(3):
        cut = [x for x in present if kept[id(x)] < len(x.units)]
        cost = {id(x): _cost(x, kept[id(x)], count, _omitted(x, kept, unit_cost)) for x in present}
        slack = budget - sep * max(0, len(present) - 1) - sum(cost.values())
        if slack <= 0 or not cut:
            break
        more = _allot(cut, shares, {id(x): need[id(x)] - cost[id(x)] for x in cut}, slack)
        grown = False
        for x in cut:
            allot[id(x)] = cost[id(x)] + more[id(x)]
            fitted = fit(x)
            grown = grown or fitted > kept[id(x)]
            kept[id(x)] = max(kept[id(x)], fitted)
        if not grown:
            break
    while True:
        parts = [_render(s, kept[id(s)], _omitted(s, kept, unit_cost)) for s in present]
        text = "\n\n".join(p for p in parts if p)
        total = count(text)
        if total <= budget:
            break
        # tokenizers are not additive at the seams: shave the largest source by one unit
        victim = max(
            (s for s in present if kept[id(s)] > 0 or _omitted(s, kept, unit_cost)),
            key=lambda s: count(_render(s, kept[id(s)], _omitted(s, kept, unit_cost))),
        )
        if kept[id(victim)] > 0:
            kept[id(victim)] -= 1
        else:
            kept[id(victim)] = -1  # not even its marker fits: reported in sources only
    usage = []
    for s in present:
        n = max(kept[id(s)], 0)
        omitted = sum(unit_cost[id(s)][n:])
        rendered = _render(s, kept[id(s)], _omitted(s, kept, unit_cost))
        usage.append(
            SourceUsage(
                s.name,
                s.files,
                int(allot[id(s)]),
                count(rendered) if rendered else 0,
                omitted,
                n,
                len(s.units) - n,
            )
        )
    return text, tuple(usage)


def _allot(
    sources: list[Source], shares: Mapping[str, float], need: dict[int, int], budget: int
) -> dict[int, int]:
    """Water-filling: each source's share of what is left; surplus flows to the rest."""
    allot: dict[int, int] = {}
    active = list(sources)
    left = max(0, budget)
    while active:
        weights = {id(s): max(shares.get(s.name, 0.0), 0.0) for s in active}
        total = sum(weights.values())
        if total <= 0:
            weights = {id(s): 1.0 for s in active}
            total = float(len(active))
        satisfied = [s for s in active if need[id(s)] <= left * weights[id(s)] / total]
        if not satisfied:
            for s in active:
                allot[id(s)] = int(left * weights[id(s)] / total)
            break
        for s in satisfied:
            allot[id(s)] = need[id(s)]
            left -= need[id(s)]
            active.remove(s)
    return allot


def _fit(source: Source, allot: int, costs: list[int], count: TokenCounter) -> int:
    """How many units (in priority order) fit in ``allot`` with the heading and marker."""
    n = 0
    used = count(f"## {source.title}") + 1
    group_cost = count("### x") + 1 if source.groups else 0
    marker = count(marker_text(10**6, source.label)) + 1
    seen_groups: set[str] = set()
    while n < len(source.units):
        unit = source.units[n]
        extra = costs[n] + (group_cost if unit.group and unit.group not in seen_groups else 0)
        rest = marker if n + 1 < len(source.units) else 0
        if used + extra + rest > allot:
            break
        used += extra
        seen_groups.add(unit.group)
        n += 1
    if n == 0 and used + marker > allot:
        return -1  # not even its heading and marker fit: reported in the usage only
    return n


def _omitted(source: Source, kept: Mapping[int, int], costs: Mapping[int, list[int]]) -> int:
    return sum(costs[id(source)][max(kept[id(source)], 0) :])


def _cost(source: Source, n: int, count: TokenCounter, omitted: int) -> int:
    return count(_render(source, n, omitted))


def _render(source: Source, n: int, omitted: int) -> str:
    """The source's text with its first ``n`` units; ``n == -1``: nothing at all."""
    if n < 0:
        return ""
    chosen = sorted(source.units[:n], key=lambda u: u.order)
    lines = [f"## {source.title}"]
    lines += [u.text for u in chosen if u.group not in source.groups]
    for group in source.groups:
        members = [u.text for u in chosen if u.group == group]
        if members:
            lines += [f"### {group}", *members]
    if omitted:
        lines.append(marker_text(omitted, source.label))
    return "\n".join(lines)


def marker_text(tokens: int, label: str) -> str:
    return f"[... {tokens:,} tokens of {label} omitted]"


# ---- sources ---------------------------------------------------------------------------------
