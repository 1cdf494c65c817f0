"""Moving compacted old sessions to ``.sessions/archive/YYYY-MM/`` so ``.sessions/`` stays
short. The archive is still indexed and searched; nothing is lost.

A move is made under the session file's write lock: the bytes are copied to the new name
(created exclusively, synced), then the old name is removed only if the file still holds
exactly those bytes (a person's save in between cancels the move). Killed between the two,
both names hold the same bytes, and the next run finishes the move.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from mdmem.errors import ConflictError
from mdmem.memory.documents import Documents
from mdmem.memory.session_format import SessionRecord
from mdmem.memory.tiers import ARCHIVE_DIR, session_records
from mdmem.writes.safe_writer import SafeWriter, create_exclusive, read_bytes


@dataclass(frozen=True)
class Move:
    session: str
    source: str
    target: str
    done: bool
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


def archive_target(record: SessionRecord) -> str:
    month = (record.started or "0000-00")[:7]
    return f"{ARCHIVE_DIR}/{month}/{record.id}.md"


def due(documents: Documents, days: int, today: dt.date | None = None) -> list[SessionRecord]:
    """Sessions in ``.sessions/`` (not archived yet), compacted (a ``## Summary``), not
    running, that started more than ``days`` days ago; none when ``days`` is 0."""
    if days <= 0:
        return []
    cutoff = ((today or dt.date.today()) - dt.timedelta(days=days)).isoformat()
    return [
        r
        for r in session_records(documents, archived=False)
        if r.summary and r.status != "running" and r.started and r.started[:10] < cutoff
    ]


def archive_sessions(
    documents: Documents, safe: SafeWriter, records: list[SessionRecord], dry_run: bool = False
) -> list[Move]:
    return [_move(documents, safe, r, dry_run) for r in records if r.path]


def _move(documents: Documents, safe: SafeWriter, record: SessionRecord, dry_run: bool) -> Move:
    source = record.path or ""
    target = archive_target(record)
    if dry_run:
        return Move(record.id, source, target, False, "dry run")
    _, src = documents.resolve(source)
    _, dst = documents.resolve(target)
    try:
        with safe.locked(source, source):
            data = read_bytes(src)
            if data is None:
                return Move(record.id, source, target, False, "gone")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not create_exclusive(dst, data) and read_bytes(dst) != data:
                return Move(record.id, source, target, False, f"{target} exists with other text")
            if read_bytes(src) != data:  # a save in between: keep both, move nothing
                os.unlink(dst)
                return Move(record.id, source, target, False, "changed during the move")
            os.unlink(src)
            _fsync_dir(src.parent)
    except ConflictError as exc:
        return Move(record.id, source, target, False, str(exc))
    documents.forget(source)
    return Move(record.id, source, target, True)


def _fsync_dir(folder: os.PathLike[str]) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
