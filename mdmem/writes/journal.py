"""The write journal: the bytes each program write replaced and wrote, kept where a person can
get them.

Every program write swaps its new file in and the old one out; the old file (the very inode an
editor may still have open) is moved here instead of being deleted, so a save that lands in it
after the swap is kept too. The bytes the write put in place are copied here as well (another
inode): an editor that truncates and rewrites the path from a stale copy destroys the file the
write made, never this copy. ``mdmem recover FILE`` lists and restores these versions. The
journal is bounded per file (versions and bytes) and lives in ``.mdmem/journal/``, owner-only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from mdmem.layout import PRIVATE_FILE_MODE, private_dir

JOURNAL_DIR = "journal"
REASONS = ("written", "replaced", "late-save", "conflict", "restored")
WRITTEN = "written"
_SEQ = itertools.count()


@dataclass(frozen=True)
class JournalEntry:
    """One earlier version of a file."""

    id: str
    """The entry's name in the journal (its time, process and a sequence number)."""
    path: Path
    file: str
    """The workspace file it is a version of."""
    time: dt.datetime
    size: int
    reason: str
    """``written`` (a program write put these bytes in place), ``replaced`` (a program write
    replaced it), ``late-save`` (a person's save that landed
    after a program write and was merged), ``conflict`` (the program's side of a merge the
    person's side won), ``restored`` (replaced by ``mdmem recover --restore``)."""

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "file": self.file,
            "time": self.time.isoformat(timespec="microseconds"),
            "size": self.size,
            "reason": self.reason,
            "path": str(self.path),
        }


class Journal:
    def __init__(self, state_dir: Path, versions: int = 50, max_bytes: int = 64_000_000) -> None:
        self.root = state_dir / JOURNAL_DIR
        self.versions = versions
        self.max_bytes = max_bytes
        self._prunes = 0

    def folder(self, rel: str) -> Path:
        return self.root / urllib.parse.quote(rel, safe="")

    def keep(self, rel: str, source: Path, reason: str = "replaced") -> Path:
        """Move ``source`` (a file beside ``rel`` that no path points to any more) into the
        journal, keeping its inode: an editor writing to it still writes into the journal."""
        target = self.new_path(rel, reason)
        try:
            os.rename(source, target)
        except OSError:  # another file system: copy, then drop the original
            shutil.copyfile(source, target)
            os.unlink(source)
        with contextlib.suppress(OSError):
            os.chmod(target, PRIVATE_FILE_MODE)
        self.prune(rel)
        return target

    def add(self, rel: str, data: bytes, reason: str) -> Path:
        """Keep ``data`` as a version of ``rel`` (a merged late save, a conflict's loser)."""
        target = self.new_path(rel, reason)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        self.prune(rel)
        return target

    def entries(self, rel: str) -> list[JournalEntry]:
        """Versions of ``rel``, newest first."""
        folder = self.folder(rel)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            entry = _entry(folder / name, rel)
            if entry is not None:
                out.append(entry)
        out.sort(key=lambda e: (e.time, e.id), reverse=True)
        return out

    def files(self) -> list[str]:
        """Workspace files that have versions in the journal."""
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        return [urllib.parse.unquote(n) for n in names if (self.root / n).is_dir()]

    def find(self, rel: str, entry_id: str) -> JournalEntry:
        """One version by id, or by its number in :meth:`entries` (1 = newest)."""
        entries = self.entries(rel)
        if entry_id.isdigit() and 1 <= int(entry_id) <= len(entries):
            return entries[int(entry_id) - 1]
        for entry in entries:
            if entry.id == entry_id:
                return entry
        raise KeyError(f"no version {entry_id!r} of {rel} in {self.folder(rel)}")

    def prune(self, rel: str) -> None:
        """Drop the oldest versions past ``versions`` or past ``max_bytes`` for this file.

        The program's own versions (``written``) and the others (what a write replaced, a
        merged save) are counted apart: the last ``versions`` program writes stay
        recoverable (within ``max_bytes``), however many saves came between. Names start with
        their time, so the oldest sort first: most calls list the folder and delete a file or
        two; the sizes are added up on every 16th call only."""
        folder = self.folder(rel)
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return
        written = [n for n in names if n.endswith("." + WRITTEN)]
        others = [n for n in names if not n.endswith("." + WRITTEN)]
        doomed = written[: max(0, len(written) - self.versions)]
        doomed += others[: max(0, len(others) - self.versions)]
        names = sorted(set(names) - set(doomed))
        self._prunes += 1
        if self._prunes % 16 == 0:
            total = 0
            for name in reversed(names):
                with contextlib.suppress(OSError):
                    total += (folder / name).stat().st_size
                if total > self.max_bytes and name != names[-1]:
                    doomed.append(name)
        for name in doomed:
            with contextlib.suppress(OSError):
                (folder / name).unlink()

    def scrub(self, needles: list[str]) -> int:
        """Delete every version holding any of ``needles`` (``mdmem forget``); returns how many."""
        wanted = [n.encode("utf-8") for n in needles if n]
        removed = 0
        if not wanted or not self.root.is_dir():
            return 0
        for path in self.root.rglob("*"):
            if not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(n in data for n in wanted):
                path.unlink()
                removed += 1
        return removed

    def new_path(self, rel: str, reason: str) -> Path:
        folder = private_dir(self.folder(rel))
        stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S.%f")
        return folder / f"{stamp}-{os.getpid()}-{next(_SEQ)}.{reason}"


def _entry(path: Path, rel: str) -> JournalEntry | None:
    name = path.name
    stem, _, reason = name.rpartition(".")
    stamp = stem.split("-", 1)[0]
    try:
        when = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f")
        size = path.stat().st_size
    except (ValueError, OSError):
        return None
    return JournalEntry(name, path, rel, when, size, reason)
