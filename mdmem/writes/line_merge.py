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

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

_ENTRY_ID = re.compile(r"<!--\s*mdmem\b[^>]*?\bid=([\w-]+)")
"""An entry's id in its metadata comment: the same entry, whatever its text now."""
_ARCHIVED = re.compile(r"<!--\s*mdmem\b[^>]*?\bsuperseded=")
"""An entry's metadata once it was superseded (moved to the archive)."""
_KEY = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*)?([A-Za-z][\w .-]{0,40}?)(?:\*\*)?[ \t]*:(?:[ \t]|$)"
)
"""``key: value`` lines (frontmatter, ``- **db**: …`` world facts, ``Phase: …``)."""


@dataclass(frozen=True)
class Merged:
    """The three-way merge's text, and how many regions clashed."""

    text: str
    conflicts: int
    """Regions both sides changed differently (the person's side was taken)."""


Newer = Callable[[Sequence[str], Sequence[str]], bool]
"""Whether the program's lines are newer program lines than the person-side lines they clash
with (the "person" side is then itself program writes, made on a person's stale save)."""


def merge_text(base: str, program: str, person: str, *, newer: Newer | None = None) -> Merged:
    """Merge ``program``'s and ``person``'s changes to ``base``; the person wins conflicts,
    except where ``newer`` says the program's lines are the newer program lines."""
    if program in (person, base):
        return Merged(person, 0)
    if person == base:
        return Merged(program, 0)
    base_lines, person_lines = _lines(base), _lines(person)
    regions = _sync_regions(base_lines, _lines(program), person_lines)
    their_ids = _edited_ids(base_lines, person_lines)
    lines, conflicts = _merge_regions(base_lines, _lines(program), person_lines, regions, their_ids)
    if newer is not None:
        lines = _upgraded(lines, _lines(program), newer)
    return Merged("".join(lines), conflicts)


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
        elif (woven := _insert_into(region_base, mine, theirs, their_ids)) is not None:
            out += woven  # the program only added lines here: they go into the person's version
        elif (woven := _insert_into(region_base, theirs, mine, None)) is not None:
            out += woven  # the person only added lines here: they go into the program's version
        else:  # each side's changes in place; where both changed the same lines, theirs
            woven, clashes = _side_by_side(region_base, mine, theirs, their_ids)
            out += woven
            conflicts += clashes
        out += base[b1 : b1 + size]
        b0, p0, q0 = b1 + size, p1 + size, q1 + size
    return out, conflicts


def _side_by_side(
    base: Sequence[str], mine: Sequence[str], theirs: Sequence[str], their_ids: set[str]
) -> tuple[list[str], int]:
    """Both sides changed this region (one region to a plain three-way merge when the changes
    are next to each other: a person fixed one entry, the program updated the next): each
    side's changes in place, and where both changed the same lines, the person's alone; with
    the number of such clashes. Insertions of both at one place are kept as :func:`_both`
    keeps them; a program line the person holds in another form is not inserted again. Both
    replacing the same lines with runs that begin or end alike (the same entries, then each
    its own) is no clash: what each added besides is kept, as insertions are."""
    others = _hunks(base, theirs)
    ours = [h for h in _hunks(base, mine) if h not in others]  # the same change made by both
    kept_ours, clashes = [], 0
    for a0, a1, lines in ours:
        over = [i for i, (b0, b1, _) in enumerate(others) if a0 < b1 and b0 < a1]
        woven = None
        if len(over) == 1 and others[over[0]][:2] == (a0, a1):
            woven = _alike(lines, others[over[0]][2], their_ids)
        if not over:
            kept_ours.append((a0, a1, lines))
        elif woven is not None:
            others[over[0]] = (a0, a1, woven)
        else:
            clashes += 1
    ours = kept_ours
    here = {line.strip() for line in theirs if line.strip()}
    keys = {k for line in theirs if (k := _key(line))}
    inserted = {b0: lines for b0, b1, lines in others if b0 == b1}
    out: list[str] = []
    at = 0
    for start, end, side, lines in sorted(
        [(a0, a1, 0, lines) for a0, a1, lines in ours]
        + [(b0, b1, 1, lines) for b0, b1, lines in others]
    ):
        out += base[at:start]
        at = end
        if start == end and side == 0 and start in inserted:
            out += _both(lines, inserted.pop(start), their_ids)
        elif start == end and side == 0:
            out += [line for line in lines if not _edited(line, here, keys, their_ids)]
        elif not (start == end and side == 1 and start not in inserted):
            out += lines
    out += base[at:]
    return out, clashes


