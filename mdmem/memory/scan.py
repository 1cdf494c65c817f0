"""Which files belong to the workspace: every ``*.md`` (``.MD`` too), minus ignores, never
outside it.

``.gitignore`` files (at any depth) and the config's include/exclude patterns are respected;
``.mdmem/`` and ``.git/`` never are scanned; symlinks that lead outside, and symlink loops, are
reported, not read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mdmem.config import FilesConfig
from mdmem.markdown.parse import Problem
from mdmem.paths import ALWAYS_SKIPPED, NAME_SKIPPED, SYMLINK_LOOP, name_problem, shown

if TYPE_CHECKING:  # imported where a pattern is built: the default config builds none
    import pathspec

__all__ = ["ALWAYS_SKIPPED", "FileStat", "ScanResult", "included", "scan"]

DEFAULT_INCLUDE = ("**/*.md",)

_OUTSIDE = "symlink leads outside the workspace; skipped"


@dataclass(frozen=True)
class FileStat:
    """One workspace file as a scan found it: its path, size and modification time."""

    path: str
    """Workspace-relative POSIX path."""
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ScanResult:
    """The files of a scan, and what it could not read."""

    files: tuple[FileStat, ...]
    problems: tuple[Problem, ...]


def scan(root: Path, config: FilesConfig) -> ScanResult:
    """Walk the workspace with ``os.scandir``: one ``stat`` per Markdown file, nothing else."""
    include = include_spec(config)
    exclude = _spec(config.exclude) if config.exclude else None
    real_root = Path(os.path.realpath(root))
    files: list[FileStat] = []
    problems: list[Problem] = []
    ignores: list[tuple[str, pathspec.PathSpec]] = []

    def skipped(rel: str) -> bool:
        return bool(exclude and exclude.match_file(rel)) or _ignored(ignores, rel)

    stack = [(str(root), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            problems.append(
                Problem(shown(prefix.rstrip("/")) or ".", f"cannot read folder: {exc.strerror}")
            )
            continue
        for entry in entries:
            if entry.name != ".gitignore":
                continue
            try:
                if entry.is_file():
                    with open(entry.path, encoding="utf-8", errors="replace") as handle:
                        ignores.append((prefix, _spec(handle.read().splitlines())))
            except OSError as exc:
                where = shown(prefix + ".gitignore")
                problems.append(Problem(where, f"cannot read: {exc.strerror}"))
        folders = []
        for entry in entries:
            name, rel = entry.name, prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if name not in ALWAYS_SKIPPED and not skipped(rel + "/"):
                    folders.append((entry.path, rel + "/"))
                continue
            markdown = included(rel, include)
            unfit = None if rel.isprintable() else name_problem(rel)
            if unfit is not None:  # (before any other message names it)
                if markdown and not skipped(rel):
                    problems.append(Problem(shown(rel), f"{unfit}; {NAME_SKIPPED}"))
                continue
            link = _link(real_root, entry.path) if entry.is_symlink() else None
            if link == "loop":
                if markdown and not skipped(rel):
                    problems.append(Problem(rel, SYMLINK_LOOP))
                continue
            if link is not None and _is_dir(entry):
                if link == "outside":
                    problems.append(Problem(rel, _OUTSIDE))
                continue  # symlinked folders inside the workspace are reached directly
            if not markdown or skipped(rel):
                continue
            if link == "outside":
                problems.append(Problem(rel, _OUTSIDE))
                continue
            try:
                st = entry.stat()
            except OSError as exc:
                problems.append(Problem(rel, f"cannot stat: {exc.strerror}"))
                continue
            if stat.S_ISREG(st.st_mode):
                files.append(FileStat(rel, st.st_size, st.st_mtime_ns))
            elif not stat.S_ISDIR(st.st_mode):
                kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
                problems.append(Problem(rel, f"is {kind}, not a regular file; skipped"))
        stack.extend(reversed(folders))
    return ScanResult(tuple(files), tuple(problems))


def include_spec(config: FilesConfig) -> pathspec.PathSpec | None:
    """None for the default (every ``.md``): no pattern work at all."""
    return None if tuple(config.include) == DEFAULT_INCLUDE else _spec(config.include)


def included(rel: str, include: pathspec.PathSpec | None) -> bool:
    """Whether ``files.include`` selects this file. Patterns the user writes select files of
    any extension (``**/*.txt``, ``memories/**``), as gitignore matches them (case counts):
    text is read as Markdown. The default selects Markdown files, their extension in any case
    (``NOTES.MD``, ``Plan.Md``: editors and other systems write them so)."""
    return is_markdown_name(rel) if include is None else include.match_file(rel)


def is_markdown_name(rel: str) -> bool:
    """Whether a path names a Markdown file by its extension, ``.md`` in any case."""
    return rel[-3:].lower() == ".md"


def indexed_by(config: FilesConfig, rel: str) -> bool:
    """``included`` and not excluded by ``files.exclude`` (``.gitignore`` is not read here)."""
    if not included(rel, include_spec(config)):
        return False
    return not (config.exclude and _spec(config.exclude).match_file(rel))


def _spec(lines: Iterable[str]) -> pathspec.PathSpec:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(lines))


def _ignored(ignores: list[tuple[str, pathspec.PathSpec]], rel: str) -> bool:
    for prefix, spec in ignores:
        if rel.startswith(prefix) and spec.match_file(rel[len(prefix) :]):
            return True
    return False


def _link(real_root: Path, path: str) -> str:
    """Where a symlink leads: "inside", "outside", "loop" or "missing" (dangling)."""
    try:
        real = Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        return "loop" if exc.errno == errno.ELOOP else "missing"
    return "inside" if real == real_root or real_root in real.parents else "outside"


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:  # replaced by a loop or made unreadable since it was resolved
        return False
