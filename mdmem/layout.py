"""Where things are: finding the workspace (like git finds its repository), the files a
workspace holds, and the layout of ``.mdmem/``. Light on purpose: the CLI's fast path (asking
the warm server) uses it without importing the rest of mdmem."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from mdmem.errors import WorkspaceNotFoundError

ENV_VAR = "MDMEM_WORKSPACE"
MARKERS = ("mdmem.toml", "memory.md")
MEMORY_FILE = "memory.md"
LEARNINGS_FILE = "learnings.md"
TASK_FILE = "task_process.md"
WORLD_FILE = "world_state.md"
COMPACT_FILE = ".compact_memory.md"
KNOWLEDGE_FILES = (MEMORY_FILE, LEARNINGS_FILE)
SESSIONS_DIR = ".sessions"
STATE_DIR = ".mdmem"
SOCKET_NAME = "server.sock"
WATCHER_FILE = "watcher.json"
WATCHER_LOCK = "watcher.lock"
"""Held (flock) by the one watcher of a workspace for its whole life; holds its pid."""
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to ~104-108 bytes
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def find_root(path: str | os.PathLike[str] | None = None) -> Path:
    if path is not None:
        root = Path(path).expanduser().absolute()
        if not root.is_dir():
            raise WorkspaceNotFoundError(f"workspace {root} does not exist or is not a folder")
        return root
    env = os.environ.get(ENV_VAR)
    if env:
        root = Path(env).expanduser().absolute()
        if not root.is_dir():
            raise WorkspaceNotFoundError(f"${ENV_VAR}={env} is not a folder")
        return root
    here = Path.cwd().absolute()
    for folder in (here, *here.parents):
        if any((folder / marker).is_file() for marker in MARKERS):
            return folder
    raise WorkspaceNotFoundError(
        f"no mdmem workspace in {here} or any folder above it (looked for {' or '.join(MARKERS)}). "
        f"Create one with `mdmem init`, or pass -w PATH or set ${ENV_VAR}."
    )


def socket_path(root: Path) -> Path:
    """Where the warm query server listens: inside ``.mdmem/``, unless that path is too long
    for a Unix socket, then a per-user, per-workspace name in the temp folder."""
    inside = root / STATE_DIR / SOCKET_NAME
    if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
        return inside
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"mdmem-{os.getuid()}" / f"{digest}.sock"


def running_watcher(root: Path) -> int | None:
    """The pid of the watcher (and query server) running on this workspace, or None.

    Decided by the lock it holds for its whole life, never by a ping: a busy watcher still
    holds it, a dead one holds nothing. 0 when the holder has not written its pid yet.
    """
    import fcntl

    try:
        fd = os.open(root / STATE_DIR / WATCHER_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return _pid_in(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else 0


def private_dir(folder: Path) -> Path:
    """Create ``folder`` (``.mdmem/`` or a folder inside it) owner-only, and make it so if it
    exists: the state folder holds every word of the workspace (index, journal, caches)."""
    still_there(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    _restrict(folder, PRIVATE_DIR_MODE)
    for parent in folder.parents:  # every folder from .mdmem/ down to this one
        if STATE_DIR not in parent.parts:
            break
        _restrict(parent, PRIVATE_DIR_MODE)
    return folder


def still_there(folder: Path) -> None:
    """Raise ``FileNotFoundError`` when ``folder`` lies in a ``.mdmem/`` whose workspace folder
    is gone: a watcher or server still running in a workspace deleted with ``rm -rf`` must not
    make it again (a new index, a lock) on its way out. An ``OSError``, so the writers that
    already handle a folder they cannot write (a heartbeat, a sync) handle this one too."""
    for part in (folder, *folder.parents):
        if part.name == STATE_DIR:
            if not part.parent.is_dir():
                why = "the workspace folder was deleted; its state is not made again"
                raise FileNotFoundError(errno.ENOENT, why, str(part.parent))
            return


def private_file(path: Path) -> Path:
    """Make sure ``path`` exists and is owner-only (0600), without touching the umask.

    A file already there is never opened: closing any descriptor of a file drops every POSIX
    lock this process holds on it, and SQLite's locks on the index are such locks. A process
    that opened the index twice then held none, and another process, closing its connection
    as the last one, deleted the ``-wal`` and ``-shm`` files under this one's connections (its
    next open failed with "disk I/O error"). A symlink or a folder in its place is an error
    (ELOOP, EISDIR), never followed or changed."""
    private_dir(path.parent)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW
    while True:
        try:
            os.close(os.open(path, flags, PRIVATE_FILE_MODE))  # made by this call: no lock on it
            break
        except FileExistsError:
            pass
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue  # deleted meanwhile (an index rebuilt by another process): make it
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, "a symlink in place of a private file", str(path))
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder in place of a file", str(path))
        break
    _restrict(path, PRIVATE_FILE_MODE)
    return path


def _restrict(path: Path, mode: int) -> None:
    try:
        if path.stat().st_mode & 0o777 != mode:
            os.chmod(path, mode)
    except OSError:
        pass  # not ours to change (another user's folder): reading still works
