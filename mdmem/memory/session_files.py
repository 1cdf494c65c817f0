"""The ``.sessions/`` folder: naming a new session's file, listing and finding sessions, and
marking the ones whose writer died."""

from __future__ import annotations

import builtins
import datetime as dt
import logging
from collections.abc import Callable
from pathlib import Path

from mdmem.config import check_name
from mdmem.errors import ConflictError, EntryNotFoundError, FileProblem
from mdmem.layout import SESSIONS_DIR
from mdmem.markdown import edits
from mdmem.memory.documents import Documents
from mdmem.memory.interrupted_sessions import InterruptedSweep, writer_stamp
from mdmem.memory.session_format import (
    SessionRecord,
    is_stamped,
    parse_session,
    session_skeleton,
    session_stem,
)
from mdmem.memory.session_writer import Session
from mdmem.memory.writers import FileWriter
from mdmem.writes.os_failures import write_failure
from mdmem.writes.safe_writer import EditFile, create_exclusive

log = logging.getLogger("mdmem")


class SessionFiles:
    """``ws.sessions``: the recorded sessions in ``.sessions/``: list them, read one. A session
    is started by ``ws.session(title)``, the one way to start one."""

    def __init__(
        self, documents: Documents, writer: FileWriter, allowed: Callable[[str], None]
    ) -> None:
        """``allowed(what)`` raises when the workspace may not write session files (any more:
        minimal mode)."""
        self._documents = documents
        self._writer = writer
        self._allowed = allowed
        self._folder = documents.root / SESSIONS_DIR
        self._sweep: InterruptedSweep | None = None
        self._on_written: Callable[[str, str], None] | None = None
        """Called with (path, new text) after each write of a session file (what automatic
        tier promotion listens to)."""

    def _start(self, title: str, agent: str, *, on_disk: bool) -> Session:
        """A new session named ``YYYYMMDD_HHMMSS_<agent>-<random id>_<slug>``
        (:func:`session_stem`; ``-2``, ``-3`` … in the unlikely case it is taken); kept in
        memory only unless ``on_disk``."""
        agent = check_name(agent, "agent")
        redactor = self._writer.redactor
        title = redactor(edits.check_text(title).split("\n", 1)[0])  # (and so the file name)
        started = dt.datetime.now()
        base = session_stem(started, agent, title)
        if not on_disk:
            return Session(
                base, title, agent, path=None, write=None, started=started, redactor=redactor
            )
        self.mark_interrupted()
        data = session_skeleton(title, agent, started, writer=writer_stamp()).encode("utf-8")
        for n in range(1, 1000):
            stem = base if n == 1 else f"{base}-{n}"
            try:  # (a full disk: one line naming the file, never a bare OSError)
                self._folder.mkdir(exist_ok=True)
                if create_exclusive(self._folder / f"{stem}.md", data):
                    break
            except OSError as exc:
                raise write_failure(f"{SESSIONS_DIR}/{stem}.md", exc) from None
        else:
            raise ConflictError(f"{SESSIONS_DIR}/{base}.md: too many sessions with this name")
        rel = f"{SESSIONS_DIR}/{stem}.md"
        return Session(
            stem, title, agent, path=rel, write=self._write(rel), started=started, redactor=redactor
        )

    def mark_interrupted(self) -> list[str]:
        if self._sweep is None:
            self._sweep = InterruptedSweep(
                self._folder, lambda n: self._write(f"{SESSIONS_DIR}/{n}")
            )
        return self._sweep.sweep()

    def list(
        self, agent: str | None = None, since: str | None = None, limit: int | None = None
    ) -> list[SessionRecord]:
        names = sorted((p.name for p in self._folder.glob("*.md")), reverse=True)
        # Files named YYYYMMDD_HHMMSS_… are read newest first and only as far as needed;
        # files named otherwise (by hand) are always read, then everything is sorted.
        stamped = [n for n in names if is_stamped(n)]
        found = [r for n in names if not is_stamped(n) if (r := self._or_warn(n))]
        found = [r for r in found if _matches(r, agent, since)]
        taken = 0
        for name in stamped:
            if limit is not None and taken >= limit:
                break
            record = self._or_warn(name)
            if record is not None and _matches(record, agent, since):
                found.append(record)
                taken += 1
        found.sort(key=lambda r: (r.started or "", r.id), reverse=True)
        return found if limit is None else found[:limit]

    def record(self, session_id: str) -> SessionRecord:
        """One session by id (file stem), path, or a unique part of its id."""
        name = session_id.removeprefix(f"{SESSIONS_DIR}/").removesuffix(".md")
        stems = sorted(p.stem for p in self._folder.glob("*.md"))
        matches = [s for s in stems if s == name] or [s for s in stems if name in s]
        if not matches:  # an archived session (.sessions/archive/YYYY-MM/) is found too
            old = {p.stem: p.relative_to(self._folder).as_posix() for p in self._archived()}
            hits = [s for s in old if s == name] or [s for s in old if name in s]
            if len(hits) == 1:
                return self._load(old[hits[0]])
        if len(matches) != 1:
            found = "no session" if not matches else f"{len(matches)} sessions"
            raise EntryNotFoundError(f"{found} matching {session_id!r} in {SESSIONS_DIR}/")
        return self._load(f"{matches[0]}.md")

    def _archived(self) -> builtins.list[Path]:  # list: the method above
        return sorted((self._folder / "archive").glob("*/*.md"))

    def _write(self, rel: str) -> EditFile:
        def write(edit: Callable[[str], str]) -> str:
            self._allowed("a session file")
            text = self._writer.write(rel, edit, create=False)
            if self._on_written is not None:
                self._on_written(rel, text)
            return text

        return write

    def _or_warn(self, name: str) -> SessionRecord | None:
        """A session file, or None with a warning naming it (one bad file spoils no listing)."""
        try:
            return self._load(name)
        except FileProblem as exc:
            log.warning("skipped %s", exc)
            return None

    def _load(self, name: str) -> SessionRecord:
        rel = f"{SESSIONS_DIR}/{name}"
        try:
            return parse_session(self._documents.read(rel))
        except (TypeError, ValueError, OverflowError) as exc:
            raise FileProblem(rel, f"cannot be read as a session: {exc}") from None


def _matches(record: SessionRecord, agent: str | None, since: str | None) -> bool:
    if agent is not None and record.agent != agent:
        return False
    return since is None or (record.started or "")[:10] >= since
