"""Lasting memories as entries in memory.md and learnings.md: remember, update, supersede.

Every write goes through a :class:`~mdmem.memory.writers.Writer` (disk, or a dry run) and
re-reads the file it edits, so a person's edit made a moment ago is kept, never overwritten."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace

from mdmem.config import check_name
from mdmem.errors import ConflictError, EditNotApplicable, EntryNotFoundError, FileProblem
from mdmem.layout import LEARNINGS_FILE, MEMORY_FILE
from mdmem.markdown import edits
from mdmem.markdown.entries import (
    MEMORY_TYPES,
    SECTION_TITLES,
    Entry,
    check_importance,
    check_type,
    new_id,
    text_sum,
)
from mdmem.markdown.parse import Document, parse_document
from mdmem.memory.documents import Documents
from mdmem.memory.writers import Writer
from mdmem.redact import Redactor
from mdmem.text import same_text


@dataclass(frozen=True)
class KnowledgeStore:
    documents: Documents
    writer: Writer
    redactor: Redactor

    def file_for(self, type_: str) -> str:
        """Skills go to learnings.md when it exists, everything else to memory.md."""
        if type_ == "skill" and (self.documents.root / LEARNINGS_FILE).exists():
            return LEARNINGS_FILE
        return MEMORY_FILE

    def expected(self, entry: str | Entry) -> Entry:
        return entry if isinstance(entry, Entry) else self.documents.get(entry)

    def remember(
        self,
        text: str,
        type: str = "fact",
        importance: float = 0.5,
        source: str | None = None,
        file: str | None = None,
        section: str | None = None,
    ) -> Entry:
        check_type(type)
        check_importance(importance)
        masked = self.redactor.redact(edits.check_text(text))
        text = masked.text
        if source is not None:
            check_name(source, "source session")
        rel, _ = self.documents.resolve(file or self.file_for(type))
        if not rel.endswith(".md"):
            raise FileProblem(rel, "memories are written to Markdown files (*.md)")
        entry_id = new_id()
        meta = {
            "id": entry_id,
            "type": type,
            "importance": importance,
            "created": today(),
            "source": source,
            "sum": text_sum(text),
        }
        found: list[Entry] = []

        def edit(current: str) -> str:
            found.clear()
            key = same_text(text)
            doc = parse_document(rel, current)
            for entry in doc.entries:
                if not entry.archived and same_text(entry.text) == key:
                    found.append(entry)
                    return current
            block = edits.render_item(text, meta, doc.newline)
            title = section or SECTION_TITLES.get(type, type.title())
            return edits.insert_entry(doc, type, title, block)

        result = self.writer.write(rel, edit)
        if found:
            return replace(found[0], redacted=masked.count)
        return replace(entry_by_id(parse_document(rel, result), entry_id), redacted=masked.count)

    def update(
        self,
        entry: str | Entry,
        text: str | None = None,
        *,
        importance: float | None = None,
        type: str | None = None,
    ) -> Entry:
        entry = self.expected(entry)
        meta: dict[str, object] = {"id": entry.id, "updated": today()}
        if importance is not None:
            meta["importance"] = check_importance(importance)
        if type is not None:
            meta["type"] = check_type(type)
        masked = 0
        if text is not None:
            redaction = self.redactor.redact(edits.check_text(text))
            text, masked = redaction.text, redaction.count
            meta["sum"] = text_sum(text)
            began = entry.meta.get("first_sum") or entry.meta.get("sum")
            if began and began != meta["sum"]:
                # the sum it was remembered with: git's merge driver tells by it that this
                # entry began as the same memory another clone remembered on its own (D8)
                meta["first_sum"] = began
        rel, _ = self.documents.resolve(entry.path)

        def edit(current: str) -> str:
            same_entry(parse_document(rel, current), entry)
            return edits.rewrite_entry(current, rel, entry.id, meta, text)

        result = self.writer.write(rel, edit)
        return replace(entry_by_id(parse_document(rel, result), entry.id), redacted=masked)

    def supersede(
        self,
        entry: str | Entry,
        by: str,
        *,
        importance: float | None = None,
        source: str | None = None,
        related: Mapping[str, str] | None = None,
    ) -> Entry:
        """``related``: relations the new memory declares (``{"contradicts": old.id}``)."""
        if importance is not None:
            check_importance(importance)
        if source is not None:
            check_name(source, "source session")
        old = self.expected(entry)
        if old.archived:
            raise EditNotApplicable(f"{old.id} is already archived in {old.path}")
        rel, _ = self.documents.resolve(old.path)
        masked = 0
        new_text: str | None = None
        try:
            replacement = self.documents.get(by)
        except EntryNotFoundError:
            redaction = self.redactor.redact(edits.check_text(by))
            new_text, masked = redaction.text, redaction.count
            replacement_id = new_id()
        else:
            replacement_id = replacement.id
        stamp = {"superseded_by": replacement_id, "superseded": today()}

        def edit(current: str) -> str:
            doc = parse_document(rel, current)
            same_entry(doc, old)
            text = current
            if new_text is not None:
                type_ = old.type if old.type in MEMORY_TYPES else "fact"
                meta = {
                    "id": replacement_id,
                    "type": type_,
                    "importance": old.importance if importance is None else importance,
                    "created": today(),
                    "source": source,
                    "supersedes": old.id,
                    **(related or {}),
                    "sum": text_sum(new_text),
                }
                block = edits.render_item(new_text, meta, doc.newline)
                title = SECTION_TITLES.get(type_, type_.title())
                text = edits.insert_entry(doc, type_, title, block)
            return edits.archive_entry(text, rel, old.id, stamp)

        result = self.writer.write(rel, edit)
        if new_text is None:
            return self.documents.get(replacement_id)
        return replace(entry_by_id(parse_document(rel, result), replacement_id), redacted=masked)


def today() -> str:
    return dt.date.today().isoformat()


def entry_by_id(doc: Document, entry_id: str) -> Entry:
    for entry in doc.entries:
        if entry.id == entry_id:
            return entry
    raise EntryNotFoundError(f"entry {entry_id} not found in {doc.path} after writing it")


def same_entry(doc: Document, entry: Entry) -> None:
    """The entry as it was read must still be there, with the same text, to be edited."""
    for current in doc.entries:
        if current.id == entry.id:
            if current.text != entry.text:
                raise ConflictError(
                    f"{doc.path}:{current.start_line}: entry {entry.id} was changed by someone "
                    f"else since it was read (now {current.text[:60]!r}); nothing was written"
                )
            return
    raise ConflictError(
        f"{doc.path}: entry {entry.id} was removed or rewritten by someone else since it was "
        "read; nothing was written"
    )
