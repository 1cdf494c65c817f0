"""Names that become paths: nothing is read from or written outside the workspace."""

from __future__ import annotations

import errno
import os
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable
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


class RefusedPath(UnsafePathError):
    """A name the resolver refuses: ``why`` in words, and whether it ``escapes`` (reaches, or
    could reach, past the root: absolute, ``..``, a symlink out …) or only names something that
    must not be used from outside (mdmem's own folders, an invisible character …). Callers
    that speak of paths their own way (the memory tool's ``/memories/…``) use these two."""

    def __init__(
        self, argument: str, name: str, why: str, *, escapes: bool, message: str | None = None
    ) -> None:
        self.argument = argument
        self.name = name
        self.why = why
        self.escapes = escapes
        super().__init__(
            message
            or f"{argument} {shown(name)!r} is refused: {why} (a path inside the workspace is "
            "wanted)"
        )


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
        raise RefusedPath(
            what,
            text,
            "not relative, or holds '..'",
            escapes=True,
            message=f"{what} {os.fspath(name)!r} must be a path inside the workspace "
            "(relative, without '..')",
        )
    internal = next((part for part in pure.parts if part in ALWAYS_SKIPPED), None)
    if internal is not None:
        why = (
            f"inside {internal}/, which mdmem never reads or indexes (its own state and other "
            "tools' folders); use a path outside it"
        )
        raise RefusedPath(what, text, why, escapes=False, message=f"{what} {text!r} is {why}")
    unfit = name_problem(text)
    if unfit is not None:  # such a file is never indexed: a write there would never be found
        raise FileProblem(shown(text), f"{unfit}; use a name that is UTF-8 text on one line")
    absolute = root / pure
    real_root = Path(os.path.realpath(root))
    real = _real(absolute, pure.as_posix())
    if real != real_root and real_root not in real.parents:
        why = "leads outside the workspace (a symlink on the way points out)"
        raise RefusedPath(what, text, why, escapes=True, message=f"{what} {text!r} {why}")
    return pure.as_posix(), absolute


# ---- names from a client: MCP, HTTP, the memory tool, hooks' payloads ---------------------

_LOOKALIKES = frozenset("/\\.~:")
"""What a path's structure is made of: a character that is not one of these but normalises to
one (fullwidth solidus, one-dot leader …) is a look-alike."""
_DRIVE = re.compile(r"^[A-Za-z]:")


def client_path(root: Path, name: object, argument: str = "path") -> tuple[str, Path]:
    """THE resolver for a name that reaches the workspace from outside (an MCP tool or
    resource argument, an HTTP request, Claude's memory tool): (relative POSIX path, absolute
    path) inside ``root``, or :class:`UnsafePathError` in one line naming ``argument``.

    Refused, because a client must not reach past the workspace or name one file two ways:
    absolute paths, ``~``, a drive (``C:``), ``..`` (also percent-encoded or after Unicode
    normalisation), a NUL byte, control, invisible and text-direction characters (RTL marks,
    zero-width), a character that normalises (NFKC) to ``/``, ``\\``, ``.``, ``~`` or ``:``
    (fullwidth solidus, one-dot leader), a part made of dot look-alikes, a part ending in a dot
    or a space (Windows drops them: another file's name), a name that is not UTF-8 text (how
    Python carries an overlong or broken byte), and whatever :func:`workspace_path` refuses:
    mdmem's own folders and symlinks that lead out. A backslash is a folder separator.
    The local CLI user is not a client: ``mdmem extract FILE`` reads any file they can.
    """
    return workspace_path(root, _checked_text(name, argument), argument)


def client_glob(pattern: object, argument: str = "path") -> str:
    """A glob from a client, matched against workspace paths and never opened: the lexical
    checks of :func:`client_path` (so ``/etc/*`` or ``../*`` is refused as clearly as a path),
    and none of mdmem's own folders."""
    text = _checked_text(pattern, argument)
    internal = next((p for p in text.replace("\\", "/").split("/") if p in ALWAYS_SKIPPED), None)
    if internal is not None:
        raise _refused(
            argument, text, f"looks inside {internal}/, which mdmem never reads or indexes"
        )
    return text


def client_name(name: object, argument: str) -> str:
    """A single name from a client (a pool): the checks of :func:`client_path`, and no folder
    separator at all."""
    text = _checked_text(name, argument)
    if "/" in text.replace("\\", "/"):
        raise _refused(argument, text, "holds a folder separator; give a plain name")
    return text