def _upgraded(lines: list[str], program: Sequence[str], newer: Newer) -> list[str]:
    """``lines`` with each entry the program holds in a newer form (by ``newer``) in that
    form: wherever the merge kept the other side's form of it (a clash of the same lines, an
    insertion not made twice, a move). Entries the program does not hold, and any form that is
    not an older program line (a person's edit), stay as they are; so does an entry archived
    on one side and live on the other (where it stands is not one line's to decide)."""
    ours: dict[str, str] = {}
    for line in program:
        if ids := _ENTRY_ID.findall(line):
            ours.setdefault(ids[0], line)

    def older(line: str) -> str | None:
        """Our form of the entry ``line`` is an older program form of, if it is."""
        ids = _ENTRY_ID.findall(line)
        mine = ours.get(ids[0]) if ids else None
        if mine is None or mine == line:
            return None
        same_place = bool(_ARCHIVED.search(mine)) == bool(_ARCHIVED.search(line))
        return mine if same_place and newer([mine], [line]) else None

    out: list[str] = []
    held = set(lines)
    for line in lines:
        mine = older(line)
        if mine is None:
            out.append(line)
        elif mine not in held:  # in its place; where the merge kept ours too, ours alone
            out.append(mine)
            held.add(mine)
    return out


def _alike(mine: Sequence[str], theirs: Sequence[str], their_ids: set[str]) -> list[str] | None:
    """Two runs that replaced the same lines, woven when they begin or end with the same
    (non-blank) lines: those once, and between them what each added besides, as
    :func:`_both` keeps insertions of both at one place; None when they share neither end."""
    n = min(len(mine), len(theirs))
    head = next((k for k in range(n) if mine[k] != theirs[k]), n)
    tail = next((k for k in range(n - head) if mine[-1 - k] != theirs[-1 - k]), n - head)
    same = [*mine[:head], *mine[len(mine) - tail :]]
    if not any(line.strip() for line in same):
        return None
    middle = _both(mine[head : len(mine) - tail], theirs[head : len(theirs) - tail], their_ids)
    return [*mine[:head], *middle, *mine[len(mine) - tail :]]


def _hunks(base: Sequence[str], side: Sequence[str]) -> list[tuple[int, int, list[str]]]:
    """What ``side`` did to ``base``: (start, end, new lines) for each run of base lines it
    replaced (an insertion: start == end); a run replaced by as many lines is taken line by
    line (the lines of a memory file are entries of their own)."""
    out = []
    i = j = 0
    for bi, sj, size in matching_blocks(base, side):
        if bi - i == sj - j:  # as many lines for as many: each line replaced by its own
            out += [(i + k, i + k + 1, [side[j + k]]) for k in range(bi - i)]
        elif bi > i or sj > j:
            out += _by_entry(i, base[i:bi], side[j:sj]) or [(i, bi, list(side[j:sj]))]
        i, j = bi + size, sj + size
    return out


def _by_entry(
    at: int, old: Sequence[str], new: Sequence[str]
) -> list[tuple[int, int, list[str]]] | None:
    """A run of ``old`` lines (from base line ``at``) replaced by a different number of
    ``new`` ones, as each old entry replaced by its new form (the same id, or ``key:``) and
    the rest inserted around them: an update next to a remember is two changes, and a clash
    with the first must not drop the second (issue 39 D1). An old entry the new lines no
    longer hold is removed on its own (a supersede moves it to the archive, next to updates of
    its neighbours: one clash with a person's edit of one neighbour lost them all). None
    unless every other old line has its new form, in order, and one has (a run none of whose
    entries is left, a consolidation's originals replaced by their merge, is one change)."""
    if not old:
        return None
    out: list[tuple[int, int, list[str]]] = []
    j = 0
    for k, line in enumerate(old):
        ident = _identity(line)
        m = next((m for m in range(j, len(new)) if ident and _identity(new[m]) == ident), None)
        if m is None and ident and all(_identity(other) != ident for other in new):
            out.append((at + k, at + k + 1, []))  # gone here (superseded to the archive)
            continue
        if m is None:
            return None
        if m > j:
            out.append((at + k, at + k, list(new[j:m])))
        out.append((at + k, at + k + 1, [new[m]]))
        j = m + 1
    if j == 0:
        return None
    if j < len(new):
        out.append((at + len(old), at + len(old), list(new[j:])))
    return out


