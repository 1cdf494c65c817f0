"""git's merge driver for a workspace's files: merged entry by entry, not line by line.

``mdmem merge-driver %O %A %B %P`` runs this on memory.md, learnings.md, ``.notes/``
knowledge, task_process.md, world_state.md and ``shared/*.md`` when both sides of a merge (or
a rebase) changed one. Each version is read with the file's own parser into *entries*, each
with an identity (an entry's id, a world fact's key, a task item's text or field, a pool key),
and the *frame* around them (headings, blank lines, prose). Then, per entry:

- added on one side, or on both alike: kept once; the same memory added on both sides under
  two ids (the same ``sum=`` and text): kept once, under the smaller id, and every link in the
  file to the other id (``supersedes=``, ``consolidated_into=``, relations …) points at it;
- changed on one side only: that change;
- archived on both sides (say, superseded on both with different replacements): archived
  once; two different replacements of one memory are linked ``contradicts`` for a person to
  settle;
- removed (or archived) on one side and edited on the other: the edit is kept;
- changed on both sides: the newer ``updated`` (``updated_at`` in a pool) wins and the other
  version goes to ``## Archive``; when the two are equal, one is missing, or one lies in the
  future (a skewed clock), neither can win: both entries stay (the second under a new id,
  ``variant_of=`` the first); where one value per key is all a file can hold (a world fact, a
  task item or field, a pool key) the two versions are left between git's conflict markers.

git calls the driver with the sides either way round (a rebase's "ours" is the upstream, a
merge's this clone's commit), so every rule above gives the same memories whichever side is
ours: the same lines, each entry in the same section, only text both sides added at one place
in a different order (ours first). tests/integration/test_merge_driver_properties.py checks it.

A frame changed on both sides, a file that holds conflict markers already, or one that is not
a workspace file, gets git's own line merge (``git merge-file``): clean when the changes do not
touch, else conflict markers. Conflict markers always mean a non-zero exit, so git stops and a
person decides; the safe writes refuse to write such a file until then.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from pathlib import Path, PurePosixPath

from mdmem.layout import LEARNINGS_FILE, MEMORY_FILE, TASK_FILE, WORLD_FILE
from mdmem.markdown import tombstones
from mdmem.markdown.conflicts import conflict_line
from mdmem.markdown.entries import (
    ARCHIVE_TITLE,
    find_meta,
    format_meta,
    parse_meta,
    related_ids,
)
from mdmem.markdown.parse import Document, parse_document, split_lines
from mdmem.memory import pool_format as fmt
from mdmem.memory.task import STATE, TODO, sync_pointer
from mdmem.memory.world import parse_world
from mdmem.sharing.pool import POOL_DIR
from mdmem.text import same_text

SKEW = dt.timedelta(minutes=5)
"""An ``updated`` this far past the merge's clock is a skewed clock's, and cannot win."""
MERGED_BY = "mdmem-merge"
KNOWLEDGE_FILES = (MEMORY_FILE, LEARNINGS_FILE)
NOTES_DIR = ".notes"
GIT_ATTRIBUTES = (
    MEMORY_FILE,
    LEARNINGS_FILE,
    TASK_FILE,
    WORLD_FILE,
    f"{POOL_DIR}/*.md",
    f"{NOTES_DIR}/**/*.md",
)
"""The paths (relative to the workspace) ``mdmem init`` gives ``merge=mdmem`` in .gitattributes."""
_POINTER = "field:pointer"


class Unmergeable(Exception):
    """Entry by entry cannot decide this file: git's line merge does."""


@dataclass(frozen=True)
class Block:
    """An entry with its lines, or one line of the frame (``key`` None)."""

    key: str | None
    section: tuple[str, ...]
    """The headings it stands under (for an entry of a pool: ``live`` or ``Archive``)."""
    text: str
    archived: bool = False
    updated: str | None = None
    slot: bool = False
    """One value per key: two versions cannot stand side by side in the file."""
    meta: Mapping[str, str] = field(default_factory=dict, compare=False)
    body: str = ""
    """A pool section's value lines (pool files only)."""
    content: str = field(default="", compare=False)
    """An entry's text as the parser reads it (no marker, no metadata comment)."""

    @property
    def blank(self) -> bool:
        return self.key is None and not self.text.strip()

    @property
    def key_name(self) -> str:
        """A pool section's key, as its heading shows it."""
        return (self.key or "").split("\0")[1]


@dataclass(frozen=True)
class Side:
    blocks: tuple[Block, ...]

    def entries(self) -> dict[str, Block]:
        return {b.key: b for b in self.blocks if b.key is not None}

    def frame(self) -> tuple[str, ...]:
        return tuple(b.text.rstrip("\r\n") for b in self.blocks if b.key is None and not b.blank)


@dataclass(frozen=True)
class MergeResult:
    text: str
    conflicts: tuple[str, ...] = ()
    """Entries left between conflict markers, by identity."""
    notes: tuple[str, ...] = ()
    """Decisions a person may want to know of (a version archived, both versions kept)."""

    @property
    def clean(self) -> bool:
        return not self.conflicts