def client_file(path: object, roots: Iterable[Path], argument: str) -> Path:
    """An absolute path a client names that must lie (symlinks followed) under one of
    ``roots``: a hook payload's ``transcript_path``, which Claude Code writes under
    ``~/.claude/projects``. The same character checks as :func:`client_path`; the real path is
    returned, so what is opened is what was checked."""
    if not isinstance(path, str):
        raise UnsafePathError(f"{argument} must be text, got {type(path).__name__}")
    text = _characters(path, argument)
    if not text.startswith("/"):
        raise _refused(argument, text, "is not an absolute path")
    if ".." in PurePosixPath(text).parts:
        raise _refused(argument, text, "holds '..'")
    real = Path(os.path.realpath(text))
    allowed = [Path(os.path.realpath(r)) for r in roots]
    if not any(real == r or r in real.parents for r in allowed):
        where = " or ".join(str(r) for r in allowed)
        raise _refused(argument, text, f"is outside {where}, where it may be read from")
    return real


def _refused(argument: str, text: str, why: str, *, escapes: bool = True) -> RefusedPath:
    return RefusedPath(argument, text, why, escapes=escapes)


def _checked_text(name: object, argument: str) -> str:
    """The lexical checks of :func:`client_path` (no file system): the text, or the error."""
    if not isinstance(name, str):
        raise UnsafePathError(f"{argument} must be text, got {type(name).__name__}")
    text = _characters(name, argument)
    for form, how in _forms(text, argument):
        if form is not text:
            _characters(form, argument, text)
        slashed = form.replace("\\", "/")
        if slashed.startswith("/"):
            raise _refused(argument, text, f"is an absolute path{how}")
        if slashed.startswith("~"):
            raise _refused(argument, text, f"starts with '~' (a home folder){how}")
        if _DRIVE.match(slashed):
            raise _refused(argument, text, f"names a drive{how}")
        parts = slashed.split("/")
        if ".." in parts:
            raise _refused(argument, text, f"holds '..'{how}")
    for part in text.replace("\\", "/").split("/"):
        if part and all(_dot_like(char) for char in part) and part != ".":
            raise _refused(argument, text, f"part {part!r} is made of dots or look-alikes")
        if part and part != "." and part[-1] in ". ":
            raise _refused(
                argument,
                text,
                f"part {part!r} ends with a dot or a space (another file's "
                "name where those are dropped)",
                escapes=False,
            )
    return text


def _characters(text: str, argument: str, shown_as: str | None = None) -> str:
    """NUL, non-UTF-8, control, invisible and direction characters, structural look-alikes
    (``shown_as``: the text as the client gave it, when ``text`` is a decoded form of it)."""
    shown_as = text if shown_as is None else shown_as
    if not text:
        raise UnsafePathError(f"{argument} is empty; give a path inside the workspace")
    if "\0" in text:
        raise _refused(argument, shown_as, "embedded null byte", escapes=False)
    unfit = name_problem(text)
    if unfit is not None:
        raise _refused(argument, shown_as, unfit, escapes=False)
    for char in text:
        if ord(char) < 0x80:
            continue
        category = unicodedata.category(char)
        if category == "Cf":
            raise _refused(
                argument,
                shown_as,
                f"holds U+{ord(char):04X}, an invisible or text-direction mark",
                escapes=False,
            )
        folded = unicodedata.normalize("NFKC", char)
        if folded != char and any(c in _LOOKALIKES for c in folded):
            raise _refused(
                argument, shown_as, f"holds U+{ord(char):04X}, a look-alike of {folded!r}"
            )
    return text


def _forms(text: str, argument: str) -> list[tuple[str, str]]:
    """The text, and what a layer that decodes percent-escapes would make of it."""
    if "%" not in text:
        return [(text, "")]
    try:
        decoded = urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise _refused(
            argument, text, "holds a percent-escape that is not UTF-8 (an overlong encoding?)"
        ) from None
    return [(text, ""), (decoded, " once percent-escapes are decoded")]


def _dot_like(char: str) -> bool:
    if char == ".":
        return True
    if ord(char) < 0x80:
        return False
    name = unicodedata.name(char, "")
    return "FULL STOP" in name or "DOT LEADER" in name or name.endswith(" DOT")


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
