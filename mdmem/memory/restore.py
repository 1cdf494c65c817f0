"""Bringing archived entries back: what ``mdmem restore ID`` does after a consolidation.

Consolidation never deletes: it archives the originals with ``consolidated_into=<id>``, and a
memory a newer value changes with ``superseded_by=<id>``. Putting either back is an edit of the
same kind (through the safe writes, one file at a time): the entry leaves ``## Archive`` for
the section of its type, its archive keys are dropped (and its id from the newer memory's
``supersedes=``), and ``restored=<date>`` keeps consolidation from archiving it again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mdmem.errors import EditNotApplicable, EntryNotFoundError
from mdmem.layout import KNOWLEDGE_FILES
from mdmem.markdown import edits
from mdmem.markdown.entries import SECTION_TITLES, Entry
from mdmem.markdown.parse import parse_document
from mdmem.memory.documents import Documents
from mdmem.memory.knowledge_store import today
from mdmem.memory.writers import Writer

CONSOLIDATED_INTO = "consolidated_into"
CONSOLIDATED = "consolidated"
ARCHIVED_BY = "archived_by"
"""``importance``: archived by ``consolidate --by-importance`` (no merge, no pointer)."""
RESTORED = "restored"
UNMERGED = "unmerged"
SUPERSEDED_BY = "superseded_by"
SUPERSEDED = "superseded"
SUPERSEDES = "supersedes"
_DROPPED = (CONSOLIDATED_INTO, CONSOLIDATED, ARCHIVED_BY, SUPERSEDED_BY, SUPERSEDED)


@dataclass(frozen=True)
class RestoreReport:
    restored: tuple[str, ...]
    """Ids put back in their sections."""
    archived: tuple[str, ...]
    """The merged entries archived in their place (``unmerged=<date>``)."""
    missing: tuple[str, ...]
    """Originals a merged entry names (``refines=``) that are in no archive any more."""

    def to_dict(self) -> dict[str, object]:
        return {k: list(v) for k, v in vars(self).items()}


def by_consolidation(entry: Entry) -> bool:
    """Whether the program archived this entry with a reason restore undoes: merged, archived
    by importance, or superseded by a newer value."""
    return entry.archived and any(key in entry.meta for key in _DROPPED)


def restore(documents: Documents, writer: Writer, entry_id: str) -> RestoreReport:
    """``entry_id`` names an original archived by consolidation or superseded (it comes back
    alone), a merged memory (all its archived originals come back and it is archived itself),
    or a memory that superseded others (they come back; it stays). A merged memory a person
    deleted still names its originals: they come back."""
    try:
        entry = documents.get(entry_id)
    except EntryNotFoundError:
        entry = None
    if entry is not None and by_consolidation(entry):
        _restore_in(writer, entry.path, [entry.id], None)
        return RestoreReport((entry.id,), (), ())
    archived = [
        e
        for rel in KNOWLEDGE_FILES
        if (documents.root / rel).exists()
        for e in documents.entries(rel, include_archived=True)
        if e.archived
    ]
    originals = [e for e in archived if e.meta.get(CONSOLIDATED_INTO) == entry_id]
    changed = [e for e in archived if e.meta.get(SUPERSEDED_BY) == entry_id]
    if entry is None:
        if not originals + changed:
            documents.get(entry_id)  # raises EntryNotFoundError, naming the id
        _restore_all([*originals, *changed], writer)
        return RestoreReport(tuple(e.id for e in [*originals, *changed]), (), ())
    if entry.archived or not originals + changed:
        raise EditNotApplicable(
            f"{entry.path}:{entry.start_line}: {entry.id} was not archived by consolidation and "
            "no archived memory names it (consolidated_into=, superseded_by=); nothing to restore"
        )
    if not originals:  # a newer value: the memories it superseded come back beside it
        _restore_all(changed, writer)
        return RestoreReport(tuple(e.id for e in changed), (), ())
    named = set(entry.meta.get("refines", "").split(",")) - {""}
    found = {e.id for e in originals}
    everything = [*originals, *changed]
    for rel in dict.fromkeys(e.path for e in everything):
        ids = [e.id for e in everything if e.path == rel]
        _restore_in(writer, rel, ids, entry if rel == entry.path else None)
    if entry.path not in {e.path for e in everything}:
        _archive_merged(writer, entry)
    restored = tuple(e.id for e in everything)
    return RestoreReport(restored, (entry.id,), tuple(sorted(named - found)))


def _restore_all(entries: list[Entry], writer: Writer) -> None:
    for rel in dict.fromkeys(e.path for e in entries):
        _restore_in(writer, rel, [e.id for e in entries if e.path == rel], None)


def _restore_in(writer: Writer, rel: str, ids: list[str], merged: Entry | None) -> None:
    def edit(current: str) -> str:
        text = current
        for entry_id in ids:
            newer = _superseded_by(text, rel, entry_id)
            text = unarchive_entry(text, rel, entry_id, {RESTORED: today()})
            if newer is not None:
                text = _drop_supersedes(text, rel, newer, entry_id)
        if merged is not None:
            text = _archive(text, rel, merged)
        return text

    writer.write(rel, edit, create=False)


def _superseded_by(text: str, rel: str, entry_id: str) -> str | None:
    found = [e for e in parse_document(rel, text).entries if e.id == entry_id and e.archived]
    return found[0].meta.get(SUPERSEDED_BY) if found else None


def _drop_supersedes(text: str, rel: str, newer: str, entry_id: str) -> str:
    """The newer memory of this file no longer says it supersedes ``entry_id``."""
    doc = parse_document(rel, text)
    found = [e for e in doc.entries if e.id == newer]
    if len(found) != 1 or SUPERSEDES not in found[0].meta:
        return text  # in another file, or gone: its pointer is only stale
    rest = [i for i in found[0].meta[SUPERSEDES].split(",") if i and i != entry_id]
    return edits.rewrite_entry(text, rel, newer, {SUPERSEDES: ",".join(rest) or None})


def _archive_merged(writer: Writer, merged: Entry) -> None:
    writer.write(merged.path, lambda current: _archive(current, merged.path, merged), create=False)


def _archive(text: str, rel: str, merged: Entry) -> str:
    doc = parse_document(rel, text)
    if not any(e.id == merged.id and not e.archived for e in doc.entries):
        return text  # archived already (or removed by a person): nothing to do
    return edits.archive_entry(text, rel, merged.id, {UNMERGED: today()})


def unarchive_entry(text: str, path: str, entry_id: str, meta: Mapping[str, object]) -> str:
    """Move an archived entry back under the section for its type, dropping the consolidation
    keys and adding ``meta``. An entry that is no longer archived is left as it is."""
    doc = parse_document(path, text)
    matches = [e for e in doc.entries if e.id == entry_id]
    if not matches:
        raise EntryNotFoundError(f"{path}: no entry {entry_id} (removed by hand?)")
    entry = matches[0]
    if not entry.archived:
        return text
    lines = doc.lines
    kept = {k: v for k, v in entry.meta.items() if k not in _DROPPED}
    block = edits.render_item(entry.text, {**kept, "type": entry.type, **meta}, doc.newline)
    del lines[entry.start_line - 1 : entry.end_line]
    rest = parse_document(path, "".join(lines))
    title = SECTION_TITLES.get(entry.type, entry.type.title())
    return edits.insert_entry(rest, entry.type, title, block)
