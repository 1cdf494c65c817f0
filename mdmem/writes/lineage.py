"""Which versions of a file program writes made, and from which: shared by every writer.

The late-save guard puts back a program write that a save from an older copy dropped. A second
program (another agent, another ``Workspace``) that deliberately removes or rewrites what the
first just wrote looks the same at the path — unless the guard can tell that the version there
was made, write by write, by programs starting from its own. Each program write appends
``parent child`` (digests of the bytes replaced and written) to a small per-file log beside the
file's lock, under that lock; a person's save is never in it, so it breaks the chain.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from mdmem.layout import PRIVATE_FILE_MODE

KEEP_LINES = 256
"""Links kept per file: far more than the program writes of one late-save window."""
MAX_STEPS = 64
"""How far back a version's chain is followed."""


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Lineage:
    """The program-write log of one file (``<lock>.lineage``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, parent: bytes | None, child: bytes) -> None:
        """A program write replaced ``parent`` (None: created the file) with ``child``. Called
        under the file's lock; a failure to record only makes the guard more careful."""
        line = f"{'-' if parent is None else digest(parent)} {digest(child)}\n"
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
            with os.fdopen(fd, "a", encoding="ascii") as handle:
                handle.write(line)
                size = handle.tell()
            if size > 2 * KEEP_LINES * len(line):
                self._trim()

    def chain(self, version: bytes) -> set[str]:
        """Digests of ``version`` and of the versions program writes made it from, back to
        the first one no program wrote (a person's save, or the log's start)."""
        parents = self._parents()
        current: str | None = digest(version)
        seen: set[str] = set()
        while current is not None and current not in seen and len(seen) < MAX_STEPS:
            seen.add(current)
            current = parents.get(current)
        return seen

    def links(self) -> list[tuple[str | None, str]]:
        """Every ``(parent, child)`` link kept, in the order the writes were made (appended
        under the file's lock): the program writes of every process, with the saves that
        came between them showing as a parent that is not the previous child."""
        try:
            lines = self.path.read_text(encoding="ascii").splitlines()
        except (OSError, UnicodeDecodeError):
            return []
        out: list[tuple[str | None, str]] = []
        for line in lines:
            parent, _, child = line.partition(" ")
            if len(child) == 32:
                out.append((None if parent == "-" else parent, child))
        return out

    def _parents(self) -> dict[str, str]:
        try:
            lines = self.path.read_text(encoding="ascii").splitlines()
        except (OSError, UnicodeDecodeError):
            return {}
        parents: dict[str, str] = {}
        for line in lines:
            parent, _, child = line.partition(" ")
            if len(child) == 32 and parent != "-" and parent != child:
                parents[child] = parent  # the newest link wins
        return parents

    def _trim(self) -> None:
        with contextlib.suppress(OSError):
            lines = self.path.read_text(encoding="ascii").splitlines(keepends=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.writelines(lines[-KEEP_LINES:])
            os.replace(tmp, self.path)
