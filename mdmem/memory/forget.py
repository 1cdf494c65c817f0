"""``forget``: the one true delete, for a leaked secret or a person's data.

Everywhere else mdmem archives instead of deleting. Forgetting an entry removes its lines from
its file and every archived copy of the same text, its chunks from the index (with the deleted
bytes zeroed, FTS5 segments merged and the WAL truncated), its cached vectors, and any journal
or trash file holding it. Git history, backups and synced copies are out of reach: the report
says so. The file keeps a tombstone (the entry's id and a digest of its text, never the text:
:mod:`mdmem.markdown.tombstones`) so that git's merge driver drops every version of the entry
another clone still holds: ``forget`` wins over any concurrent change.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mdmem.markdown import tombstones
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import parse_document
from mdmem.memory.documents import Documents
from mdmem.memory.writers import FileWriter
from mdmem.text import same_text

JOURNAL_DIR = "journal"
"""Under ``.mdmem/``: the bytes each program write replaced (kept by the write journal)."""
TRASH_DIR = ".trash"
"""In the workspace root: files a person or a tool moved aside instead of deleting."""
MIN_LINE_NEEDLE = 20
"""A line of a forgotten entry this long is searched for on its own in journal and trash files
(shorter lines are too common to prove a file holds the entry)."""
GIT_WARNING = (
    "git history, backups and synced copies may still hold it: rewrite history "
    "(e.g. git filter-repo) and, for a secret, rotate it"
)


@dataclass(frozen=True)
class ForgetReport:
    """What ``forget`` removed, and what it could not reach."""

    id: str
    removed: tuple[str, ...]
    """The entries removed, as ``path:start-end`` (the entry and its archived copies)."""
    chunks: int
    """Index rows deleted."""
    vectors: int
    """Cached embedding vectors deleted."""
    journal: tuple[str, ...]
    """Journal files deleted (paths relative to the workspace)."""
    trash: tuple[str, ...]
    """Trash files deleted (paths relative to the workspace)."""
    wal_truncated: bool
    """False when another process's reader kept the index WAL from being truncated now."""
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "removed": list(self.removed),
            "chunks": self.chunks,
            "vectors": self.vectors,
            "journal": list(self.journal),
            "trash": list(self.trash),
            "wal_truncated": self.wal_truncated,
            "warnings": list(self.warnings),
        }


def copies(entry: Entry, candidates: Iterable[Entry]) -> list[Entry]:
    """The entry and its archived copies: archived entries holding the same text."""
    key = same_text(entry.text)
    found = [entry]
    for other in candidates:
        if other.id == entry.id and other.path == entry.path:
            continue
        if other.id == entry.id or (other.archived and same_text(other.text) == key):
            found.append(other)
    return found


def remove_entries(
    text: str, path: str, wanted: Callable[[Entry], bool]
) -> tuple[str, list[tuple[Entry, str]]]:
    """``text`` without the lines of the entries ``wanted`` accepts (nested lines go with their
    item), and each removed entry with its raw lines."""
    doc = parse_document(path, text)
    lines = doc.lines
    removed: list[tuple[Entry, str]] = []
    cut_from = len(lines) + 1
    for entry in sorted(doc.entries, key=lambda e: e.start_line, reverse=True):
        if not wanted(entry) or entry.end_line >= cut_from:
            continue
        removed.append((entry, "".join(lines[entry.start_line - 1 : entry.end_line])))
        del lines[entry.start_line - 1 : entry.end_line]
        if entry.kind == "paragraph" and _blank_pair(lines, entry.start_line - 1):
            del lines[entry.start_line - 1]  # no double blank line where a paragraph was
        cut_from = entry.start_line
    return "".join(lines), removed[::-1]


def needles(entries: Iterable[tuple[Entry, str]]) -> list[bytes]:
    """What proves a journal or trash file holds a forgotten entry: its text, its raw lines,
    and each of its lines long enough not to be common."""
    found: set[str] = set()
    for entry, raw in entries:
        found.add(entry.text)
        found.add(raw.rstrip("\r\n"))
        found.update(
            line.strip() for line in entry.text.split("\n") if len(line.strip()) >= MIN_LINE_NEEDLE
        )
    return [n.encode("utf-8") for n in sorted(found) if n.strip()]


