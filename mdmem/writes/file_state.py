"""One version of a file as the safe writes see it: its identity on disk, and its bytes once an
editor has stopped writing them."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

QUIET_S = 0.005
"""A file changed less than this long ago may still be being written (file timestamps are
coarse: a few ms). Waiting for quiet is bounded by ``QUIET_LIMIT_S``: a person saving every
few ms must not starve the program, and the swap check catches what the wait did not."""


QUIET_LIMIT_S = 0.1


EMPTY_QUIET_S = 1.0
"""A file that just became empty is most likely an in-place save between truncate and write:
wait up to this long for it to fill."""


SLOW_SAVE_S = 2.0
"""An in-place save may pause between its chunks (a big file, a slow or network disk): a file
another process still holds open for writing, changed less than this long ago, is waited for
(up to this long) before a program write takes it as its base."""


BOM = b"\xef\xbb\xbf"
_LEASE_SIGNAL = signal.SIGURG
"""A lease broken while we hold it (for microseconds) signals its holder: SIGIO by default,
which ends a process; SIGURG is ignored unless a program asks for it."""


def read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def open_for_writing(fd: int) -> bool | None:
    """Whether any process holds the file behind ``fd`` open for writing (an in-place save in
    progress, or paused between chunks); None when this system cannot tell.

    Asks the kernel for a read lease, which it grants only when nobody has the file open for
    writing (Linux ``F_SETLEASE``; needs the file's owner or CAP_LEASE, and not every file
    system has leases), and gives it back at once."""
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    set_lease, set_signal = getattr(fcntl, "F_SETLEASE", None), getattr(fcntl, "F_SETSIG", None)
    if set_lease is None or set_signal is None:  # not Linux
        return None
    try:
        fcntl.fcntl(fd, set_signal, _LEASE_SIGNAL)
        fcntl.fcntl(fd, set_lease, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno == errno.EAGAIN else None
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, set_lease, fcntl.F_UNLCK)
    return False


def save_in_progress(fd: int, state: FileState, within: float = SLOW_SAVE_S) -> bool:
    """A file changed less than ``within`` seconds ago that another process is still writing:
    held open for writing, or (where that cannot be told) ending in a torn line."""
    if state.size == 0 or time.time_ns() - state.mtime_ns > within * 1e9:
        return False
    writing = open_for_writing(fd)
    if writing is not None:
        return writing
    return os.pread(fd, 1, state.size - 1) != b"\n"


@dataclass(frozen=True)
class FileState:
    """What identifies one version of a file on disk, cheaply."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileState:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    @classmethod
    def unseen(cls) -> FileState:
        """A state no file has: a file watched from this state is checked at once."""
        return cls(0, 0, -1, 0, 0)

    def settle_wait(self, expected: FileState | None, quiet: float = QUIET_S) -> float:
        """Seconds to wait before this version may be read as finished (0: now)."""
        if self == expected:
            return 0.0
        age = (time.time_ns() - max(self.mtime_ns, self.ctime_ns)) / 1e9
        if self.size == 0 and (expected is None or expected.size):
            quiet = EMPTY_QUIET_S
        return max(0.0, quiet - age)

    def line(self) -> str:
        return f"{self.dev} {self.ino} {self.size} {self.mtime_ns} {self.ctime_ns}"

    @classmethod
    def parse(cls, text: str) -> FileState | None:
        try:
            dev, ino, size, mtime, ctime = (int(x) for x in text.split())
        except ValueError:
            return None
        return cls(dev, ino, size, mtime, ctime)


def settled_bytes(fd: int, state: FileState, quiet: float = QUIET_S) -> tuple[bytes, FileState]:
    """The content behind ``fd`` once nobody has written to it for ``quiet`` seconds."""
    limit = EMPTY_QUIET_S if state.size == 0 else max(QUIET_LIMIT_S, 4 * quiet)
    deadline = time.monotonic() + limit
    while True:
        wait = state.settle_wait(None, quiet)
        if wait <= 0:
            data = read_all(fd)
            after = FileState.of(os.fstat(fd))
            if after == state:
                return data, state
            state = after
            continue
        if time.monotonic() > deadline:
            return read_all(fd), FileState.of(os.fstat(fd))
        time.sleep(min(wait, 0.01))
        state = FileState.of(os.fstat(fd))


@dataclass(frozen=True)
class Target:
    """A workspace file as the writer sees it."""

    path: Path
    """The real file (symlinks inside the workspace resolved)."""
    rel: str
    max_bytes: int = 50_000_000
