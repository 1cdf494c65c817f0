"""Three-way merge of a file's lines: a person's save and a program write, both kept.

Memory files are lists of lines (an entry is a line or a few), so a line merge is the right
grain. Regions only one side changed take that side; a region both changed the same way is
taken once. Where both sides *inserted* at the same place (a person appended a line while the
program appended an entry), both insertions are kept. Where both sides changed the same
existing lines differently, the person's version wins and the merge reports a conflict, so
the caller can keep the program's version somewhere a person can find it.

Written on :mod:`difflib` (the well-known ``merge3`` package is GPL, which this project is not).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

_ENTRY_ID = re.compile(r"<!--\s*mdmem\b[^>]*?\bid=([\w-]+)")
"""An entry's id in its metadata comment: the same entry, whatever its text now."""
_KEY = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*)?([A-Za-z][\w .-]{0,40}?)(?:\*\*)?[ \t]*:(?:[ \t]|$)"
)
"""``key: value`` lines (frontmatter, ``- **db**: …`` world facts, ``Phase: …``)."""


@dataclass(frozen=True)
class Merged:
    text: str
    conflicts: int
    """Regions both sides changed differently (the person's side was taken)."""
    kept: float = 1.0
    """Share of the base's lines the person's version kept: near 1 for an edited copy, low
    for a file replaced by something else (a ``git checkout``)."""


def merge_text(base: str, program: str, person: str) -> Merged:
    """Merge ``program``'s and ``person``'s changes to ``base``; the person wins conflicts."""
    if program in (person, base):
        return Merged(person, 0)
    if person == base:
        return Merged(program, 0)
    base_lines, person_lines = _lines(base), _lines(person)
    regions, kept = _sync_regions(base_lines, _lines(program), person_lines)
    their_ids = set(_ENTRY_ID.findall(person))
    lines, conflicts = _merge_regions(base_lines, _lines(program), person_lines, regions, their_ids)
    return Merged("".join(lines), conflicts, kept)


def _merge_regions(
    base: Sequence[str],
    program: Sequence[str],
    person: Sequence[str],
    regions: list[tuple[int, int, int, int]],
    their_ids: set[str],
) -> tuple[list[str], int]:
    out: list[str] = []
    conflicts = 0
    b0 = p0 = q0 = 0  # start of the current unstable region in base, program, person
    for b1, p1, q1, size in regions:
        region_base = base[b0:b1]
        mine, theirs = program[p0:p1], person[q0:q1]
        if mine in (theirs, region_base):
            out += theirs
        elif theirs == region_base:
            out += mine
        elif not region_base:  # both inserted here: keep both
            out += _both(mine, theirs, their_ids)
        else:
            out += theirs
            conflicts += 1
        out += base[b1 : b1 + size]
        b0, p0, q0 = b1 + size, p1 + size, q1 + size
    return out, conflicts


def _both(mine: Sequence[str], theirs: Sequence[str], their_ids: set[str]) -> list[str]:
    """Two insertions at one place: both are kept, except a program line the person's version
    holds in another form: the same entry id anywhere in it (for an entry with an id), else
    here the same line or the same ``key:`` (a frontmatter key, a ``**world fact**:``)."""
    if _contains(theirs, mine):
        return list(theirs)
    if _contains(mine, theirs):
        return list(mine)
    here = {line.strip() for line in theirs if line.strip()}
    keys = {k for line in theirs if (k := _key(line))}
    left = [line for line in mine if not _edited(line, here, keys, their_ids)]
    if not any(line.strip() for line in left):
        return list(theirs)  # nothing of the program's is missing but spacing
    return [*left, *theirs]


def _edited(line: str, here: set[str], keys: set[str], their_ids: set[str]) -> bool:
    ids = _ENTRY_ID.findall(line)
    if ids:  # an entry the program wrote is known by its id alone
        return bool(their_ids.intersection(ids))
    return line.strip() in here or (_key(line) or "") in keys


def _key(line: str) -> str | None:
    match = _KEY.match(line)
    return match.group(1).strip().casefold() if match else None


def _contains(outer: Sequence[str], inner: Sequence[str]) -> bool:
    n = len(inner)
    return any(list(outer[i : i + n]) == list(inner) for i in range(len(outer) - n + 1))


def _sync_regions(
    base: Sequence[str], a: Sequence[str], b: Sequence[str]
) -> tuple[list[tuple[int, int, int, int]], float]:
    """Runs of base lines that both sides kept, as (base start, a start, b start, length),
    ending with a zero-length sentinel at the ends of all three; and the share of base lines
    ``b`` kept."""
    ma = SequenceMatcher(None, base, a, autojunk=False).get_matching_blocks()
    mb = SequenceMatcher(None, base, b, autojunk=False).get_matching_blocks()
    out: list[tuple[int, int, int, int]] = []
    i = j = 0
    while i < len(ma) and j < len(mb):
        a_base, a_at, a_len = ma[i]
        b_base, b_at, b_len = mb[j]
        start = max(a_base, b_base)
        end = min(a_base + a_len, b_base + b_len)
        if start < end:
            out.append((start, a_at + start - a_base, b_at + start - b_base, end - start))
        if a_base + a_len < b_base + b_len:
            i += 1
        else:
            j += 1
    out.append((len(base), len(a), len(b), 0))
    kept = sum(size for _, _, size in mb) / len(base) if base else 1.0
    return out, kept


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)