def _identity(line: str) -> str | None:
    ids = _ENTRY_ID.findall(line)
    if ids:
        return "id " + ids[0]
    key = _key(line)
    return None if key is None else "key " + key


def _edited_ids(base: Sequence[str], person: Sequence[str]) -> set[str]:
    """Ids of entries the person's version holds otherwise than the base: edited by hand, or
    new to the base (written after it). A program line with such an id is theirs to keep."""
    in_base = {i: line for line in base for i in _ENTRY_ID.findall(line)}
    return {i for line in person for i in _ENTRY_ID.findall(line) if in_base.get(i) != line}


def _insert_into(
    base: Sequence[str], mine: Sequence[str], theirs: Sequence[str], their_ids: set[str] | None
) -> list[str] | None:
    """When ``mine`` only inserted lines into ``base`` (whatever ``theirs`` did to it), those
    lines go into ``theirs`` at the same places: after the nearest base line before them that
    ``theirs`` kept (else before the nearest one after them). None when ``mine`` also changed
    or removed base lines. With ``their_ids`` (``mine`` is the program's), a program line the
    person holds in another form is left out; without (``mine`` is the person's), all go in."""
    gaps = _gaps(base, mine)
    if gaps is None:
        return None
    where: dict[int, int] = {}  # base line -> its index in theirs
    for i, j, size in matching_blocks(base, theirs)[:-1]:
        for t in range(size):
            where[i + t] = j + t
    here = {line.strip() for line in theirs if line.strip()}
    keys = {k for line in theirs if (k := _key(line))}
    out = list(theirs)
    for g in range(len(gaps) - 1, -1, -1):  # from the end: earlier places keep their index
        lines = [
            line
            for line in gaps[g]
            if their_ids is None or not _edited(line, here, keys, their_ids)
        ]
        if not any(line.strip() for line in lines):
            continue
        before = next((where[b] + 1 for b in range(g - 1, -1, -1) if b in where), None)
        at = before
        if at is None:
            at = next((where[b] for b in range(g, len(base)) if b in where), len(theirs))
        out[at:at] = lines
    return out


def _gaps(base: Sequence[str], side: Sequence[str]) -> list[list[str]] | None:
    """The lines ``side`` inserted before each line of ``base`` and after the last, or None
    when ``side`` is not ``base`` with lines inserted."""
    gaps: list[list[str]] = [[]]
    at = 0
    for line in side:
        if at < len(base) and line == base[at]:
            at += 1
            gaps.append([])
        else:
            gaps[-1].append(line)
    return gaps if at == len(base) else None


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
) -> list[tuple[int, int, int, int]]:
    """Runs of base lines that both sides kept, as (base start, a start, b start, length),
    ending with a zero-length sentinel at the ends of all three."""
    ma, mb = matching_blocks(base, a), matching_blocks(base, b)
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
    return out


def kept(base: str, other: str) -> float:
    """Share of ``base``'s lines ``other`` kept (1.0 for an empty base)."""
    base_lines = _lines(base)
    if not base_lines:
        return 1.0
    blocks = matching_blocks(base_lines, _lines(other))
    return sum(size for _, _, size in blocks) / len(base_lines)