def file_kind(path: str) -> str | None:
    """What a repository path is to the driver: knowledge, task, world, pool, or None."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    if not name.endswith(".md"):
        return None
    if name in KNOWLEDGE_FILES or NOTES_DIR in parts[:-1]:
        return "knowledge"
    if name == TASK_FILE:
        return "task"
    if name == WORLD_FILE:
        return "world"
    if len(parts) >= 2 and parts[-2] == POOL_DIR:
        return "pool"
    return None


# ---- merging -------------------------------------------------------------------------------


def merge_file(
    path: str, base: str, ours: str, theirs: str, *, now: dt.datetime | None = None
) -> MergeResult:
    """Merge ``theirs``' changes to ``base`` into ``ours``, entry by entry. Unmergeable when
    the rules cannot read the file (the caller falls back to git's line merge)."""
    kind = file_kind(path)
    if kind is None:
        raise Unmergeable(f"{path} is not a workspace file the driver merges")
    for text in (base, ours, theirs):
        if (line := conflict_line(text)) is not None:
            raise Unmergeable(f"{path}:{line} holds conflict markers already")
    if ours == theirs or theirs == base:
        return MergeResult(ours)
    if ours == base:
        return MergeResult(theirs)
    now = now or dt.datetime.now(dt.UTC)
    # both sides' tombstones, as many as the bound keeps (the same set whichever side is ours)
    held = [tombstones.read(t) for t in (base, ours, theirs)]
    marks = tombstones.bounded(held[0] | held[1] | held[2], now.date())
    base, ours, theirs = (tombstones.strip(t) for t in (base, ours, theirs))
    read = _READERS[kind]
    o, a, b = read(path, base), read(path, ours), read(path, theirs)
    merger = _Merger(kind, now, _newline(ours), marks, _remembered_again(o, (a, b), held[1:]))
    layout = merger.layout(o, a, b)
    text = merger.render(layout, o, a, b)
    if kind == "task" and not merger.conflicts:
        text = sync_pointer(text, path)
    text = tombstones.append(text, marks, now.date(), merger.newline)
    return MergeResult(text, tuple(merger.conflicts), tuple(merger.notes))


def _remembered_again(
    base: Side, sides: Iterable[Side], held: Iterable[set[tombstones.Tombstone]]
) -> set[str]:
    """The digests of forgotten texts a side holding their tombstone remembered again since
    the base (an entry new to the base, with those words): a memory written after the forget,
    on purpose, that the tombstone must not take. The other side's copies of the text (an
    archived copy, an edit, the same words under an id the base had) still go."""
    old = base.entries()
    again: set[str] = set()
    for side, marks in zip(sides, held, strict=True):
        sums = tombstones.sums(marks)
        for key, block in side.entries().items():
            mark = tombstones.digest(block.content) if block.content else None
            if key not in old and mark in sums:
                again.add(mark)
    return again


def _token(block: Block) -> tuple[str, str]:
    """What a block is in a file's layout: an entry by its identity and whether it stands in
    the archive, a frame line by its text (line endings aside). An entry's text does not
    count: edits are merged entry by entry. An entry one side moved into ``## Archive`` (or
    out of it) is gone from its place and new in the other: were it the same token, the
    three-way diff would align both sides on the moved one, and the other side's lines next
    to it (a new entry, a paragraph) would follow it into the archive."""
    if block.key is not None:
        return ("archived" if _in_archive(block.section) else "entry", block.key)
    return ("line", block.text.rstrip("\r\n"))


def diff3(
    base: list[tuple[str, str]], a: list[tuple[str, str]], b: list[tuple[str, str]]
) -> list[tuple[list[int], list[int], list[int]]]:
    """A three-way diff of token lists: the regions between tokens both sides kept, each as
    (base indexes, a indexes, b indexes); a stable token is a region of one index each."""
    in_a = _matches(base, a)
    in_b = _matches(base, b)
    regions: list[tuple[list[int], list[int], list[int]]] = []
    i = j = k = 0
    for stable in [x for x in range(len(base)) if x in in_a and x in in_b] + [len(base)]:
        j2, k2 = (in_a[stable], in_b[stable]) if stable < len(base) else (len(a), len(b))
        if j2 < j or k2 < k:  # crossing matches: leave this one to the region
            continue
        region = (list(range(i, stable)), list(range(j, j2)), list(range(k, k2)))
        if any(region):
            regions.append(region)
        if stable < len(base):
            regions.append(([stable], [j2], [k2]))
        i, j, k = stable + 1, j2 + 1, k2 + 1
    return regions


def _before_heading(blocks: list[Block]) -> int:
    """Where a block goes to stay in the section a region starts in: before the first heading
    (and the blank lines above it), else at the end."""
    at = next((n for n, b in enumerate(blocks) if b.key is None and b.text.startswith("#")), None)
    if at is None:
        return len(blocks)
    while at > 0 and blocks[at - 1].blank:
        at -= 1
    return at


def _index(blocks: list[Block], token: tuple[str, str], start: int) -> int | None:
    return next((n for n in range(start, len(blocks)) if _token(blocks[n]) == token), None)


def _matches(base: list[tuple[str, str]], side: list[tuple[str, str]]) -> dict[int, int]:
    found: dict[int, int] = {}
    matcher = SequenceMatcher(None, base, side, autojunk=False)
    for i, j, size in matcher.get_matching_blocks():
        for n in range(size):
            found[i + n] = j + n
    return found


class _Merger:
    def __init__(
        self,
        kind: str,
        now: dt.datetime,
        newline: str,
        marks: Iterable[tombstones.Tombstone] = (),
        again: Iterable[str] = (),
    ) -> None:
        self.kind = kind
        self.now = now
        self.newline = newline
        marks = list(marks)
        self.forgotten_ids = tombstones.ids(marks)
        self.forgotten_sums = tombstones.sums(marks) - set(again)
        """Tombstones of both sides: entries ``forget`` removed for good (their ids), and the
        texts no one remembered again since (digests)."""
        self.conflicts: list[str] = []
        self.notes: list[str] = []
        self.rivals: list[tuple[str, str, str]] = []
        """(the memory, one replacement, another): superseded differently on each side."""
        self.renamed: dict[str, str] = {}
        """A duplicate's id → the id kept."""

    def layout(self, o: Side, a: Side, b: Side) -> list[Block]:
        """The result's lines and entries in order: a line-level three-way merge of the three
        layouts (each entry one token, by identity), so a person's prose, headings, blank
        lines and order are merged as git would merge lines, and an entry stays where its
        side put it. Where both sides changed one place, both changes stay (``both_laid_out``)."""
        tokens = [[_token(x) for x in side.blocks] for side in (o, a, b)]
        out: list[Block] = []
        for bi, ai, ki in diff3(*tokens):
            ob = [o.blocks[n] for n in bi]
            ab = [a.blocks[n] for n in ai]
            bb = [b.blocks[n] for n in ki]
            ot, at, bt = ([_token(x) for x in xs] for xs in (ob, ab, bb))
            if at == ot:
                out += bb
            elif bt in (ot, at):
                out += ab
            else:
                out += self.both_laid_out(ob, ab, bb)
        return out

    def both_laid_out(self, ob: list[Block], ab: list[Block], bb: list[Block]) -> list[Block]:
        """One place both sides changed: ours, without what theirs removed, with what theirs
        added after it (an entry or a heading once). When both changed the text there, both
        versions stay and the notes say so: no rule can choose between two people's words."""
        base = Counter(_token(x) for x in ob)
        removed = base - Counter(_token(x) for x in bb)
        out: list[Block] = []
        for block in ab:
            token = _token(block)
            if removed[token] > 0:
                removed[token] -= 1
                continue
            out.append(block)
        have = {_token(x) for x in out if not x.blank}
        added = Counter(_token(x) for x in bb) - base
        adds: list[bool] = []
        for block in bb:
            token = _token(block)
            adds.append(added[token] > 0)
            added[token] -= 1
        cursor: int | None = None
        for n, block in enumerate(bb):
            token = _token(block)
            if not adds[n] or (not block.blank and token in have):
                # a block both hold: what theirs added next goes after it
                if not block.blank and (found := _index(out, token, 0)) is not None:
                    cursor = found + 1
                continue
            if cursor is None:  # nothing of theirs before it here: the section it started in
                cursor = _before_heading(out)
            if block.blank and any(
                0 <= m < len(out) and out[m].blank for m in (cursor - 1, cursor)
            ):
                continue
            out.insert(cursor, block)
            cursor += 1
            have.add(token)

        def text_lines(xs: list[Block]) -> set[tuple[str, str]]:
            return {_token(x) for x in xs if x.key is None and not x.blank}

        old = text_lines(ob)
        a_new, b_new = text_lines(ab) - old, text_lines(bb) - old
        if (old - text_lines(ab)) & (old - text_lines(bb)) and a_new != b_new:
            raise Unmergeable("the same text between entries was changed on both sides")
        if a_new and b_new and a_new != b_new:
            self.notes.append(
                "text between entries added on both sides at one place: both kept, ours first"
            )
        return out

    def render(self, layout: list[Block], o: Side, a: Side, b: Side) -> str:
        oe, ae, be = o.entries(), a.entries(), b.entries()
        keys = list(dict.fromkeys([*(x.key for x in layout if x.key is not None), *ae, *be]))
        decided = {k: self.decide(k, oe.get(k), ae.get(k), be.get(k)) for k in keys}
        if self.kind == "knowledge":
            self.dedupe(decided, oe, ae, be)
            self.updated_twins(decided, oe, ae, be)
            self.relink(decided)
        if self.forgotten_ids:
            for key, items in decided.items():
                decided[key] = [x for x in items if not self.forgotten(x)]
        out: list[Block] = []
        placed: set[int] = set()
        in_archive = False
        for block in layout:
            if block.key is None:
                out.append(block)
                if block.text.startswith("#"):  # (a frame line of the other side's keeps
                    in_archive = _in_archive(block.section)  # that side's headings)
                continue
            # an entry goes where the layout has its identity only if that place is in the
            # section it belongs to: the layout may hold its identity at the other side's
            # place (say, under ## Archive where that side superseded it) while the version
            # decided on is live. Placed by the layout's section, not by which side's block
            # the layout holds there, so both merge orders put it in the same section.
            for item in decided.get(block.key, []):
                if id(item) not in placed and _in_archive(item.section) == in_archive:
                    out.append(item)
                    placed.add(id(item))
        for key in keys:
            for item in decided[key]:
                if id(item) not in placed:
                    self.insert(out, item)
                    placed.add(id(item))
        if self.kind != "pool":
            out = self.separated(out)
        return "".join(_ending(out[n].text, n + 1 == len(out)) for n in range(len(out)))

    def separated(self, out: list[Block]) -> list[Block]:
        """``out`` with a blank line wherever text the merge set below an entry (or an entry
        below text) would run on into it: two sides' changes at one place can meet without
        the blank line each side had (a person's paragraph under the other side's new entry
        would become that entry's lazy continuation line, changing both)."""
        kept: list[Block] = []
        for block in out:
            if kept and _runs_on(kept[-1], block):
                kept.append(Block(None, kept[-1].section, self.newline))
            kept.append(block)
        return kept

    def forgotten(self, item: Block) -> bool:
        """A version of an entry ``forget`` removed on either side: its id, a variant of it,
        or its text under another id."""
        if self.kind == "pool":
            return False
        ids = {_entry_id(item), str(item.meta.get("variant_of", ""))}
        if ids & self.forgotten_ids:
            return True
        return bool(item.content) and tombstones.digest(item.content) in self.forgotten_sums

    def decide(self, key: str, o: Block | None, a: Block | None, b: Block | None) -> list[Block]:
        if a is not None and b is not None and a.text == b.text:
            return [a]
        if key == _POINTER:  # derived from the boxes: recomputed after the merge
            return [x for x in (a or b,) if x is not None]
        if o is None:  # added on one side, or on both
            if a is None or b is None:
                return [x for x in (a, b) if x is not None]
            return self.both_changed(key, a, b)
        if a is None or b is None:  # removed on one side: kept if edited on the other
            other = a if b is None else b
            return [] if other is None or other.text == o.text else [other]
        if a.text == o.text:
            return [b]
        if b.text == o.text:
            return [a]
        if a.archived != b.archived and (a.archived or b.archived):
            kept, gone = (b, a) if a.archived else (a, b)
            if gone.content == o.content or self.kind == "pool":
                self.notes.append(
                    f"{_shown(key)}: archived on one side, edited on the other: the edit kept"
                )
                return [kept]
            # edited, then archived (say, updated and then superseded) on one side, edited
            # on the other: no rule can choose; both versions stay, the archived one as a
            # variant under its replacement
            self.notes.append(
                f"{_shown(key)}: edited on both sides and archived on one: both versions kept"
            )
            return [
                kept,
                _with_meta(gone, {"id": _variant_id(gone), "variant_of": _entry_id(gone)}),
            ]
        if a.archived and b.archived and self.kind != "pool" and _content(a) == _content(b):
            return [self.archived_once(key, a, b)]
        return self.both_changed(key, a, b)

    def archived_once(self, key: str, a: Block, b: Block) -> Block:
        """One entry archived on both sides: one archived copy, with the other side's keys it
        lacks. Two replacements (``superseded_by=``) cannot both be the one: the smaller id
        is named, and the pair is remembered to be marked ``contradicts``."""
        by_a, by_b = a.meta.get("superseded_by"), b.meta.get("superseded_by")
        if by_a and by_b and by_a != by_b:
            self.rivals.append((key, min(by_a, by_b), max(by_a, by_b)))
            if by_b < by_a:
                a, b = b, a
        extra = {k: v for k, v in b.meta.items() if k not in a.meta}
        return _with_meta(a, extra) if extra else a

    def dedupe(self, decided: dict[str, list[Block]], oe: dict, ae: dict, be: dict) -> None:
        """The same memory added on both sides (same ``sum=``, same text): kept once, under
        the smaller id (whichever side merges, the same one); links to the other point at it."""
        ours: dict[tuple[str, str, bool], Block] = {}
        for key, block in ae.items():
            if _new(key, oe, be) and (sig := _signature(block)) is not None:
                ours.setdefault((*sig, block.archived), block)
        for key, block in be.items():
            if not _new(key, oe, ae) or (sig := _signature(block)) is None:
                continue
            if (twin := ours.pop((*sig, block.archived), None)) is None:
                continue
            keep, drop = sorted((twin, block), key=_entry_id)
            by_keep, by_drop = keep.meta.get("superseded_by"), drop.meta.get("superseded_by")
            if keep.archived and by_keep and by_drop and by_keep != by_drop:
                # one memory remembered on both sides, then replaced differently on each
                self.rivals.append((keep.key or "", min(by_keep, by_drop), max(by_keep, by_drop)))
            decided[drop.key or ""] = []
            self.renamed[_entry_id(drop)] = _entry_id(keep)
            self.notes.append(
                f"{_entry_id(drop)}: the same memory as {_entry_id(keep)} (added on both sides): "
                "kept once; links to it name the one kept"
            )

    def updated_twins(self, decided: dict[str, list[Block]], oe: dict, ae: dict, be: dict) -> None:
        """One memory remembered on both sides, then updated on one before they met: the
        updated entry's ``first_sum=`` (the sum it was remembered with) is the other's
        ``sum=``. The update is kept, the unchanged twin dropped (links to it name the one
        kept), whichever side merges."""
        for mine, theirs in ((ae, be), (be, ae)):
            twins: dict[str, Block] = {}
            for key, block in theirs.items():
                total = block.meta.get("sum")
                first = block.meta.get("first_sum")
                fresh = _new(key, oe, mine) and decided.get(key) != [] and not block.archived
                if fresh and total and first in (None, "", total):
                    twins.setdefault(str(total), block)
            for key, block in mine.items():
                first = block.meta.get("first_sum")
                if not first or block.archived or not _new(key, oe, theirs):
                    continue
                if decided.get(key) == [] or first == block.meta.get("sum"):
                    continue
                if (twin := twins.pop(str(first), None)) is None:
                    continue
                decided[twin.key or ""] = []
                self.renamed[_entry_id(twin)] = _entry_id(block)
                self.notes.append(
                    f"{_entry_id(twin)}: the same memory as {_entry_id(block)} before it was "
                    "updated (added on both sides): the update kept"
                )

    def relink(self, decided: dict[str, list[Block]]) -> None:
        """Links to a dropped duplicate name the one kept; rival replacements of one memory
        are marked ``contradicts`` (the larger id names the smaller)."""
        for key, items in decided.items():
            decided[key] = [_renamed(item, self.renamed) for item in items]
        for original, low, high in self.rivals:
            low, high = self.renamed.get(low, low), self.renamed.get(high, high)
            if low == high:
                continue
            items = decided.get(f"id:{high}", [])
            for n, item in enumerate(items):
                if item.archived:
                    continue
                named = [x for x in item.meta.get("contradicts", "").split(",") if x]
                if low not in named:
                    items[n] = _with_meta(item, {"contradicts": ",".join([*named, low])})
                self.notes.append(
                    f"{high} and {low} both replace {original.removeprefix('id:')}: marked "
                    "contradicts, for a person to settle"
                )

    def both_changed(self, key: str, a: Block, b: Block) -> list[Block]:
        winner = newer(a.updated, b.updated, self.now)
        if winner is not None:
            won, lost = (a, b) if winner == "a" else (b, a)
            self.notes.append(
                f"{_shown(key)}: changed on both sides; the newer kept, the other archived"
            )
            return [self.won(won, lost), self.archived(lost)]
        if a.slot or b.slot:
            self.conflicts.append(key)
            return [self.conflict(a, b)]
        if self.kind == "pool":  # two archived versions: both stay as they are
            return [a, b]
        self.notes.append(
            f"{_shown(key)}: changed on both sides at the same time: both versions kept"
        )
        first, second = sorted((a, b), key=lambda x: x.text)  # the same whichever side merges
        return [
            first,
            _with_meta(second, {"id": _variant_id(second), "variant_of": _entry_id(second)}),
        ]

    def won(self, won: Block, lost: Block) -> Block:
        if self.kind != "pool":
            return won
        version = max(_int(won.meta.get("version")), _int(lost.meta.get("version"))) + 1
        meta = {**won.meta, "version": str(version)}  # metadata values are text, as parsed
        text = fmt.render_section(won.key_name, meta, won.body, self.newline, fmt.SECTION_LEVEL)
        return replace(won, text=text, meta=meta)

    def archived(self, lost: Block) -> Block:
        stamp = self.now.isoformat(timespec="microseconds").replace("+00:00", "Z")
        if self.kind == "pool":
            meta = {**lost.meta, "deleted_at": stamp, "deleted_by": MERGED_BY}
            text = fmt.render_section(lost.key_name, meta, lost.body, self.newline, 3)
            return Block(
                f"{lost.key}\0lost", ("Archive",), text, True, None, False, meta, lost.body
            )
        meta = {"id": _variant_id(lost), "variant_of": _entry_id(lost), "archived": stamp[:10]}
        return replace(_with_meta(lost, meta), archived=True, section=(ARCHIVE_TITLE,))

    def conflict(self, a: Block, b: Block) -> Block:
        text = (
            "<<<<<<< ours\n"
            + _ending(a.text, False)
            + "=======\n"
            + _ending(b.text, False)
            + ">>>>>>> theirs\n"
        )
        return replace(a, text=text)

    def insert(self, out: list[Block], item: Block) -> None:
        """At the end of ``item``'s section (after its last line that is not blank); a
        section the file lacks is made, before ``## Archive`` (or at the end)."""
        section = _archive_of(out) if item.archived else None
        where = _section_end(out, section or item.section)
        if where is None:
            where = self.new_section(out, item)
        text = item.text
        if self.kind == "pool":
            text = _ending(text.rstrip("\r\n"), False) + "\n"
            before = out[where - 1].text if where else ""
            if before.strip() and not before.endswith("\n\n"):
                text = "\n" + text
        out.insert(where, replace(item, text=text))

    def new_section(self, out: list[Block], item: Block) -> int:
        """Add the heading of ``item``'s section; where its entries go."""
        title = item.section[-1] if item.section and not item.archived else ARCHIVE_TITLE
        level = max(fmt.SECTION_LEVEL, len(item.section))
        heading = Block(None, item.section, "#" * level + " " + title + self.newline)
        blank = Block(None, item.section, self.newline)
        archive = _archive_of(out)
        if archive is not None and not item.archived:
            at = next(n for n, b in enumerate(out) if b.section == archive)
            out[at:at] = [heading, blank]
            return at + 1
        if out and out[-1].text.strip():
            out.append(Block(None, item.section, self.newline))
        out += [heading, blank] if self.kind == "pool" else [heading]
        return len(out) - (1 if self.kind == "pool" else 0)


def _archive_of(out: list[Block]) -> tuple[str, ...] | None:
    """The path of the archive section the file has, if any."""
    return next(
        (b.section for b in out if b.key is None and b.section[-1:] in _ARCHIVE_TITLES), None
    )


_ARCHIVE_TITLES = {(ARCHIVE_TITLE,), (ARCHIVE_TITLE.lower(),), (ARCHIVE_TITLE.upper(),)}


def _runs_on(above: Block, below: Block) -> bool:
    """Whether ``below``, right under ``above`` with no blank line, would be read as part of
    it (a paragraph's or a list item's continuation), where one of them is an entry."""
    if above.key is None and below.key is None:
        return False  # frame lines as a side wrote them
    if above.blank or below.blank:
        return False
    last = above.text.rstrip("\r\n").rsplit("\n", 1)[-1]
    if last.lstrip().startswith("#") or (above.key is None and last.rstrip().endswith("-->")):
        return False  # a heading, or an HTML comment, ends where it ends
    first = below.text.lstrip(" ")
    return not first.startswith(_BLOCK_STARTS) and not _LIST_START.match(first)


_BLOCK_STARTS = ("#", ">", "<", "|", "```", "~~~", "- ", "* ", "+ ", "-\n", "*\n", "+\n")
_LIST_START = re.compile(r"\d{1,9}[.)]( |\r?$)")


def _in_archive(section: tuple[str, ...]) -> bool:
    """Whether a line under these headings is in the archive (as the parser tells it)."""
    return any(title.strip().lower() == ARCHIVE_TITLE.lower() for title in section)


def _section_end(out: list[Block], section: tuple[str, ...]) -> int | None:
    found = None
    for n, block in enumerate(out):
        if block.section[: len(section)] == section and not block.blank:
            found = n + 1
    return found


def newer(a: str | None, b: str | None, now: dt.datetime) -> str | None:
    """ "a" or "b", whichever ``updated`` is newer; None when that cannot be told: one is
    missing or unreadable, they are equal (to the day, when one is a date), or one is later
    than ``now`` plus :data:`SKEW`."""
    ta, tb = _when(a), _when(b)
    if ta is None or tb is None or max(ta, tb) > now + SKEW:
        return None
    assert a is not None and b is not None
    if len(a) == 10 or len(b) == 10:  # a date: only days compare
        ta, tb = (
            ta.replace(hour=0, minute=0, second=0, microsecond=0),
            tb.replace(hour=0, minute=0, second=0, microsecond=0),
        )
    if ta == tb:
        return None
    return "a" if ta > tb else "b"


def _when(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


# ---- reading the three versions ---------------------------------------------------------------


def _read_document(path: str, text: str, key_of: Callable[[Document], dict[int, tuple]]) -> Side:
    """Top-level entries keyed by ``key_of`` (line → (key, slot)), the rest frame lines."""
    doc = parse_document(path, text)
    lines = split_lines(text)
    keys = key_of(doc)
    entries = {e.start_line: e for e in doc.entries}
    headings = {h.line: h for h in doc.headings}
    stack: list[tuple[int, str]] = []
    blocks: list[Block] = []
    seen: dict[str, int] = {}
    n = 1
    while n <= len(lines):
        if (heading := headings.get(n)) is not None:
            while stack and stack[-1][0] >= heading.level:
                stack.pop()
            stack.append((heading.level, heading.title))
        section = tuple(title for _, title in stack)
        entry = entries.get(n) if n >= doc.body_start else None
        if entry is None:
            blocks.append(Block(None, section, lines[n - 1]))
            n += 1
            continue
        key, slot = keys.get(n, (f"id:{entry.id}", False))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key}#{seen[key]}"
        text_ = "".join(lines[n - 1 : entry.end_line])
        blocks.append(
            Block(
                key,
                section,
                text_,
                entry.archived,
                entry.meta.get("updated"),
                slot,
                entry.meta,
                content=entry.text,
            )
        )
        n = entry.end_line + 1
    return Side(tuple(blocks))


def _knowledge(path: str, text: str) -> Side:
    return _read_document(path, text, lambda doc: {})


def _world(path: str, text: str) -> Side:
    return _read_document(
        path,
        text,
        lambda doc: {f.line: (f"fact:{f.key.casefold()}", True) for f in parse_world(doc)},
    )


def _task(path: str, text: str) -> Side:
    def keys(doc: Document) -> dict[int, tuple]:
        out: dict[int, tuple] = {}
        for entry in doc.entries:
            if entry.archived or entry.kind != "item":
                continue
            first = entry.text.split("\n", 1)[0].strip()
            if STATE in entry.heading_path and ":" in first:
                out[entry.start_line] = (f"field:{first.split(':', 1)[0].strip().casefold()}", True)
            elif TODO in entry.heading_path:
                out[entry.start_line] = (f"item:{first}", True)
        return out

    return _read_document(path, text, keys)


def _pool(path: str, text: str) -> Side:
    try:
        pool = fmt.parse_pool(path, text)
    except ValueError as exc:
        raise Unmergeable(f"{path}: {exc}") from None
    lines = pool.lines
    starts = {s.line: s for s in (*pool.live, *pool.archived)}
    blocks: list[Block] = []
    section: tuple[str, ...] = ("live",)
    n = 1
    while n <= len(lines):
        row = lines[n - 1].rstrip("\r\n")
        if row.strip().lower() == f"## {ARCHIVE_TITLE}".lower():
            section = ("Archive",)
        sec = starts.get(n)
        if sec is None:
            blocks.append(Block(None, section, lines[n - 1]))
            n += 1
            continue
        if sec.archived:
            key = "\0".join(
                ("arch", sec.key, str(sec.version), sec.hash, sec.meta.get("deleted_at", ""))
            )
        else:
            key = f"live\0{sec.key}"
        blocks.append(
            Block(
                key,
                section,
                "".join(lines[n - 1 : sec.end - 1]),
                sec.archived,
                sec.meta.get("updated_at"),
                not sec.archived,
                sec.meta,
                sec.body,
            )
        )
        n = sec.end
    return Side(tuple(blocks))


_READERS: dict[str, Callable[[str, str], Side]] = {
    "knowledge": _knowledge,
    "world": _world,
    "task": _task,
    "pool": _pool,
}


# ---- small helpers ----------------------------------------------------------------------------


def _with_meta(block: Block, changes: Mapping[str, object]) -> Block:
    """``block`` with keys set in its first line's mdmem comment (one added if it has none)."""
    first, nl, rest = block.text.partition("\n")
    ending = "\r" if first.endswith("\r") else ""
    first = first.removesuffix("\r")
    meta: dict[str, object] = {}
    match = find_meta(first)
    if match is not None:
        meta = dict(parse_meta(match.group("body")))
        first = first[: match.start()] + first[match.end() :]
    meta.update(changes)
    line = first.rstrip() + " " + format_meta(meta) + ending
    text = line + nl + rest
    return replace(block, text=text, meta={k: str(v) for k, v in meta.items()})


def _content(block: Block) -> str:
    """The block's text without its mdmem comment: what a person wrote."""
    first, nl, rest = block.text.partition("\n")
    if (match := find_meta(first)) is not None:
        first = first[: match.start()] + first[match.end() :]
    return first.rstrip() + nl + rest


def _signature(block: Block) -> tuple[str, str] | None:
    """What makes two entries the same memory: their ``sum=`` and their text."""
    total = block.meta.get("sum")
    return (str(total), same_text(_content(block))) if total else None


def _new(key: str, base: dict, other: dict) -> bool:
    """An entry only this side added (live, or archived since)."""
    return key.startswith("id:") and key not in base and key not in other


def _shown(key: str) -> str:
    """An entry's identity as a message names it: a pool key by its name (``plan``, or
    ``plan (archived v3)``), never the NUL-joined form used inside the merge."""
    if "\0" not in key:
        return key
    parts = key.split("\0")
    if parts[0] == "arch" and len(parts) > 2:
        return f"{parts[1]} (archived v{parts[2]})"
    return parts[1]


def _renamed(block: Block, renamed: Mapping[str, str]) -> Block:
    """``block`` with every id ``renamed`` names replaced in its metadata values."""
    if not renamed:
        return block
    changes = {}
    for key, value in block.meta.items():
        parts = [p.strip() for p in str(value).split(",")]
        if key == "id" or not any(p in renamed for p in parts):
            continue
        changes[key] = ",".join(dict.fromkeys(renamed.get(p, p) for p in parts))
    return _with_meta(block, changes) if changes else block


def _variant_id(block: Block) -> str:
    """An id for a second version of an entry, from the entry's id and this version's text:
    two clones merging the same versions name it alike."""
    digest = hashlib.sha1(f"{_entry_id(block)}\0{block.text}".encode("utf-8", "surrogateescape"))
    return "m-" + digest.hexdigest()[:10]


def _entry_id(block: Block) -> str:
    return str(block.meta.get("id") or (block.key or "").removeprefix("id:"))


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _ending(text: str, last: bool) -> str:
    if last or text.endswith(("\n", "\r")):
        return text
    return text + "\n"


# ---- checking a merge's result ---------------------------------------------------------------


@dataclass(frozen=True)
class Missing:
    """An entry a side added or changed that a merge's result does not hold."""

    text: str
    line: int
    """Where it stands in that side's version of the file."""


def missing_entries(path: str, base: str, side: str, result: str) -> list[Missing]:
    """The entries ``side`` added or changed since ``base`` that ``result`` lost. Present
    means: the same text (live or archived) or the same ``sum=``; an edited entry also when
    its id holds an edit of it (both sides' lines merged); a pool value by its key and hash.
    The task's pointer is derived, and files the driver does not merge are git's: not
    checked."""
    kind = file_kind(path)
    if kind is None or side == result or conflict_line(result) is not None:
        return []
    if kind == "pool":
        return _missing_pool(path, base, side, result)
    old = parse_document(path, base).entries if base else []
    before = {(e.id, e.text) for e in old}
    base_ids = {e.id: e.text for e in old}
    now = parse_document(path, result).entries
    texts = {same_text(e.text) for e in now}
    sums = {e.meta["sum"] for e in now if e.meta.get("sum")}
    sums |= {e.meta["first_sum"] for e in now if e.meta.get("first_sum")}  # an updated twin
    by_id = {e.id: e.text for e in now}
    marks = tombstones.read(result)
    gone, forgotten = tombstones.sums(marks), tombstones.ids(marks)
    held = tombstones.sums(tombstones.read(side))
    out = []
    for entry in parse_document(path, side).entries:
        if (entry.id, entry.text) in before or (kind == "task" and _pointer(entry.text)):
            continue
        mark = tombstones.digest(entry.text)
        again = entry.id not in base_ids and mark in held  # remembered after its forget
        if marks and (
            entry.id in forgotten
            or entry.meta.get("variant_of") in forgotten
            or (mark in gone and not again)
        ):
            continue  # forgotten on a side: forget wins
        if same_text(entry.text) in texts or entry.meta.get("sum") in sums:
            continue
        edit_of = base_ids.get(entry.id)
        if edit_of is not None and _lines_kept(edit_of, entry.text, by_id.get(entry.id)):
            continue
        out.append(Missing(entry.text, entry.start_line))
    return out


def _lines_kept(base: str, edit: str, now: str | None) -> bool:
    """An edit of an entry is in its merged version ``now`` when every line it changed or
    added is there: git's line merge can join two sides' edits of one entry's lines."""
    if now is None:
        return False
    changed = [line for line in edit.splitlines() if line not in base.splitlines()]
    return all(line in now.splitlines() for line in changed)


def _pointer(text: str) -> bool:
    return text.split(":", 1)[0].strip().casefold() == "pointer"


def _missing_pool(path: str, base: str, side: str, result: str) -> list[Missing]:
    try:
        old = fmt.parse_pool(path, base) if base else None
        mine, now = fmt.parse_pool(path, side), fmt.parse_pool(path, result)
    except ValueError:
        return []  # a pool that does not parse: git's line merge, not checked

    def sections(pool: fmt.PoolFile | None) -> list[fmt.Section]:
        return [*pool.live, *pool.archived] if pool is not None else []

    before = {(s.key, s.hash, s.archived) for s in sections(old)}
    present = {(s.key, s.hash) for s in sections(now)}
    return [
        Missing(f"{s.key}: {s.body.strip()}", s.line)
        for s in sections(mine)
        if (s.key, s.hash, s.archived) not in before and (s.key, s.hash) not in present
    ]


def contradictions(path: str, ours: str, theirs: str, result: str) -> list[str]:
    """``contradicts`` links between live memories in ``result`` that neither side had: those
    the merge made (two replacements of one memory), for a person to settle."""
    if file_kind(path) != "knowledge" or conflict_line(result) is not None:
        return []

    def links(text: str) -> dict[tuple[str, str], str]:
        entries = parse_document(path, text).entries if text else []
        live = {e.id: e for e in entries if not e.archived}
        return {
            (e.id, target): f"{e.text[:60]!r} contradicts {live[target].text[:60]!r}"
            for e in live.values()
            for target in related_ids(e, "contradicts")
            if target in live
        }

    known = links(ours).keys() | links(theirs).keys()
    return [
        f"{source} contradicts {target}: {said}"
        for (source, target), said in links(result).items()
        if (source, target) not in known
    ]


# ---- the driver git runs ----------------------------------------------------------------------


@dataclass(frozen=True)
class DriverOutcome:
    conflicts: int
    how: str
    """``entries`` (merged by the rules above) or ``lines`` (git's line merge)."""
    messages: tuple[str, ...] = ()


def run_driver(
    base: Path, ours: Path, theirs: Path, path: str, marker_size: int = 7
) -> DriverOutcome:
    """What git asks of a merge driver: write the result into ``ours``; say how many conflicts
    it holds (0: clean)."""
    texts = [p.read_bytes().decode("utf-8", "surrogateescape") for p in (base, ours, theirs)]
    try:
        result = merge_file(path, *texts)
    except Unmergeable as exc:
        return _line_merge(base, ours, theirs, marker_size, str(exc))
    except Exception as exc:  # a defect here must not lose a side: git's merge takes over
        why = f"{path}: the entry merge failed ({type(exc).__name__}: {exc})"
        return _line_merge(base, ours, theirs, marker_size, why)
    ours.write_bytes(result.text.encode("utf-8", "surrogateescape"))
    messages = [f"{path}: {note}" for note in result.notes]
    messages += [
        f"{path}: {_shown(key)} changed on both sides, left between conflict markers"
        for key in result.conflicts
    ]
    return DriverOutcome(len(result.conflicts), "entries", tuple(messages))


def _line_merge(base: Path, ours: Path, theirs: Path, marker_size: int, why: str) -> DriverOutcome:
    """git's own merge of the lines: what git does for any file without a driver."""
    command = ["git", "merge-file", f"--marker-size={marker_size}"]
    command += ["-L", "ours", "-L", "base", "-L", "theirs", str(ours), str(base), str(theirs)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode < 0 or done.returncode > 127:
        print(done.stderr, file=sys.stderr, end="")
        return DriverOutcome(1, "lines", (f"{why}; git merge-file failed",))
    return DriverOutcome(done.returncode, "lines", (f"{why}: merged line by line",))
