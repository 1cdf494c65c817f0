"""Names that become paths: nothing is read from or written outside the workspace."""

from __future__ import annotations

import errno
import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

from mdmem.errors import FileProblem, StateDirError, UnsafePathError

ALWAYS_SKIPPED = frozenset(
    {".mdmem", ".trash", ".git", ".hg", ".svn", "node_modules", "__pycache__"}
)
"""Folders never scanned, at any depth: mdmem's own state (``.trash/`` holds what the memory
tool deleted: kept, never indexed) and other tools' internals."""

SYMLINK_LOOP = "symlink loop; skipped"

_LINE_BREAKING = frozenset({"Cc", "Zl", "Zp"})
"""Unicode categories that break a line or a terminal: control characters, line and paragraph
separators."""


NAME_SKIPPED = "skipped (rename it to index it)"


def name_problem(name: str) -> str | None:
    """Why no file of this name is read or written (``"file name is not valid UTF-8"``), or
    None.

    A name must be UTF-8 text (``os.scandir`` hands bytes that are not as lone surrogates, which
    SQLite, JSON and the terminal refuse) and print on one line: a newline, tab, escape or other
    control character in it would break every one-line message and citation that names it.
    """
    if name.isprintable():  # the fast answer for nearly every name (a scan asks for each)
        return None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8"
    if any(unicodedata.category(char) in _LINE_BREAKING for char in name):
        return "file name holds a control character or line break"
    return None


def shown(name: str) -> str:
    """``name`` as one printable line, losslessly: a byte that is not UTF-8 as ``\\xNN``, an
    ASCII control character as ``\\n``, ``\\t``, ``\\r`` or ``\\xNN``, any other control
    character or line break as ``\\uNNNN``, a backslash doubled. A name that passes
    :func:`name_problem` is returned as it is."""
    if name_problem(name) is None:
        return name
    return "".join(_escaped(char) for char in name)


def _escaped(char: str) -> str:
    code = ord(char)
    if char == "\\":
        return "\\\\"
    if 0xDC80 <= code <= 0xDCFF:  # how os.fsdecode carries a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80 and unicodedata.category(char) == "Cc":  # one byte, the same either way
        return _SHORT.get(char, f"\\x{code:02x}")
    if unicodedata.category(char) in _LINE_BREAKING | {"Cs"}:
        return f"\\u{code:04x}"  # (never \\xNN: that is a byte that was not UTF-8)
    return char


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def workspace_path(
    root: Path, name: str | os.PathLike[str], what: str = "file"
) -> tuple[str, Path]:
    """Resolve ``name`` inside ``root``; return (relative POSIX path, absolute path).

    Rejects absolute paths, ``..`` segments, symlinks that lead out of the workspace and the
    folders that are never indexed (a file there would be written but never found). A symlink
    loop on the way is a FileProblem, like any other file that cannot be read.
    """
    text = os.fspath(name).replace("\\", "/")  # (str() of a PathLike other than Path is its repr)
    pure = PurePosixPath(text)
    if not text or pure.is_absolute() or text.startswith("~") or ".." in pure.parts:
        raise UnsafePathError(
            f"{what} {os.fspath(name)!r} must be a path inside the workspace "
            "(relative, without '..')"
        )
    internal = next((part for part in pure.parts if part in ALWAYS_SKIPPED), None)
    if internal is not None:
        raise UnsafePathError(
            f"{what} {text!r} is inside {internal}/, which mdmem never reads or indexes "
            "(its own state and other tools' folders); use a path outside it"
        )
    unfit = name_problem(text)
    if unfit is not None:  # such a file is never indexed: a write there would never be found
        raise FileProblem(shown(text), f"{unfit}; use a name that is UTF-8 text on one line")
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


def check_state_dir(root: Path, name: str = ".mdmem") -> None:
    """Raise StateDirError when ``root/name`` exists and is not a folder: every index, lock and
    journal write would fail on it with a bare FileExistsError or NotADirectoryError."""
    path = root / name
    if os.path.isdir(path) or not os.path.lexists(path):
        return
    kind = "a broken symlink" if os.path.islink(path) else "a file"
    raise StateDirError(
        f"{name} in {root} is {kind}, not a folder: mdmem keeps its index, locks and journal "
        f"there. Move it away (e.g. `mv {name} {name}.bak`); mdmem makes the folder again"
    )


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
