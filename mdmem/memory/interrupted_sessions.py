"""Sessions whose writer died: each session file names the process writing it (``host``,
``pid``, ``pid_start``); a ``running`` session of this host whose process is gone, or is
another process now, is marked ``interrupted``, and the temp files dead writers left in
``.sessions/`` are removed."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from mdmem.errors import MdmemError
from mdmem.markdown.frontmatter import head_frontmatter, set_frontmatter
from mdmem.writes.processes import pid_alive, process_start
from mdmem.writes.safe_writer import TEMP_SUFFIX, EditFile

log = logging.getLogger("mdmem")
_TEMP_RE = re.compile(rf"^\.(?P<file>.+)\.(?P<pid>\d+)\.[^.]+{re.escape(TEMP_SUFFIX)}$")
_HEAD_BYTES = 16_384
"""A session's frontmatter is read from the head of its file (it is a few lines)."""
_PEEK_BYTES = 2048
_RUNNING_RE = re.compile(r"^status:[ \t]*[\"']?running\b", re.M)


def writer_stamp() -> dict[str, object]:
    """The frontmatter keys naming this process as a session's writer: ``host``, ``pid`` and
    (where the system tells) ``pid_start``."""
    import socket  # (only a session started, or swept: not a hook's import or read)

    pid = os.getpid()
    stamp: dict[str, object] = {"host": socket.gethostname(), "pid": pid}
    start = process_start(pid)
    if start is not None:
        stamp["pid_start"] = start
    return stamp


def _alive(pid: int) -> bool:
    try:
        return pid_alive(pid)
    except (OverflowError, ValueError):  # no such pid on any system
        return False


def writer_gone(front: Mapping[str, object], host: str) -> bool:
    """Whether a session's writer is known to be dead: the session is ``running``, it was
    started on ``host`` (only that machine can look at its processes: a workspace shared
    through git holds sessions running elsewhere), and its process is gone or is another
    process now. A session without ``host`` and ``pid`` (written by hand) is never gone."""
    if str(front.get("status")) != "running" or str(front.get("host")) != host:
        return False
    pid = str(front.get("pid", ""))
    if not pid.isdigit():
        return False
    if not _alive(int(pid)):
        return True
    recorded, now = str(front.get("pid_start", "")), process_start(int(pid))
    return recorded.isdigit() and now is not None and int(recorded) != now


def mark_interrupted(text: str, host: str) -> str:
    """``status: interrupted`` if the session's writer is gone; nothing else changes."""
    front = head_frontmatter(text)
    if front is None or not writer_gone(front, host):
        return text
    return set_frontmatter(text, {"status": "interrupted"})


class InterruptedSweep:
    """Marks the sessions of ``folder`` whose writer died ``interrupted``, and removes the temp
    files dead writers left there.

    Cheap to call often: each session file is read once, then again only while this host runs
    it (a session ended, or running elsewhere, is settled); and when no file came or went in
    the folder, only the sessions this host runs are read.
    """

    def __init__(self, folder: Path, writer: Callable[[str], EditFile]) -> None:
        """``writer(name)`` writes ``folder/name`` safely."""
        self.folder = folder
        self._writer = writer
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._settled: set[str] = set()
        """Session files read once and left alone since: ended, or not this host's."""
        self._watch: set[str] = set()
        """Sessions this host was running, with a live writer, at the last look."""

    def sweep(self) -> list[str]:
        """Mark what is due; returns the ids of the sessions marked."""
        if not self._lock.acquire(blocking=False):
            return []  # another thread is sweeping right now
        try:
            try:
                stamp = self.folder.stat().st_mtime_ns
            except OSError:
                return []
            if stamp == self._stamp:  # no file came or went: only a writer may have died
                return self._mark(list(self._watch))
            self._stamp = stamp  # set first: a change while we look is seen next time
            names = self._scan()
            self._settled &= set(names)
            return self._mark([n for n in names if n not in self._settled])
        finally:
            self._lock.release()

    def _scan(self) -> list[str]:
        """The session files' names; the temp files of dead writers are removed on the way."""
        names: list[str] = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return names
        for entry in entries:
            if entry.name.endswith(".md"):
                names.append(entry.name)
            elif (match := _TEMP_RE.match(entry.name)) and not _alive(int(match["pid"])):
                try:
                    os.unlink(entry.path)
                except OSError:
                    continue
                log.info("%s/%s: removed (its writer is gone)", self.folder.name, entry.name)
        return names

    def _mark(self, names: list[str]) -> list[str]:
        import socket

        host = socket.gethostname()
        marked: list[str] = []
        watch: set[str] = set()
        folder = str(self.folder)
        for name in names:
            try:
                front = _file_frontmatter(os.path.join(folder, name))
            except OSError:
                continue
            if writer_gone(front, host):
                if self._mark_one(name, host):
                    marked.append(name.removesuffix(".md"))
            elif str(front.get("status")) == "running" and str(front.get("host")) == host:
                watch.add(name)  # alive now: its writer may die before the next look
            else:
                self._settled.add(name)
        self._watch = watch
        return marked

    def _mark_one(self, name: str, host: str) -> bool:
        try:
            self._writer(name)(lambda text: mark_interrupted(text, host))
        except (MdmemError, OSError) as exc:
            log.warning("%s/%s: not marked interrupted: %s", self.folder.name, name, exc)
            return False
        log.info("%s/%s: its writer is gone; marked interrupted", self.folder.name, name)
        return True


def _file_frontmatter(path: str) -> Mapping[str, object]:
    """The frontmatter of a session file, read only as far as needed: empty unless it may be
    ``running`` (most sessions ended long ago)."""
    with open(path, "rb") as handle:
        head = handle.read(_PEEK_BYTES)
        if b"running" not in head:
            return {}
        head += handle.read(_HEAD_BYTES - len(head))
    text = head.decode("utf-8", errors="replace")
    if not _RUNNING_RE.search(text):
        return {}
    return head_frontmatter(text) or {}
