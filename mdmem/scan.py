"""Which files belong to the workspace: every ``*.md``, minus ignores, never outside it.

``.gitignore`` files (at any depth) and the config's include/exclude patterns are respected;
``.mdmem/`` and ``.git/`` never are scanned; symlinks that lead outside are reported, not read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from mdmem.config import FilesConfig
from mdmem.markdown import Problem

ALWAYS_SKIPPED = frozenset({".mdmem", ".git", ".hg", ".svn", "node_modules", "__pycache__"})


@dataclass(frozen=True)
class FileStat:
    path: str
    """Workspace-relative POSIX path."""
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ScanResult:
    files: tuple[FileStat, ...]
    problems: tuple[Problem, ...]


def scan(root: Path, config: FilesConfig) -> ScanResult:
    """Walk the workspace with ``os.scandir``: one ``stat`` per Markdown file, nothing else."""
    include = (
        None if tuple(config.include) == ("**/*.md",) else _spec(config.include)
    )  # the default matches every .md: no pattern work at all
    exclude = _spec(config.exclude) if config.exclude else None
    real_root = root.resolve()
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
                Problem(prefix.rstrip("/") or ".", f"cannot read folder: {exc.strerror}")
            )
            continue
        for entry in entries:
            if entry.name == ".gitignore" and entry.is_file():
                try:
                    with open(entry.path, encoding="utf-8", errors="replace") as handle:
                        ignores.append((prefix, _spec(handle.read().splitlines())))
                except OSError as exc:
                    problems.append(Problem(prefix + ".gitignore", f"cannot read: {exc.strerror}"))
        folders = []
        for entry in entries:
            name, rel = entry.name, prefix + entry.name
            is_link = entry.is_symlink()
            if entry.is_dir(follow_symlinks=False):
                if name not in ALWAYS_SKIPPED and not skipped(rel + "/"):
                    folders.append((entry.path, rel + "/"))
                continue
            if is_link and entry.is_dir():
                if not _inside(real_root, Path(entry.path)):
                    problems.append(Problem(rel, "symlink leads outside the workspace; skipped"))
                continue  # symlinked folders inside the workspace are reached directly
            if not name.endswith(".md") or (include and not include.match_file(rel)):
                continue
            if skipped(rel):
                continue
            if is_link and not _inside(real_root, Path(entry.path)):
                problems.append(Problem(rel, "symlink leads outside the workspace; skipped"))
                continue
            try:
                st = entry.stat()
            except OSError as exc:
                problems.append(Problem(rel, f"cannot stat: {exc.strerror}"))
                continue
            if stat.S_ISREG(st.st_mode):
                files.append(FileStat(rel, st.st_size, st.st_mtime_ns))
        stack.extend(reversed(folders))
    return ScanResult(tuple(files), tuple(problems))


def _spec(lines: Iterable[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(list(lines))


def _ignored(ignores: list[tuple[str, pathspec.PathSpec]], rel: str) -> bool:
    for prefix, spec in ignores:
        if rel.startswith(prefix) and spec.match_file(rel[len(prefix) :]):
            return True
    return False


def _inside(real_root: Path, path: Path) -> bool:
    try:
        real = path.resolve()
    except OSError:
        return False
    return real == real_root or real_root in real.parents
