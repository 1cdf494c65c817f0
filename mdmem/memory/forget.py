"""``forget``: the one true delete, for a leaked secret or a person's data.

Everywhere else mdmem archives instead of deleting. Forgetting an entry removes its lines from
its file and every archived copy of the same text, its chunks from the index (with the deleted
bytes zeroed, FTS5 segments merged and the WAL truncated), its cached vectors, and any journal
or trash file holding it. Git history, backups and synced copies are out of reach: the report
says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import parse_document
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
