"""Relations between memories: ``supports``, ``contradicts``, ``refines``.

They live in the source entry's metadata (``contradicts=m-a,m-b``), so a person sees them in
the file, writes them by hand, and a diff shows them. The files are the truth: the index
(SQLite or PostgreSQL) copies them into a relations table at sync (the workspace reads it when
it is in step with the files, else the files, as here). A relation to an id that is nowhere is
reported as missing, never an error; cycles are allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem.errors import EditNotApplicable
from mdmem.markdown import edits
from mdmem.markdown.entries import RELATION_KINDS, Entry, related_ids
from mdmem.markdown.parse import parse_document
from mdmem.memory.documents import Documents

if TYPE_CHECKING:  # reading relations (context, search) writes nothing: no writer imported
    from mdmem.memory.writers import Writer


@dataclass(frozen=True)
class Relation:
    """One link written in an entry's metadata: its source supports, contradicts or refines
    its target."""

    source: str
    kind: str
    target: str
    path: str
    """Where the relation is written: the source's file and line."""
    line: int
    source_archived: bool
    target_found: bool
    target_archived: bool = False

    @property
    def open(self) -> bool:
        """Both memories still active (an archived one no longer speaks)."""
        return self.target_found and not self.source_archived and not self.target_archived

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "open": self.open}


def relations(entries: Iterable[Entry]) -> list[Relation]:
    """Every relation the entries declare, with whether its target exists."""
    everything = list(entries)
    by_id = {e.id: e for e in everything}
    out = []
    for entry in everything:
        for kind in RELATION_KINDS:
            for target in related_ids(entry, kind):
                found = by_id.get(target)
                out.append(
                    Relation(
                        entry.id,
                        kind,
                        target,
                        entry.path,
                        entry.start_line,
                        entry.archived,
                        found is not None,
                        found is not None and found.archived,
                    )
                )
    return out


def involving(documents: Documents, entry_id: str) -> list[Relation]:
    """Relations from or to ``entry_id``, over every file of the workspace."""
    found = relations(documents.all().entries(include_archived=True))
    return [r for r in found if entry_id in (r.source, r.target)]


def contradicted(entries: Iterable[Entry]) -> dict[str, list[str]]:
    """Open contradictions: target id → the active memories that contradict it."""
    return open_contradictions(relations(entries))


def open_contradictions(found: Iterable[Relation]) -> dict[str, list[str]]:
    """:func:`contradicted` of relations already read (from the files or an index)."""
    out: dict[str, list[str]] = {}
    for r in found:
        if r.kind == "contradicts" and r.open:
            out.setdefault(r.target, []).append(r.source)
    return out


def relate(documents: Documents, writer: Writer, source: Entry, target: str, kind: str) -> Entry:
    """Record ``source kind target`` in the source's metadata (kept if already there)."""
    from mdmem.memory.knowledge_store import entry_by_id, same_entry

    if kind not in RELATION_KINDS:
        raise ValueError(f"unknown relation {kind!r}: use one of {', '.join(RELATION_KINDS)}")
    other = documents.get(target)  # EntryNotFoundError names the id
    if other.id == source.id:
        raise EditNotApplicable(f"{source.id} cannot {kind} itself")
    rel, _ = documents.resolve(source.path)

    def edit(current: str) -> str:
        doc = parse_document(rel, current)
        same_entry(doc, source)
        now = entry_by_id(doc, source.id)
        ids = related_ids(now, kind)
        if other.id in ids:
            return current
        meta = {"id": source.id, kind: ",".join((*ids, other.id))}
        return edits.rewrite_entry(current, rel, source.id, meta)

    return entry_by_id(parse_document(rel, writer.write(rel, edit, create=False)), source.id)
