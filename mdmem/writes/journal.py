"""The write journal: the bytes each program write replaced and wrote, kept where a person can
get them.

Every program write swaps its new file in and the old one out; the old file (the very inode an
editor may still have open) is moved here instead of being deleted, so a save that lands in it
after the swap is kept too. The bytes the write put in place are copied here as well (another
inode): an editor that truncates and rewrites the path from a stale copy destroys the file the
write made, never this copy. ``mdmem recover FILE`` lists and restores these versions. The
journal lives in ``.mdmem/journal/``, owner-only, and is bounded at every write: per file by
count and bytes, over all files by bytes (:meth:`Journal.prune`). A replaced version identical
to the written one before it is linked to that one's file, so an unedited version is stored
once; what a late-save window may still need (a recent version) is never dropped for bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import os
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from mdmem.layout import PRIVATE_FILE_MODE, private_dir

JOURNAL_DIR = "journal"
REASONS = ("written", "replaced", "late-save", "conflict", "restored")
WRITTEN = "written"
_SEQ = itertools.count()
PROTECT_S = 1.0
"""Versions kept or changed this recently are not dropped for bytes nor shared: four default
late-save windows (the workspace sets four of ``write.late_save_ms``)."""
USAGE = ".usage.json"
"""In the journal's root: each file's folder and the bytes it held at its last prune."""
USAGE_LOCK = ".usage.lock"


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
    def __init__(
        self,
        state_dir: Path,
        versions: int = 50,
        max_bytes: int = 8_000_000,
        *,
        total_bytes: int = 32_000_000,
        protect_s: float = PROTECT_S,
    ) -> None:
        self.root = state_dir / JOURNAL_DIR
        self.versions = versions
        self.max_bytes = max_bytes
        """Per file (``write.journal_mb``)."""
        self.total_bytes = total_bytes
        """Over every file (``write.journal_total_mb``)."""
        self.protect_s = protect_s
        """Versions kept or changed this recently are never dropped for bytes nor shared: a
        late-save window may still be open on them (the guard merges a save that lands in a
        replaced file, and ``mdmem recover`` is where that save is when the merge fails)."""

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

    def size(self) -> int:
        """Bytes the journal holds (each file once, however many versions name it)."""
        return sum(_stored(v) for v in self._scan().values())

    def prune(self, rel: str) -> None:
        """Bound this file's versions, then the whole journal; called after each version kept.

        For the file (its own folder only: a listing and a stat per version, every call):

        - a ``replaced`` version byte-identical to the ``written`` one before it (nobody edited
          the file between two program writes: the usual case) becomes a second name of that
          one's file, so it is listed and restored as before and stored once;
        - the program's own versions (``written``) and the others (what a write replaced, a
          merged save) are counted apart: the last ``versions`` of each stay (the last program
          writes stay recoverable however many saves came between);
        - then the oldest go until the file's versions hold at most ``max_bytes``.

        Then, if the journal's recorded total is past ``total_bytes``, every file's versions
        are listed and the oldest go (any file's) until it is down to nine tenths of it.

        Whatever the caps, each file keeps its newest version and its newest ``written`` one
        (the last acknowledged write: ``mdmem recover`` always finds it), and nothing kept or
        changed in the last ``protect_s`` is dropped or shared."""
        folder = self.folder(rel)
        versions = _list(folder)
        if not versions:
            return
        now = time.time()
        self._share_duplicates(versions, now)
        doomed = _over_count(versions, self.versions)
        kept = [v for v in versions if v not in doomed]
        doomed += _over_bytes(kept, self.max_bytes, now - self.protect_s)
        for version in doomed:
            with contextlib.suppress(OSError):
                version.path.unlink()
        kept = [v for v in kept if v not in doomed]
        self._account(folder.name, _stored(kept))

    def _share_duplicates(self, versions: list[_Version], now: float) -> None:
        """Each ``replaced`` version (older than ``protect_s``, and unchanged since) that holds
        exactly the bytes of the ``written`` version before it is made a hard link to it."""
        last_written: _Version | None = None
        for i, version in enumerate(versions):
            if version.reason == WRITTEN:
                last_written = version
                continue
            if (
                version.reason != "replaced"
                or last_written is None
                or version.ino == last_written.ino
                or version.size != last_written.size
                or version.touched > now - self.protect_s
            ):
                continue
            try:
                if version.path.read_bytes() != last_written.path.read_bytes():
                    continue
                link = version.path.with_name(version.path.name + ".link")
                os.link(last_written.path, link)
                os.replace(link, version.path)
            except OSError:
                continue
            versions[i] = dataclasses.replace(version, ino=last_written.ino)

    # ---- the cap over every file ---------------------------------------------------------------

    def _account(self, folder_name: str, stored: int) -> None:
        """Record this folder's bytes in the journal's usage file; past ``total_bytes``, prune
        across files. The usage file is a cache (one small read and write per prune), rebuilt
        from the folders whenever the total is checked; under its own lock."""
        from mdmem.writes.file_lock import FileLock, Timeout

        try:
            with FileLock(str(self.root / USAGE_LOCK), timeout=30, mode=PRIVATE_FILE_MODE):
                usage = _read_usage(self.root / USAGE)
                usage[folder_name] = stored
                if sum(usage.values()) > self.total_bytes:
                    usage = self._prune_all()
                _write_usage(self.root / USAGE, usage)
        except (OSError, Timeout):
            return  # the cap is checked again at the next write

    def _prune_all(self) -> dict[str, int]:
        """Drop the oldest versions of any file until the journal holds at most nine tenths of
        ``total_bytes`` (each file's newest and newest ``written`` stay, and recent ones);
        returns each folder's bytes after."""
        folders = self._scan()
        floor = time.time() - self.protect_s
        names: dict[int, int] = {}
        sizes: dict[int, int] = {}
        candidates: list[_Version] = []
        for versions in folders.values():
            for version in versions:
                names[version.ino] = names.get(version.ino, 0) + 1
                sizes[version.ino] = version.size
            keep = _always_kept(versions, floor)
            candidates += [v for v in versions if v not in keep]
        total = sum(sizes.values())
        target = self.total_bytes * 9 // 10
        gone: set[Path] = set()
        for version in sorted(candidates, key=lambda v: (v.time, v.path.name)):
            if total <= target:
                break
            with contextlib.suppress(OSError):
                version.path.unlink()
                gone.add(version.path)
                names[version.ino] -= 1
                if names[version.ino] == 0:
                    total -= sizes[version.ino]
        return {
            name: _stored([v for v in versions if v.path not in gone])
            for name, versions in folders.items()
        }

    def _scan(self) -> dict[str, list[_Version]]:
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return {}
        return {n: v for n in names if (v := _list(self.root / n))}

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
        when = _name_time(stamp)
        size = path.stat().st_size
    except (ValueError, OSError):
        return None
    return JournalEntry(name, path, rel, when, size, reason)


_STAMP = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}")
"""A version's name's time as :meth:`Journal.new_path` writes it (``%Y%m%dT%H%M%S.%f``)."""


def _name_time(stamp: str) -> dt.datetime:
    """The time in a version's name (ValueError if none). Read field by field when it has the
    width mdmem writes: the same value as ``strptime``'s, without its first call's cost (it
    imports ``_strptime``, ``locale`` and ``calendar`` and compiles its patterns, ~20 ms of
    a Stop hook that keeps a version); any other name goes through ``strptime``."""
    if _STAMP.fullmatch(stamp):
        s = stamp
        return dt.datetime(
            int(s[0:4]), int(s[4:6]), int(s[6:8]), int(s[9:11]), int(s[11:13]),
            int(s[13:15]), int(s[16:22]),
        )  # fmt: skip
    return dt.datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f")


@dataclass(frozen=True)
class _Version:
    """A version as pruning sees it: its name's time, its file's inode, size and change time."""

    path: Path
    reason: str
    time: float
    ino: int
    size: int
    touched: float
    """When it was kept or last changed (a save landing in a replaced file), on the epoch."""


def _list(folder: Path) -> list[_Version]:
    """A folder's versions, oldest first (names start with their time)."""
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        stem, _, reason = name.rpartition(".")
        try:
            when = _name_time(stem.split("-", 1)[0]).timestamp()
            info = os.stat(folder / name, follow_symlinks=False)
        except (ValueError, OSError):
            continue
        touched = max(when, info.st_mtime)
        out.append(_Version(folder / name, reason, when, info.st_ino, info.st_size, touched))
    return out


def _stored(versions: list[_Version]) -> int:
    """Bytes on disk: a file that several versions name counts once."""
    return sum({v.ino: v.size for v in versions}.values())


def _always_kept(versions: list[_Version], floor: float) -> set[_Version]:
    """Never dropped for bytes: the newest version, the newest ``written`` one, and any kept
    or changed after ``floor``."""
    kept = {v for v in versions if v.touched > floor}
    kept.add(versions[-1])
    written = [v for v in versions if v.reason == WRITTEN]
    if written:
        kept.add(written[-1])
    return kept


def _over_count(versions: list[_Version], most: int) -> list[_Version]:
    """The oldest past ``most`` of the program's versions, and of the others (counted apart)."""
    written = [v for v in versions if v.reason == WRITTEN]
    others = [v for v in versions if v.reason != WRITTEN]
    return written[: max(0, len(written) - most)] + others[: max(0, len(others) - most)]


def _over_bytes(versions: list[_Version], most: int, floor: float) -> list[_Version]:
    """The oldest versions past ``most`` bytes (counted newest first, each file once)."""
    keep = _always_kept(versions, floor)
    seen: set[int] = set()
    total = 0
    doomed = []
    for version in reversed(versions):
        if version.ino not in seen:
            seen.add(version.ino)
            total += version.size
        if total > most and version not in keep:
            doomed.append(version)
    return doomed


def _read_usage(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): int(v) for k, v in data.items() if isinstance(v, int)}


def _write_usage(path: Path, usage: dict[str, int]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(usage, handle)
    os.replace(tmp, path)
