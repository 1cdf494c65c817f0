"""The oracle of consolidation (issue 31): distinct facts hidden by what the program archived.

Written on its own, from the issue's words, not from ``mdmem/distill/fidelity.py`` (which once
reported ``kw_retention=1`` for merges that lost modules m1-m5): for every memory the program
archived with a pointer (``consolidated_into=`` a merged memory, ``superseded_by=`` a newer
one), each distinguishing token — any token holding a digit, a capital letter, or an inner
``-``, ``_`` or ``.`` (``27``, ``m3``, ``eu-west-1``, ``v2.4``, ``Kafka``; not an article or
pronoun that starts a sentence, "The", "We") — must be in a live
memory the pointers lead to (followed through archived merges), compared as lowercase words.
A superseded memory may lose the tokens of its one changed value and nothing else: its text
and the newer one's, word by word, differ in exactly one replaced span, and the newer is dated
later. A memory archived without a pointer (``archived_by=importance``) hides all its tokens.

Used by ``tests/integration/test_consolidate.py`` and the consolidation benchmarks:
``hidden_facts(root)`` lists what is hidden (empty when the invariant holds).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import parse_document

FILES = ("memory.md", "learnings.md")
_PUNCTUATION = "\"'“”‘’()[]{}<>*`,;:!?."
POINTERS = ("consolidated_into", "superseded_by")


@dataclass(frozen=True)
class Hidden:
    """One archived memory and the tokens of it no live memory it points to holds."""

    id: str
    path: str
    text: str
    via: str
    """``consolidated_into``, ``superseded_by`` or ``archived_by``."""
    targets: tuple[str, ...]
    """The live memories its pointers lead to."""
    tokens: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "targets": list(self.targets), "tokens": list(self.tokens)}


def words(text: str) -> list[str]:
    """Whitespace-separated words, edge punctuation off, lowercased."""
    out = []
    for raw in text.split():
        word = raw.strip(_PUNCTUATION)
        if word:
            out.append(word.lower())
    return out


def distinguishing(text: str) -> set[str]:
    """The issue's definition, lowercased: a word holding a digit, a capital letter, or an inner
    ``-``, ``_`` or ``.``; articles and pronouns aside."""
    out = set()
    for raw in text.split():
        word = raw.strip(_PUNCTUATION)
        if any(ch.isdigit() or ch.isupper() for ch in word) or any(
            ch in "-_." for ch in word[1:-1]
        ):
            out.add(word.lower())
    return out - ARTICLES_AND_PRONOUNS


ARTICLES_AND_PRONOUNS = frozenset(
    "the a an i we you he she it they my our your his her its their this that these those".split()
)
"""Capitalised only when they start a sentence: no fact ("The", "We")."""


def changed_value(old: str, new: str) -> set[str]:
    """The words of ``old`` in the one span ``new`` replaces (empty unless the two differ in
    exactly one replaced span)."""
    a, b = words(old), words(new)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    changed = [op for op in ops if op[0] != "equal"]
    if len(changed) != 1 or changed[0][0] != "replace":
        return set()
    _, i1, i2, _, _ = changed[0]
    return set(a[i1:i2])


def hidden_in(entries: list[Entry]) -> list[Hidden]:
    """What the archived entries among ``entries`` (every file's, archived included) hide."""
    by_id: dict[str, Entry] = {}
    for entry in entries:
        if entry.id and (entry.id not in by_id or not entry.archived):
            by_id[entry.id] = entry
    out = []
    for entry in entries:
        if not entry.archived:
            continue
        via = next((key for key in POINTERS if entry.meta.get(key)), None)
        if via is None:
            if "archived_by" in entry.meta:
                out.append(_hidden(entry, "archived_by", [], distinguishing(entry.text)))
            continue
        targets = _live(entry, by_id)
        present = {w for t in targets for w in words(t.text)}
        missing = distinguishing(entry.text) - present
        if via == "superseded_by" and missing:
            newer = by_id.get(str(entry.meta[via]).split(",")[0])
            if newer is not None and _later(newer, entry):
                missing -= changed_value(entry.text, newer.text)
        if missing:
            out.append(_hidden(entry, via, targets, missing))
    return out


def hidden_facts(root: Path) -> list[Hidden]:
    """:func:`hidden_in` over a workspace's memory.md and learnings.md."""
    entries: list[Entry] = []
    for name in FILES:
        path = root / name
        if path.is_file():
            entries += parse_document(name, path.read_text(encoding="utf-8")).entries
    return hidden_in(entries)


def _live(entry: Entry, by_id: dict[str, Entry]) -> list[Entry]:
    """The live memories ``entry``'s pointers lead to, through archived ones."""
    found: list[Entry] = []
    seen = {entry.id}
    todo = [entry]
    while todo:
        current = todo.pop()
        for key in POINTERS:
            for target_id in str(current.meta.get(key, "")).split(","):
                target = by_id.get(target_id.strip())
                if target is None or target.id in seen:
                    continue
                seen.add(target.id)
                (todo if target.archived else found).append(target)
    return found


def _later(newer: Entry, older: Entry) -> bool:
    a, b = (newer.created or "")[:10], (older.created or "")[:10]
    return bool(a and b) and a > b


def _hidden(entry: Entry, via: str, targets: list[Entry], tokens: set[str]) -> Hidden:
    return Hidden(
        entry.id, entry.path, entry.text, via, tuple(t.id for t in targets), tuple(sorted(tokens))
    )
