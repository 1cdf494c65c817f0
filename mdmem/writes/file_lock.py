"""An exclusive lock on a file, between processes: ``flock(2)`` on a lock file.

This is what mdmem used the ``filelock`` package for (its ``UnixFileLock``: the same system
call on the same files, so processes of either kind exclude each other), and no more. Since
filelock 3.2x, ``import filelock`` also imports asyncio and sqlite3 (its async and read-write
locks): about 115 ms on a loaded 2-core machine, 4-5 times ``python -c pass``, paid by every
short-lived process that writes (a Claude Code Stop hook imports a session: issue 41). The
kernel releases the lock when its process dies, whatever state it was left in. As filelock
does, a missing folder of the lock file is made.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from types import TracebackType


class Timeout(TimeoutError):
    """The lock was not acquired within the timeout (another process holds it)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the lock {path} could not be acquired")
        self.path = path


class FileLock:
    """``with FileLock(path, timeout=5):`` — held while the block runs.

    ``timeout`` in seconds (``-1``: wait as long as it takes; ``0``: one try); ``mode`` for the
    lock file when it is created; ``poll_interval`` between tries. One object is one hold:
    a second ``FileLock`` on the same path, even in this process, waits for the first.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        timeout: float = -1,
        mode: int = 0o644,
        poll_interval: float = 0.05,
    ) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.mode = mode
        self.poll_interval = poll_interval
        self._fd: int | None = None

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float | None = None) -> FileLock:
        """Wait for the lock (``timeout``: this call's, else the lock's); Timeout if another
        process holds it all that time."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path}: this lock is already held")
        wait = self.timeout if timeout is None else timeout
        deadline = None if wait < 0 else time.monotonic() + wait
        while True:
            fd = self._try()
            if fd is not None:
                self._fd = fd
                return self
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(self.path)
            time.sleep(self.poll_interval)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _try(self) -> int | None:
        """The locked descriptor, or None if another holds the lock."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
            except FileNotFoundError:  # its folder is missing: made, as filelock makes it
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, self.mode)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return None
                raise
            if os.fstat(fd).st_nlink:
                return fd
            os.close(fd)  # unlinked between our open and our lock: lock the file there now

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
