"""Reading workspace files safely, and writing them as a polite co-author.

Every program write: take a file lock, read, edit, compare-and-swap against what was read,
then replace atomically (temp file in the same folder, fsync, ``os.replace``, mode kept).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mdmem.errors import ConflictError, FileProblem, MdmemError

BINARY_SNIFF_BYTES = 8192
LOCK_TIMEOUT_S = 60.0
MAX_WRITE_ATTEMPTS = 8
TEMP_SUFFIX = ".mdmem-tmp"


Writer = Callable[[Callable[[str], str]], str]
"""Applies an edit (old text → new text) to one file safely; returns the text now on disk."""


class EditNotApplicable(MdmemError):
    """Raised by an edit function when the edit no longer makes sense on the current text."""


def decode_markdown(path: str, data: bytes, max_bytes: int) -> str:
    """Bytes of a workspace file → text, or a FileProblem naming the file and line."""
    check_size(path, len(data), max_bytes)
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise FileProblem(path, "binary file (NUL bytes), not Markdown")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
        col = exc.start - max(before.rfind(b"\n"), before.rfind(b"\r"))
        raise FileProblem(
            path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {col})", line
        ) from None
    return text.removeprefix("\ufeff")


def read_markdown(absolute: Path, rel: str, max_bytes: int) -> tuple[bytes, str]:
    """A workspace file's bytes and text; every way it can fail is a FileProblem naming it."""
    try:
        check_size(rel, absolute.stat().st_size, max_bytes)  # never read a huge file
        data = absolute.read_bytes()
    except FileNotFoundError:
        raise FileProblem(rel, "no such file (removed, or being replaced)") from None
    except IsADirectoryError:
        raise FileProblem(rel, "is a folder, not a file") from None
    except OSError as exc:
        raise FileProblem(rel, f"cannot read: {exc.strerror}") from None
    return data, decode_markdown(rel, data, max_bytes)


def check_size(path: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise FileProblem(
            path,
            f"too large ({size / 1e6:.1f} MB > {max_bytes / 1e6:.1f} MB); skipped. "
            "Raise files.max_file_mb in mdmem.toml to include it",
        )


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader or a crash sees the old or the new file."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = _default_mode()
    tmp = _temp_copy(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _temp_copy(path: Path, data: bytes, mode: int) -> str:
    """``data`` in a synced temp file beside ``path`` (named so a dead writer's is found)."""
    prefix = f".{path.name}.{os.getpid()}."
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a killed writer of ``path`` left behind (its process is gone)."""
    for temp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        pid = temp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                temp.unlink()


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class WriteResult:
    path: Path
    text: str
    """The text now on disk."""
    attempts: int
    """1 when nothing changed under us; more when the edit was redone on a person's save."""


def edit_file(
    path: Path,
    lock_path: Path,
    edit: Callable[[str], str],
    *,
    display: str,
    initial: str = "",
    max_bytes: int = 50_000_000,
    create: bool = True,
) -> WriteResult:
    """Apply ``edit`` (old text → new text) to ``path`` under a lock, compare-and-swap.

    If the file changes between our read and our write (a person saved it), the edit is redone
    on the new content. If it no longer applies there, ConflictError: nothing is written.
    With ``create=False`` a missing file is a FileProblem, not a new file.
    """
    from filelock import FileLock, Timeout

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S):
            remove_stale_temps(path)
            return _edit_locked(path, edit, display, initial, max_bytes, create)
    except Timeout:
        raise ConflictError(
            f"{display}: another mdmem process held the write lock for {LOCK_TIMEOUT_S:.0f} s "
            f"({lock_path}); nothing was written"
        ) from None


def _edit_locked(
    path: Path,
    edit: Callable[[str], str],
    display: str,
    initial: str,
    max_bytes: int,
    create: bool,
) -> WriteResult:
    for attempt in range(1, MAX_WRITE_ATTEMPTS + 1):
        before = read_bytes(path)
        if before is None and not create:
            raise FileProblem(display, "no such file: it was deleted or moved; nothing written")
        text = initial if before is None else decode_markdown(display, before, max_bytes)
        try:
            new_text = edit(text)
        except EditNotApplicable as exc:
            if attempt == 1:
                raise
            raise ConflictError(
                f"{display} changed while mdmem was writing it, and the change cannot be redone "
                f"on the new version: {exc}. Nothing was written; the file on disk is the "
                "person's version."
            ) from None
        if read_bytes(path) != before:
            continue  # someone saved in between: redo the edit on their version
        if new_text != text or before is None:
            bom = b"\xef\xbb\xbf" if before and before.startswith(b"\xef\xbb\xbf") else b""
            atomic_write(path, bom + new_text.encode("utf-8"))
        return WriteResult(path, new_text, attempt)
    raise ConflictError(
        f"{display} kept changing while mdmem tried to write it ({MAX_WRITE_ATTEMPTS} attempts); "
        "nothing was written"
    )


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` atomically, only if it does not exist (False if it does).

    The data is written to a temp file first and hard-linked into place, so the file appears
    whole or not at all, and two creators never both win.
    """
    tmp = _temp_copy(path, data, _default_mode())
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True
