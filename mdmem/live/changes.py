"""The kernel's own record of what changed, read on demand: a watcher's word on freshness holds
only up to the last event it has handled, and a search must see every write that completed
before it started.

Linux queues an inotify event before the write (or rename, create, delete) that caused it
returns. So a non-blocking read of an inotify descriptor at the moment a search starts finds
every change made before it that nobody has read yet: a barrier, exact, at the cost of one
``read`` that finds nothing. The watchdog observer has its own descriptor, read by its threads
at their own pace; this one is read by :meth:`KernelChanges.drain` only, from a thread of its
own (so the queue never overflows and a removal of the state folder is heard at once) and by
each search, each drain reporting what it read before it returns.

It watches what the observer watches (every folder but the ignored ones), plus ``.mdmem/``
itself for the removal of the watcher's own files. Elsewhere than Linux there is no such
barrier: :func:`open_changes` returns None and the watcher gives no word.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

FOLDER_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
"""Every way a folder's files change (content, names, the folder itself going)."""
STATE_MASK = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
"""``.mdmem/``: only its files going (a removal of the workspace under way)."""
SELF_GONE = IN_DELETE_SELF | IN_MOVE_SELF
EVENT = struct.Struct("iIII")
BUFFER = 64 * 1024


@dataclass(frozen=True)
class Heard:
    """What one drain read: changed paths (relative to the root, with whether each is a
    folder), the names removed from the state folder, and whether events were lost (the
    kernel's queue overflowed: anything may have changed)."""

    paths: tuple[tuple[str, bool], ...] = ()
    state_removed: tuple[str, ...] = ()
    lost: bool = False


@dataclass
class KernelChanges:
    """An inotify descriptor on every folder of a workspace, drained on demand."""

    root: Path
    state_name: str
    ignored: frozenset[str]
    on_heard: Callable[[Heard], None]
    """Called with what each drain read, before the drain returns (under its lock)."""
    complete: bool = True
    """Every folder is watched (False once a watch could not be added: the watcher then
    gives no word)."""
    _fd: int = -1
    _libc: ctypes.CDLL | None = None
    _folders: dict[int, str] = field(default_factory=dict)
    _state_wd: int = -1
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _wake: tuple[int, int] | None = None

    def start(self) -> KernelChanges:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._fd = fd
        with self._lock:
            self._rewatch()
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._run, name="mdmem-changes", daemon=True)
        self._thread.start()
        return self

    def drain(self) -> Heard:
        """Read every event queued so far and report it (``on_heard``) before returning: a
        change made before this call is then known to whoever ``on_heard`` tells."""
        with self._lock:
            if self._fd < 0:
                return Heard()
            heard = self._read()
            if any(folder for _, folder in heard.paths) or heard.lost:
                self._rewatch()  # a folder made, moved or gone: watch what is there now
            if heard.paths or heard.state_removed or heard.lost:
                self.on_heard(heard)
            return heard

    def close(self) -> None:
        if self._wake is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake[1], b"!")
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        if self._wake is not None:
            for end in self._wake:
                os.close(end)
            self._wake = None

    # ---- inside -------------------------------------------------------------------------

    def _run(self) -> None:
        assert self._wake is not None
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake[0], select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake[0] in ready:
                return
            self.drain()

    def _read(self) -> Heard:
        paths: dict[tuple[str, bool], None] = {}
        removed: list[str] = []
        lost = False
        while True:
            try:
                data = os.read(self._fd, BUFFER)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            offset = 0
            while offset + EVENT.size <= len(data):
                wd, mask, _cookie, size = EVENT.unpack_from(data, offset)
                raw = data[offset + EVENT.size : offset + EVENT.size + size].rstrip(b"\0")
                offset += EVENT.size + size
                name = os.fsdecode(raw)
                if mask & IN_Q_OVERFLOW:
                    lost = True
                elif wd == self._state_wd:
                    if mask & SELF_GONE:
                        removed.append(".")
                    elif name:
                        removed.append(name)
                elif mask & IN_IGNORED:
                    self._folders.pop(wd, None)
                elif (folder := self._folders.get(wd)) is not None:
                    if name:
                        rel = f"{folder}/{name}" if folder else name
                        paths[(rel, bool(mask & IN_ISDIR))] = None
                    elif mask & SELF_GONE:
                        paths[(folder or ".", True)] = None
        return Heard(tuple(paths), tuple(removed), lost)

    def _rewatch(self) -> None:
        """Watch every folder there is now (one already watched keeps its descriptor) and
        forget the ones that went."""
        seen: dict[int, str] = {}
        complete = True
        for rel in self._walk():
            wd = self._add(rel, FOLDER_MASK)
            if wd is None:  # (a folder gone meanwhile is no gap: its removal was heard)
                if rel == "" or (self.root / rel).is_dir():
                    complete = False
                continue
            seen[wd] = rel
        for wd in set(self._folders) - set(seen):
            if self._libc is not None:
                self._libc.inotify_rm_watch(self._fd, wd)
        self._folders = seen
        state = self._add(self.state_name, STATE_MASK)
        self._state_wd = -1 if state is None else state
        self.complete = complete

    def _walk(self) -> list[str]:
        found = [""]
        for top, folders, _files in os.walk(self.root):
            folders[:] = [f for f in folders if f not in self.ignored and f != self.state_name]
            rel = os.path.relpath(top, self.root)
            for name in folders:
                found.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
        return found

    def _add(self, rel: str, mask: int) -> int | None:
        assert self._libc is not None
        path = os.fsencode(self.root / rel) if rel else os.fsencode(self.root)
        wd = self._libc.inotify_add_watch(self._fd, path, mask)
        return None if wd < 0 else int(wd)


def open_changes(
    root: Path, state_name: str, ignored: frozenset[str], on_heard: Callable[[Heard], None]
) -> KernelChanges | None:
    """The workspace's kernel changes, started; None where there is no inotify (not Linux,
    or no descriptor left: ``fs.inotify.max_user_instances``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return KernelChanges(root, state_name, ignored, on_heard).start()
    except OSError:
        return None
