"""Names that become paths: nothing is read from or written outside the workspace."""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from mdmem.errors import FileProblem, UnsafePathError

ALWAYS_SKIPPED = frozenset(
    {".mdmem", ".trash", ".git", ".hg", ".svn", "node_modules", "__pycache__"}
)
"""Folders never scanned, at any depth: mdmem's own state (``.trash/`` holds what the memory
tool deleted: kept, never indexed) and other tools' internals."""

SYMLINK_LOOP = "symlink loop; skipped"


def workspace_path(root: Path, name: str | Path, what: str = "file") -> tuple[str, Path]:
    """Resolve ``name`` inside ``root``; return (relative POSIX path, absolute path).

    Rejects absolute paths, ``..`` segments, symlinks that lead out of the workspace and the
    folders that are never indexed (a file there would be written but never found). A symlink
    loop on the way is a FileProblem, like any other file that cannot be read.
    """
    text = str(name).replace("\\", "/")
    pure = PurePosixPath(text)
    if not text or pure.is_absolute() or text.startswith("~") or ".." in pure.parts:
        raise UnsafePathError(
            f"{what} {str(name)!r} must be a path inside the workspace (relative, without '..')"
        )
    internal = next((part for part in pure.parts if part in ALWAYS_SKIPPED), None)
    if internal is not None:
        raise UnsafePathError(
            f"{what} {text!r} is inside {internal}/, which mdmem never reads or indexes "
            "(its own state and other tools' folders); use a path outside it"
        )
    absolute = root / pure
    real_root = Path(os.path.realpath(root))
    real = _real(absolute, pure.as_posix())
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(f"{what} {text!r} leads outside the workspace (to {real})")
    return pure.as_posix(), absolute


def _real(absolute: Path, rel: str) -> Path:
    """``absolute`` with every symlink resolved; a path that does not exist yet is fine."""
    try:
        return Path(os.path.realpath(absolute, strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileProblem(rel, "symlink loop (a link that leads back to itself)") from None
    return Path(os.path.realpath(absolute))


def slugify(title: str, limit: int = 40) -> str:
    """A file-name-safe slug: ASCII letters, digits and dashes (``session`` if none)."""
    ascii_ = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_.lower())
    slug = ""
    for word in words:
        nxt = f"{slug}-{word}" if slug else word
        if len(nxt) > limit:
            break
        slug = nxt
    return slug or (words[0][:limit] if words else "session")
