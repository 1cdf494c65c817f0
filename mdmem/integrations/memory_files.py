"""The commands of Claude's memory tool (``memory_20250818``) over a workspace folder.

Claude sends ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename``
against ``/memories``; this maps ``/memories`` to the workspace root or a subfolder and answers
with the same strings and errors as the SDK's reference backend
(``BetaLocalFilesystemMemoryTool``), so prompts behave the same. What differs is on purpose:

- every write goes through the workspace's safe writes (lock, compare-and-swap with a person's
  save, journal, no new secrets), and a file the index would not pick up is refused, so what
  Claude writes is searchable at once;
- ``delete`` and ``clear_all_memory`` move things to ``.trash/`` (never indexed, never expired;
  ``mdmem forget`` is the true delete);
- ``view`` masks secrets and caps what it returns (paged with ``view_range``);
- ``..`` anywhere in a path, a symlink leading out and mdmem's own folders are refused, and a
  path must be ``/memories`` or under ``/memories/`` (the reference reads ``/memoriesX`` as
  ``/memories/X``); a backslash is a folder separator, as in every mdmem path;
- ``rename`` and ``delete`` of a symlink move or archive the link, never the file it leads to;
  a dangling link is a name that exists (never written through);
- ``mdmem.toml`` at the root is never deleted, moved or edited;
- where the reference lets an exception out (a file where a folder should be, a folder moved
  into itself), a clear error that names paths under ``/memories`` only.

docs/integrations.md lists these; tests/unit/test_memory_tool.py holds each against the reference.

No SDK is imported here: :mod:`mdmem.integrations.memory_tool` wraps this for anthropic.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mdmem import Workspace
from mdmem.errors import FileProblem, MdmemError
from mdmem.integrations.viewer import MAX_VIEW_CHARS, capped, masked_lines, numbered
from mdmem.paths import RefusedPath, client_path
from mdmem.paths import shown as escaped_name

REDACTED = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]+\]")
MEMORIES = "/memories"
TRASH_DIR = ".trash"
"""Where deleted memory files go (the folder ``mdmem forget`` also scrubs)."""
CONFIG_FILE = "mdmem.toml"
MAX_LINES = 999_999
"""The reference backend's limit on the lines of a viewed file."""


class MemoryCommandError(MdmemError):
    """A command that cannot be carried out; the message is what Claude reads."""


@dataclass(frozen=True)
class Located:
    """A ``/memories`` path, checked: where it is in the workspace and on disk."""

    path: str
    """As Claude gave it."""
    rel: str
    """Workspace-relative POSIX path ("" for the workspace root)."""
    absolute: Path
    target: str
    """The workspace path of what ``rel`` leads to, symlinks followed (``rel`` when none is on
    the way): a write through a link takes the lock of the file it changes."""


