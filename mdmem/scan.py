"""Which files belong to the workspace: every ``*.md``, minus ignores, never outside it.

``.gitignore`` files (at any depth) and the config's include/exclude patterns are respected;
``.mdmem/`` and ``.git/`` never are scanned; symlinks that lead outside are reported, not read.
"""

from __future__ import annotations

import os
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
    include = pathspec.GitIgnoreSpec.from_lines(config.include)
    exclude = pathspec.GitIgnoreSpec.from_lines(config.exclude)
    real_root = root.resolve()
    files: list[FileStat] = []
    problems: list[Problem] = []
    ignores: list[tuple[str, pathspec.PathSpec]] = []

    def on_error(exc: OSError) -> None:
        rel = _rel(root, exc.filename) if exc.filename else "."
        problems.append(Problem(rel, f"cannot read folder: {exc.strerror}"))

    for folder, dirs, names in os.walk(root, onerror=on_error, followlinks=False):
        rel_folder = _rel(root, folder)
        prefix = "" if rel_folder == "." else rel_folder + "/"
        gitignore = Path(folder) / ".gitignore"
        if gitignore.is_file():
            try:
                lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
                ignores.append((prefix, pathspec.GitIgnoreSpec.from_lines(lines)))
            except OSError as exc:
                problems.append(Problem(prefix + ".gitignore", f"cannot read: {exc.strerror}"))
        keep = []
        for name in sorted(dirs):
            rel = prefix + name
            if (
                name in ALWAYS_SKIPPED
                or _ignored(ignores, rel + "/")
                or exclude.match_file(rel + "/")
            ):
                continue
            full = Path(folder, name)
            if full.is_symlink():
                if not _inside(real_root, full):
                    problems.append(Problem(rel, "symlink leads outside the workspace; skipped"))
                continue  # symlinked folders inside the workspace are reached directly
            keep.append(name)
        dirs[:] = keep
        for name in sorted(names):
            rel = prefix + name
            if not name.endswith(".md") or not include.match_file(rel):
                continue
            if exclude.match_file(rel) or _ignored(ignores, rel):
                continue
            full = Path(folder, name)
            if full.is_symlink() and not _inside(real_root, full):
                problems.append(Problem(rel, "symlink leads outside the workspace; skipped"))
                continue
            try:
                st = full.stat()
            except OSError as exc:
                problems.append(Problem(rel, f"cannot stat: {exc.strerror}"))
                continue
            if not os.path.isfile(full):
                continue
            files.append(FileStat(rel, st.st_size, st.st_mtime_ns))
    return ScanResult(tuple(files), tuple(problems))


def _rel(root: Path, path: str | os.PathLike[str]) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


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
