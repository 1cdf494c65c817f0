"""What an ``OSError`` met while writing means to a user: a full disk said as such, the file
named. Helpers of the writing code and the CLI, not API: the errors they build are in
:mod:`mdmem.errors`."""

from __future__ import annotations

import errno

from mdmem.errors import DiskFullError, FileProblem, MdmemError

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says there is no room left: no space, over quota, SQLite's SQLITE_FULL."""
    if isinstance(exc, OSError):
        return exc.errno in NO_SPACE_ERRNOS
    return (getattr(exc, "sqlite_errorname", "") or "").startswith("SQLITE_FULL")


def write_failure(path: str, exc: OSError) -> MdmemError:
    """The one-line error for ``exc``, raised writing ``path`` (workspace-relative)."""
    if isinstance(exc, MdmemError):
        return exc
    if disk_full(exc):
        return DiskFullError(path)
    return FileProblem(path, f"cannot write: {exc.strerror or exc}")


def os_error_line(exc: OSError) -> str:
    """One line for an OSError nothing closer handled: the file it names, and what went wrong
    (a full disk said as such)."""
    where = f"{exc.filename}: " if exc.filename else ""
    if disk_full(exc):
        return f"{where}the disk is full (no space left on device); free some space and try again"
    return f"{where}{exc.strerror or exc}"