class MemoryFiles:
    """The memory tool's commands over ``folder`` of ``ws`` (the root when "")."""

    def __init__(self, ws: Workspace, folder: str = "", *, max_view_chars: int = MAX_VIEW_CHARS):
        self.ws = ws
        self.folder = folder.replace("\\", "/").strip("/")
        if self.folder:
            self.folder = ws.files._resolve(self.folder, "memory folder")[0]
        self.root = ws.root / self.folder if self.folder else ws.root
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_view_chars = max_view_chars

    # ---- paths -------------------------------------------------------------------------

    def locate(self, path: str) -> Located:
        """Check a path Claude sent: under /memories, no ``..``, no symlink out of it, and
        not in a folder mdmem keeps to itself (``.mdmem/``, ``.trash/``, ``.git/`` …)."""
        if not isinstance(path, str) or not (path == MEMORIES or path.startswith(MEMORIES + "/")):
            raise MemoryCommandError(f"Path must start with /memories, got: {path}")
        if "\0" in path:  # (the reference lets out ValueError('embedded null byte'))
            raise MemoryCommandError(f"Path {escaped_name(path)}: embedded null byte")
        inner = path[len(MEMORIES) :].replace("\\", "/").strip("/")
        absolute = self.root
        if inner:  # the one resolver of names from outside, against the /memories folder
            try:
                absolute = client_path(self.root, inner, "path")[1]
            except RefusedPath as exc:
                if exc.escapes:
                    raise MemoryCommandError(
                        f"Path {path} would escape /memories directory"
                    ) from None
                raise MemoryCommandError(
                    f"Path {escaped_name(path)} cannot be used: {exc.why}"
                ) from None
            except FileProblem as exc:  # a symlink loop on the way
                raise MemoryCommandError(
                    f"Path {escaped_name(path)} cannot be used: {exc.reason}"
                ) from None
        parts = PurePosixPath(inner).parts if inner else ()
        real = Path(os.path.realpath(absolute))
        rel = "/".join([self.folder, *parts] if self.folder else parts)
        target = real.relative_to(os.path.realpath(self.ws.root)).as_posix()
        return Located(path, rel, absolute, rel if target == "." else target)

    def shown(self, absolute: str | os.PathLike[str]) -> str:
        """An absolute path as Claude knows it (under /memories), never the machine's."""
        try:
            inner = Path(absolute).relative_to(self.root).as_posix()
        except ValueError:
            return MEMORIES
        return MEMORIES if inner == "." else f"{MEMORIES}/{inner}"

    def _not_config(self, located: Located, verb: str) -> None:
        """The workspace's mdmem.toml (when /memories is the workspace root) is the person's:
        the memory tool neither deletes nor moves it (nor edits it: it is not indexed)."""
        if located.rel == CONFIG_FILE:
            raise MemoryCommandError(
                f"Cannot {verb} {located.path}: it is this workspace's configuration "
                "(mdmem.toml), which only a person changes"
            )

    def _is_root(self, located: Located) -> bool:
        return os.path.realpath(located.absolute) == os.path.realpath(self.root)

    def _writable(self, located: Located) -> None:
        """Refuse a file the index would never pick up: Claude's writes must be searchable."""
        if located.rel and not self.ws.index._includes(located.rel):
            suffix = PurePosixPath(located.rel).suffix or ""
            pattern = f"**/*{suffix}" if suffix else f"{located.rel}"
            include = list(self.ws.config.files.include)
            raise MemoryCommandError(
                f"{located.path} would not be searchable: this workspace indexes the files "
                f"that files.include in mdmem.toml selects ({include}), and this one is not "
                f'among them. Use a .md name, or ask the user to add "{pattern}" to '
                "files.include."
            )

    # ---- reading -----------------------------------------------------------------------

    def view(self, path: str, view_range: Sequence[int] | None = None) -> str:
        """A folder's files two levels deep, or a file's lines, numbered."""
        located = self.locate(path)
        try:
            info = os.stat(located.absolute)
        except (FileNotFoundError, NotADirectoryError):
            raise MemoryCommandError(
                f"The path {path} does not exist. Please provide a valid path."
            ) from None
        if stat.S_ISDIR(info.st_mode):
            return self._listing(located, info)
        if stat.S_ISREG(info.st_mode):
            return self._file_view(located, view_range)
        raise MemoryCommandError(f"Unsupported file type for {path}")

    def _listing(self, located: Located, info: os.stat_result) -> str:
        items: list[tuple[str, str]] = []
        self._collect(located.absolute, "", 1, items)
        header = (
            f"Here're the files and directories up to 2 levels deep in {located.path}, "
            "excluding hidden items:"
        )
        lines = [f"{file_size(info.st_size)}\t{located.path}"]
        lines += [f"{size}\t{located.path}/{name}" for size, name in items]
        return f"{header}\n" + "\n".join(lines)

    def _collect(self, folder: Path, prefix: str, depth: int, items: list[tuple[str, str]]) -> None:
        """Two levels, names sorted, dotfiles hidden, links that lead out skipped."""
        if depth > 2:
            return
        try:
            children = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError:
            return
        real_root = Path(os.path.realpath(self.root))
        for child in children:
            if child.name.startswith("."):
                continue
            own = escaped_name(child.name)  # (a name that is not UTF-8 text, escaped: one line)
            name = f"{prefix}/{own}" if prefix else own
            real = Path(os.path.realpath(child))
            if real != real_root and real_root not in real.parents:
                continue
            try:
                info = child.stat()
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                items.append((file_size(info.st_size), f"{name}/"))
                if depth < 2:
                    self._collect(child, name, depth + 1, items)
            elif stat.S_ISREG(info.st_mode):
                items.append((file_size(info.st_size), name))

    def _file_view(self, located: Located, view_range: Sequence[int] | None) -> str:
        lines = self._read_text(located).split("\n")
        if len(lines) > MAX_LINES:
            raise MemoryCommandError(
                f"File {located.path} exceeds maximum line limit of {MAX_LINES:,} lines."
            )
        shown, first = lines, 1
        if view_range and len(view_range) == 2:
            start = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            shown, first = lines[start:end], start + 1
            self.ws.index._note_read(located.rel, first, first + len(shown) - 1)  # a memory's lines
        rows = numbered(masked_lines(shown, self.ws.files._redactor.mask), first)
        body = capped(rows, first, len(lines), self.max_view_chars)
        return f"Here's the content of {located.path} with line numbers:\n" + body

    def _read_text(self, located: Located) -> str:
        try:
            fd = os.open(located.absolute, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            raise MemoryCommandError(
                f"The file {located.path} no longer exists (may have been deleted or renamed "
                "concurrently)."
            ) from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise MemoryCommandError(f"Unsupported file type for {located.path}")
            limit = self.ws.config.max_file_bytes
            if info.st_size > limit:
                raise MemoryCommandError(
                    f"File {located.path} is {info.st_size:,} bytes, more than files.max_file_mb "
                    f"in mdmem.toml allows ({limit:,} bytes); mdmem does not read it"
                )
            data = handle.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise MemoryCommandError(
                f"File {located.path} is not UTF-8 text (line {line}); the memory tool reads "
                "and writes text files only"
            ) from None

    # ---- writing -----------------------------------------------------------------------

    def create(self, path: str, file_text: str) -> str:
        """A new file; an existing one is never overwritten."""
        _text_given(file_text, "file_text", "create", path)
        located = self.locate(path)
        if os.path.lexists(located.absolute):
            raise MemoryCommandError(f"File {path} already exists")
        self._writable(located)
        self._folder_on_the_way(located, "create")

        def edit(current: str) -> str:
            if current:  # made by someone else since the check
                raise MemoryCommandError(f"File {path} already exists")
            return file_text

        written = self._write(located, edit, create=True)
        return f"File created successfully at: {path}" + _masked_note(file_text, written)

    def _folder_on_the_way(self, located: Located, verb: str) -> None:
        """Refuse a path whose parent is a file (the reference crashes with NotADirectoryError)."""
        parent = located.absolute.parent
        while parent != self.root and self.root in parent.parents:
            if os.path.lexists(parent):
                if not parent.is_dir():
                    raise MemoryCommandError(
                        f"Cannot {verb} {located.path}: {self.shown(parent)} is a file, "
                        "not a directory"
                    )
                return
            parent = parent.parent

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the one occurrence of ``old_str``; show the lines around the change."""
        _text_given(old_str, "old_str", "str_replace", path)
        _text_given(new_str, "new_str", "str_replace", path)
        located = self._existing_file(path)
        changed: list[int] = []

        def edit(content: str) -> str:
            count = content.count(old_str)
            if count == 0:
                raise MemoryCommandError(
                    f"No replacement was performed, old_str `{old_str}` did not appear verbatim "
                    f"in {path}."
                )
            if count > 1:
                lines = ", ".join(map(str, occurrence_lines(content, old_str)))
                raise MemoryCommandError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old_str}` "
                    f"in lines: {lines}. Please ensure it is unique"
                )
            changed[:] = [content[: content.find(old_str)].count("\n")]
            return content.replace(old_str, new_str)

        written = self._write(located, edit)
        new_lines = written.split("\n")
        at = changed[0]
        first, last = max(0, at - 2), min(len(new_lines), at + 3)
        snippet = numbered(new_lines[first:last], first + 1)
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n" + "\n".join(snippet) + _masked_note(new_str, written)
        )

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0: at the top)."""
        _text_given(insert_text, "insert_text", "insert", path)
        located = self._existing_file(path)

        def edit(content: str) -> str:
            lines = content.split("\n")
            if lines[-1] == "":
                lines.pop()
            if insert_line < 0 or insert_line > len(lines):
                raise MemoryCommandError(
                    f"Invalid `insert_line` parameter: {insert_line}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            lines.insert(insert_line, insert_text.rstrip("\n"))
            text = "\n".join(lines)
            return text if text.endswith("\n") else text + "\n"

        written = self._write(located, edit)
        return f"The file {path} has been edited." + _masked_note(insert_text, written)

    def _existing_file(self, path: str) -> Located:
        located = self.locate(path)
        if not located.absolute.exists():
            raise MemoryCommandError(
                f"The path {path} does not exist. Please provide a valid path."
            )
        if not located.absolute.is_file():
            raise MemoryCommandError(f"The path {path} is not a file.")
        self._not_config(located, "edit")
        self._writable(located)
        return located

    def _write(self, located: Located, edit: Callable[[str], str], *, create: bool = False) -> str:
        try:
            return self.ws.files.edit(located.target, edit, create=create)
        except MemoryCommandError:
            raise
        except MdmemError as exc:  # a person's save it cannot be redone on, a full disk …
            raise MemoryCommandError(str(exc)) from None

    # ---- deleting and moving -------------------------------------------------------------

    def delete(self, path: str) -> str:
        """Move a file or folder to ``.trash/``; nothing is unlinked."""
        located = self.locate(path)
        if self._is_root(located):
            raise MemoryCommandError("Cannot delete the /memories directory itself")
        self._not_config(located, "delete")
        if not (located.absolute.is_file() or located.absolute.is_dir()):
            raise MemoryCommandError(f"The path {path} does not exist")
        try:
            self._archive([located])
        except FileNotFoundError:
            raise MemoryCommandError(f"The path {path} does not exist") from None
        return f"Successfully deleted {path}"

    def rename(self, old_path: str, new_path: str) -> str:
        """Move a file or folder; an existing destination is never replaced."""
        old, new = self.locate(old_path), self.locate(new_path)
        if self._is_root(old):
            raise MemoryCommandError("Cannot rename the /memories directory itself")
        self._not_config(old, "rename")
        if os.path.lexists(new.absolute):
            raise MemoryCommandError(f"The destination {new_path} already exists")
        if not os.path.lexists(old.absolute):
            raise MemoryCommandError(f"The path {old_path} does not exist")
        folder = old.absolute.is_dir()  # a folder, or a link to one: moved whole, as it is
        if folder and old.absolute in new.absolute.parents:
            raise MemoryCommandError(f"Cannot move {old_path} into itself ({new_path})")
        if not folder:
            self._writable(new)
        self._folder_on_the_way(new, "move to")
        new.absolute.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self.ws.files._locked(old.rel, old_path):
                move_no_replace(old.absolute, new.absolute, folder)
        except FileExistsError:
            raise MemoryCommandError(f"The destination {new_path} already exists") from None
        except FileNotFoundError:
            raise MemoryCommandError(f"The path {old_path} does not exist") from None
        return f"Successfully renamed {old_path} to {new_path}"

    def clear_all(self) -> str:
        """Move everything under /memories to ``.trash/`` (but hidden files and, when
        /memories is the workspace root, mdmem.toml)."""
        kept = {CONFIG_FILE} if not self.folder else set()
        names = sorted(n for n in os.listdir(self.root) if not n.startswith(".") and n not in kept)
        items, refused = [], []
        for name in names:  # a name a person gave that the resolver refuses stays, said so
            try:
                items.append(self.locate(f"{MEMORIES}/{name}"))
            except MemoryCommandError:
                refused.append(f"{MEMORIES}/{escaped_name(name)}")
        self._archive(items)
        self.root.mkdir(parents=True, exist_ok=True)
        if refused:
            return (
                "All memory cleared but "
                + ", ".join(refused)
                + " (names the memory tool does not use; a person can move them)"
            )
        return "All memory cleared"

    def _archive(self, items: list[Located]) -> Path:
        """Move ``items`` into a new folder ``.trash/<time>/``, keeping their workspace paths."""
        if not items:
            return self.ws.root / TRASH_DIR
        stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        trash = self.ws.root / TRASH_DIR
        for n in range(1, 1000):
            folder = trash / (stamp if n == 1 else f"{stamp}-{n}")
            try:
                folder.mkdir(parents=True)
                break
            except FileExistsError:
                continue
        else:
            raise MemoryCommandError(f"{TRASH_DIR}/{stamp}: cannot make a new folder there")
        for item in items:
            target = folder / item.rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with self.ws.files._locked(item.rel, item.path):
                os.rename(item.absolute, target)
        return folder


def _text_given(value: object, name: str, command: str, path: object) -> None:
    """A command's text argument must be text: ``None`` (a model that left it out) answers
    one clear line, not the reference's AttributeError or a TypeError."""
    if not isinstance(value, str):
        got = "missing (null)" if value is None else f"{type(value).__name__}, not text"
        raise MemoryCommandError(f"Parameter `{name}` of {command} {path} is {got}; give text")


def _masked_note(given: str, written: str) -> str:
    """What the model must know when a secret it wrote was masked: the file holds
    ``[REDACTED:kind]``, so a later ``str_replace`` of its own words would not match."""
    masks = sorted(set(REDACTED.findall(written)) - set(REDACTED.findall(given)))
    if not masks or given in written:
        return ""
    return (
        f"\nNote: a secret in the text was saved masked as {', '.join(masks)}; the file holds "
        "the masked text, so use it (not the secret) in a later str_replace."
    )


def move_no_replace(source: Path, target: Path, folder: bool) -> None:
    """Move ``source`` to ``target``, never over an existing one: a file by a hard link then
    an unlink (atomic refusal); a folder by a rename after the check (its only way)."""
    if folder:
        if os.path.lexists(target):
            raise FileExistsError(target)
        os.rename(source, target)
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except (FileExistsError, FileNotFoundError):
        raise
    except OSError:  # a file system without hard links
        if os.path.lexists(target):
            raise FileExistsError(target) from None
        os.rename(source, target)
        return
    os.unlink(source)


def occurrence_lines(content: str, needle: str) -> list[int]:
    """1-based line of each occurrence, overlapping ones too (as the reference counts)."""
    found: list[int] = []
    start = 0
    while (pos := content.find(needle, start)) != -1:
        found.append(content[:pos].count("\n") + 1)
        start = pos + 1
    return found


def file_size(size: int) -> str:
    """``4.0K`` style sizes, as the reference listing shows them."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"
