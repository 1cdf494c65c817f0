"""Errors mdmem raises. Every one names the file (and line) it is about when there is one."""

from __future__ import annotations

import errno


class MdmemError(Exception):
    """Base class: anything mdmem raises on purpose."""


class WorkspaceNotFoundError(MdmemError):
    """No workspace at the given path, in MDMEM_WORKSPACE, or above the current folder."""


class ConfigError(MdmemError):
    """mdmem.toml is unreadable, or has an unknown key or a value of the wrong type."""


class UnsafePathError(MdmemError):
    """A name would read or write outside the workspace (``../``, absolute, symlink out)."""


class InvalidNameError(MdmemError, ValueError):
    """An agent, session or source name that is not a plain name."""


class FileProblem(MdmemError):
    """A workspace file that cannot be read or parsed as it is. The file is left untouched."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class EntryNotFoundError(MdmemError):
    """No entry with that id in the workspace."""


class ConflictError(MdmemError):
    """A file changed under a program write in a way the write cannot be redone on.

    Nothing was written: the person's version of the file is what is on disk.
    """


class ModeError(MdmemError):
    """The operation belongs to the other mode (minimal writes no session, task or world files)."""


class EditNotApplicable(MdmemError):
    """Raised by an edit function when the edit no longer makes sense on the current text."""


class VersionConflict(ConflictError):
    """A shared-pool write expected one version of a key and found another; nothing written.

    ``actual`` is the version found (0: no such key), or ``"edited by hand"`` when a person
    changed the entry since the program wrote it (or since the writer read it).
    """

    def __init__(self, key: str, expected: int, actual: int | str, path: str = "") -> None:
        self.key = key
        self.expected = expected
        self.actual = actual
        where = f"{path}: " if path else ""
        found = actual if isinstance(actual, str) else f"version {actual}"
        super().__init__(
            f"{where}pool key {key!r}: expected version {expected}, found {found}; nothing "
            "was written (read it again and retry)"
        )


class ScopeError(MdmemError):
    """A write the scope policy refuses (docs/sharing.md): names the agent, scope and rule."""


class ParentCycleError(ConfigError):
    """Workspaces whose ``parent`` settings lead back to themselves; names every step."""


class QueryTooLongError(MdmemError, ValueError):
    """A search query longer than a search takes (``index.search.MAX_QUERY_CHARS``): every
    stage of a search costs time in its length, so a pasted document is refused at once."""


class StateDirError(MdmemError):
    """The workspace's ``.mdmem`` is not a folder (a file, a broken symlink): mdmem keeps its
    index, locks and journal there, so nothing but reading files can run."""


class DiskFullError(MdmemError, OSError):
    """A file mdmem had to write could not be, for want of space (or over quota). Names the
    file; what was on disk stays as it was, and the same call works once space is freed. An
    OSError too, so code that handled the bare one still does."""

    def __init__(self, path: str, what: str = "cannot write") -> None:
        self.path = path
        super().__init__(
            errno.ENOSPC,
            f"{path}: {what}: the disk is full (no space left on device); nothing was written. "
            "Free some space and try again",
        )

    def __str__(self) -> str:
        return str(self.strerror)