def _scrub_journal(state_dir: Path, texts: Iterable[bytes]) -> list[Path]:
    """Delete every write-journal file (``.mdmem/journal/**``, plain files of the bytes a
    program write replaced) that holds any of ``texts``. Nothing happens without a journal."""
    return _scrub_files(state_dir / JOURNAL_DIR, texts)


def _scrub_trash(root: Path, texts: Iterable[bytes]) -> list[Path]:
    """Delete every file under ``.trash/`` in the workspace root that holds any of ``texts``."""
    return _scrub_files(root / TRASH_DIR, texts)


def _scrub_files(folder: Path, texts: Iterable[bytes]) -> list[Path]:
    needles = [t for t in texts if t]
    if not folder.is_dir() or not needles:
        return []
    deleted: list[Path] = []
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(n in data for n in needles):
                path.unlink(missing_ok=True)
                deleted.append(path)
    return deleted


def _blank_pair(lines: list[str], index: int) -> bool:
    """Whether removing a paragraph left a blank line at ``index`` right after another one."""
    if not 0 <= index < len(lines) or lines[index].strip():
        return False
    return index == 0 or not lines[index - 1].strip()


ForgetIndexed = Callable[[set[str], list[tuple[Entry, str]]], tuple[int, int, bool]]
"""Drops the index rows, cached vectors and access counts of the entries with these ids (and
these removed texts); returns (rows, vectors, whether the index's WAL was truncated)."""


def forget(
    target: Entry,
    documents: Documents,
    writer: FileWriter,
    state_dir: Path,
    forget_indexed: ForgetIndexed,
) -> ForgetReport:
    """Forget ``target`` and every archived copy of its text: files first (through the safe
    writes), then the journal and ``.trash/`` (before the index: it may index ``.trash/``),
    then the index."""
    doomed = copies(target, documents.all().entries(include_archived=True))
    keys = {(e.path, e.id) for e in doomed}
    key = same_text(target.text)
    removed: list[tuple[Entry, str]] = []
    for rel in sorted({e.path for e in doomed}):

        def wanted(e: Entry, rel: str = rel) -> bool:
            return (rel, e.id) in keys or (e.archived and same_text(e.text) == key)

        removed += _cut(rel, wanted, documents, writer)
    texts = needles([(target, target.text), *removed])
    journal = _scrub_journal(state_dir, texts)
    trash = _scrub_trash(documents.root, texts)
    chunks, vectors, truncated = forget_indexed({e.id for e in doomed}, removed)
    writer.redactor.clear_memo()  # no copy left in this process's memory either
    warnings = [GIT_WARNING]
    others = [  # (the files as they are now: what was removed is gone)
        f"{e.id} ({e.path}:{e.start_line})"
        for e in documents.all().entries(include_archived=True)
        if key in same_text(e.text)
    ]
    if others:
        listed = ", ".join(others)
        warnings.append(f"other entries hold the same text (forget them too): {listed}")
    if not truncated:
        warnings.append(
            "a reader in another process kept the index WAL open: its old pages leave when "
            "the last process using the index closes it"
        )
    root = documents.root
    return ForgetReport(
        target.id,
        tuple(f"{e.path}:{e.start_line}-{e.end_line}" for e, _ in removed),
        chunks,
        vectors,
        tuple(p.relative_to(root).as_posix() for p in journal),
        tuple(p.relative_to(root).as_posix() for p in trash),
        truncated,
        tuple(warnings),
    )


def _cut(
    rel: str, wanted: Callable[[Entry], bool], documents: Documents, writer: FileWriter
) -> list[tuple[Entry, str]]:
    cut: list[tuple[Entry, str]] = []

    def edit(current: str) -> str:
        text, found = remove_entries(current, rel, wanted)
        cut[:] = found
        today = dt.datetime.now(dt.UTC).date()
        marks = [tombstones.of(entry.id, entry.text, today) for entry, _ in found]
        return tombstones.append(text, marks, today, "\r\n" if "\r\n" in current else "\n")

    writer.write(rel, edit, create=False)
    documents.forget(rel)
    return cut
