"""Names that become paths: nothing is read from or written outside the workspace."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath

from mdmem.errors import UnsafePathError


def workspace_path(root: Path, name: str | Path, what: str = "file") -> tuple[str, Path]:
    """Resolve ``name`` inside ``root``; return (relative POSIX path, absolute path).

    Rejects absolute paths, ``..`` segments and symlinks that lead out of the workspace.
    """
    text = str(name).replace("\\", "/")
    pure = PurePosixPath(text)
    if not text or pure.is_absolute() or text.startswith("~") or ".." in pure.parts:
        raise UnsafePathError(
            f"{what} {str(name)!r} must be a path inside the workspace (relative, without '..')"
        )
    absolute = root / pure
    real_root = root.resolve()
    real = absolute.resolve()
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(f"{what} {text!r} leads outside the workspace (to {real})")
    return pure.as_posix(), absolute


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