def matching_blocks(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int]]:
    """Runs of equal lines ``(i, j, size)`` of a shortest edit script from ``a`` to ``b``,
    ending with ``(len(a), len(b), 0)`` (like difflib's, which is not shortest: with
    repeated lines it can pair them up so that an insertion looks like a change)."""
    pre = 0
    while pre < len(a) and pre < len(b) and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < len(a) - pre and suf < len(b) - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    mid_a, mid_b = a[pre : len(a) - suf], b[pre : len(b) - suf]
    middle = _myers(mid_a, mid_b)
    if middle is None:  # very different: a good-enough alignment, fast
        middle = [(m.a, m.b, m.size) for m in SequenceMatcher(None, mid_a, mid_b, autojunk=False)
                  .get_matching_blocks()[:-1]]  # fmt: skip
    blocks = [(0, 0, pre)] if pre else []
    blocks += [(i + pre, j + pre, size) for i, j, size in middle]
    if suf:
        blocks.append((len(a) - suf, len(b) - suf, suf))
    merged = _joined(blocks)
    merged.append((len(a), len(b), 0))
    return _matched_early(a, b, merged)


def _joined(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Adjacent runs as one, empty ones dropped."""
    out: list[tuple[int, int, int]] = []
    for i, j, size in blocks:
        if out and out[-1][0] + out[-1][2] == i and out[-1][1] + out[-1][2] == j:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + size)
        elif size:
            out.append((i, j, size))
    return out


def _matched_early(
    a: Sequence[str], b: Sequence[str], blocks: list[tuple[int, int, int]]
) -> list[tuple[int, int, int]]:
    """The same matched lines, each paired with the earliest equal line the order allows: of
    the equally short edit scripts, the one whose insertions and deletions come last (diff's
    slider, line by line). Two diffs from one base then place the same added lines at the
    same place whatever else each side changed: a pool section appended by a program and
    found in a person's copy that also has a note at the top, both sections ending in the
    same value's lines, was read as inserted in two places, and a merge kept it twice."""
    pairs = [(i + t, j + t) for i, j, size in blocks for t in range(size)]
    if not pairs:
        return blocks
    in_a: dict[str, list[int]] = {}
    in_b: dict[str, list[int]] = {}
    for index, line in enumerate(a):
        in_a.setdefault(line, []).append(index)
    for index, line in enumerate(b):
        in_b.setdefault(line, []).append(index)
    changed = True
    while changed:
        changed = False
        prev_i = prev_j = -1
        for n, (i, j) in enumerate(pairs):
            k = _first_between(in_b[a[i]], prev_j, j)  # a[i] inserted before: match it there
            if k is not None:
                j, changed = k, True
            k = _first_between(in_a[b[j]], prev_i, i)  # the same for a deleted line
            if k is not None:
                i, changed = k, True
            pairs[n] = (i, j)
            prev_i, prev_j = i, j
    out = _joined([(i, j, 1) for i, j in pairs])
    return [*out, blocks[-1]]


def _first_between(positions: list[int], low: int, high: int) -> int | None:
    """The first of the sorted ``positions`` above ``low`` and below ``high``."""
    at = bisect.bisect_right(positions, low)
    return positions[at] if at < len(positions) and positions[at] < high else None


def _myers(
    a: Sequence[str], b: Sequence[str], limit: int = 400
) -> list[tuple[int, int, int]] | None:
    """Myers' O(ND) diff: the matching runs of a shortest edit script, or None past ``limit``
    differences."""
    n, m = len(a), len(b)
    if not n or not m:
        return []
    size = 2 * limit + 3
    v = [0] * size  # v[k] (negative k wraps around): furthest x on diagonal k
    trace: list[list[int]] = []
    for d in range(min(limit, n + m) + 1):
        trace.append(v[:])
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m)
    return None


def _backtrack(trace: list[list[int]], x: int, y: int) -> list[tuple[int, int, int]]:
    runs: list[tuple[int, int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and v[k - 1] < v[k + 1]) else k - 1
        prev_x = v[prev_k] if d else 0
        prev_y = prev_x - prev_k if d else 0
        # the step from the previous diagonal (a deletion moves x by one), then the run
        start_x = prev_x + 1 if d and prev_k == k - 1 else prev_x
        if x > start_x:
            runs.append((start_x, start_x - k, x - start_x))
        x, y = prev_x, prev_y
    runs.reverse()
    return runs


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)
