"""Bringing archived entries back: what ``mdmem restore ID`` does after a consolidation.

Consolidation never deletes: it archives the originals with ``consolidated_into=<id>``. Putting
them back is an edit of the same kind (through the safe writes, one file at a time): the entry
leaves ``## Archive`` for the section of its type, its consolidation keys are dropped, and
``restored=<date>`` keeps consolidation from merging it again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mdmem.errors import EditNotApplicable, EntryNotFoundError
from mdmem.layout import KNOWLEDGE_FILES
from mdmem.markdown import edits
from mdmem.markdown.entries import SECTION_TITLES, Entry
from mdmem.markdown.parse import parse_document
from mdmem.memory.documents import Documents
from mdmem.memory.store import today
from mdmem.memory.writers import Writer

CONSOLIDATED_INTO = "consolidated_into"
CONSOLIDATED = "consolidated"
ARCHIVED_BY = "archived_by"
"""``importance``: archived by ``consolidate --by-importance`` (no merge, no pointer)."""
RESTORED = "restored"
UNMERGED = "unmerged"
_DROPPED = (CONSOLIDATED_INTO, CONSOLIDATED, ARCHIVED_BY)


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
    """Whether consolidation archived this entry."""
    return entry.archived and any(key in entry.meta for key in _DROPPED)


def restore(documents: Documents, writer: Writer, entry_id: str) -> RestoreReport:
    """``entry_id`` names an original archived by consolidation (it comes back alone), or a
    merged memory (all its archived originals come back and it is archived itself). A merged
    memory a person deleted still names its originals: they come back."""
    try:
        entry = documents.get(entry_id)
    except EntryNotFoundError:
        entry = None
    if entry is not None and by_consolidation(entry):
        _restore_in(writer, entry.path, [entry.id], None)
        return RestoreReport((entry.id,), (), ())
    originals = [
        e
        for rel in KNOWLEDGE_FILES
        if (documents.root / rel).exists()
        for e in documents.entries(rel, include_archived=True)
        if e.archived and e.meta.get(CONSOLIDATED_INTO) == entry_id
    ]
    if entry is None:
        if not originals:
            documents.get(entry_id)  # raises EntryNotFoundError, naming the id
        for rel in dict.fromkeys(e.path for e in originals):
            _restore_in(writer, rel, [e.id for e in originals if e.path == rel], None)
        return RestoreReport(tuple(e.id for e in originals), (), ())
    if entry.archived or not originals:
        raise EditNotApplicable(
            f"{entry.path}:{entry.start_line}: {entry.id} was not archived by consolidation and "
            "no archived original names it (consolidated_into=); nothing to restore"
        )
    named = set(entry.meta.get("refines", "").split(",")) - {""}
    found = {e.id for e in originals}
    for rel in dict.fromkeys(e.path for e in originals):
        ids = [e.id for e in originals if e.path == rel]
        _restore_in(writer, rel, ids, entry if rel == entry.path else None)
    if entry.path not in {e.path for e in originals}:
        _archive_merged(writer, entry)
    return RestoreReport(tuple(e.id for e in originals), (entry.id,), tuple(sorted(named - found)))


def _restore_in(writer: Writer, rel: str, ids: list[str], merged: Entry | None) -> None:
    def edit(current: str) -> str:
        text = current
        for entry_id in ids:
            text = unarchive_entry(text, rel, entry_id, {RESTORED: today()})
        if merged is not None:
            text = _archive(text, rel, merged)
        return text

    writer.write(rel, edit, create=False)


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
