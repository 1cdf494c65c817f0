"""Sharing a workspace through git: the merge driver's set-up, and ``mdmem sync``.

``sync`` is the one safe round trip: commit the workspace's own changes (nothing else), pull
(rebase by default) with the merge driver merging memory files entry by entry, re-index, push.
It refuses rather than guesses: other files dirty, a merge or rebase in progress, a file
holding conflict markers, no upstream. It never force-pushes; a push the remote rejects (it
moved on meanwhile) is an error to run ``sync`` again after.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mdmem.errors import MdmemError
from mdmem.markdown.conflicts import conflict_line
from mdmem.memory.merge_driver import GIT_ATTRIBUTES

DRIVER = "merge-driver %O %A %B %P"
"""The arguments git gives the driver: base, ours (the result goes there), theirs, the path."""
ATTRIBUTE = "merge=mdmem"
_HEADER = "# mdmem: merge memory files entry by entry. Each clone also needs (mdmem init runs it):"
REFUSED, CONFLICTS, REJECTED = 3, 4, 5
"""Exit codes of ``mdmem sync`` beyond 0 (done), 1 (an error) and 2 (bad usage)."""


class SyncError(MdmemError):
    """``sync`` stopped; ``code`` says why (1 an error, 3 refused, 4 conflicts, 5 rejected)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SyncReport:
    dry_run: bool
    committed: tuple[str, ...]
    """Workspace paths committed (or, in a dry run, that would be)."""
    commit: str | None
    behind: int
    """Commits the pull brought in (in a dry run: waiting upstream)."""
    ahead: int
    """Commits pushed (in a dry run: waiting to be pushed, before the new commit)."""
    reindexed: bool

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "committed": list(self.committed)}


# ---- set-up ----------------------------------------------------------------------------------


def driver_command(program: str = "mdmem") -> str:
    return f"{program} {DRIVER}"


def gitattributes_lines() -> list[str]:
    return [f"{pattern} {ATTRIBUTE}" for pattern in GIT_ATTRIBUTES]


def install_gitattributes(root: Path) -> list[str]:
    """Add the driver's lines to ``root/.gitattributes`` (made if missing); the lines added.
    Lines already there, and every other line, stay as they are."""
    path = root / ".gitattributes"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {" ".join(line.split()) for line in text.splitlines()}
    missing = [line for line in gitattributes_lines() if line not in present]
    if not missing:
        return []
    block = (
        []
        if _HEADER in present
        else [_HEADER, f'#   git config merge.mdmem.driver "{driver_command()}"']
    )
    sep = "" if not text or text.endswith("\n") else "\n"
    path.write_text(text + sep + "\n".join([*block, *missing]) + "\n", encoding="utf-8")
    return missing


def repo_root(path: Path) -> Path | None:
    """The top of the git work tree ``path`` is in; None outside one (or without git)."""
    try:
        done = _git(path, "rev-parse", "--show-toplevel", check=False)
    except SyncError:
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def configure_driver(path: Path, program: str = "mdmem") -> str:
    """Define the ``mdmem`` merge driver in the repository's own config; the command set."""
    command = driver_command(program)
    _git(path, "config", "merge.mdmem.name", "mdmem: memory files entry by entry")
    _git(path, "config", "merge.mdmem.driver", command)
    return command


# ---- sync ------------------------------------------------------------------------------------


def sync(
    root: Path,
    reindex: Callable[[], object],
    *,
    dry_run: bool = False,
    rebase: bool = True,
    message: str | None = None,
    settle: Callable[[], object] = lambda: None,
) -> SyncReport:
    """Commit the workspace's changes, pull, re-index, push (see the module's docstring).
    ``settle`` first closes this process's late-save windows: git replacing a file just written
    would look like a person's old-copy save, and the write would be put back mid-rebase."""
    settle()
    top = repo_root(root)
    if top is None:
        raise SyncError(f"{root} is not inside a git repository")
    prefix = _prefix(root, top)
    _refuse_in_progress(top)
    mine = _dirty_workspace_paths(top, prefix)
    upstream = _upstream(top)
    if dry_run:
        _git(top, "fetch", "--quiet")
        behind, ahead = _counts(top, upstream)
        return SyncReport(True, tuple(mine), None, behind, ahead, False)
    commit = _commit(top, prefix, mine, message) if mine else None
    before = _head(top)
    _pull(top, rebase)
    behind = _count(top, f"{before}..{upstream}")
    reindex()
    ahead = _count(top, f"{upstream}..HEAD")
    if ahead:
        pushed = _git(top, "push", "--quiet", check=False)
        if pushed.returncode != 0:
            raise SyncError(
                "the remote refused the push (it moved on meanwhile?); nothing was forced: run "
                f"mdmem sync again. git said: {_said(pushed)}",
                REJECTED,
            )
    return SyncReport(False, tuple(mine), commit, behind, ahead, True)


def _prefix(root: Path, top: Path) -> str:
    rel = root.resolve().relative_to(top.resolve())
    return "" if rel == Path(".") else rel.as_posix()


def _refuse_in_progress(top: Path) -> None:
    for marker in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        found = _git(top, "rev-parse", "--git-path", marker).stdout.strip()
        if (top / found).exists():
            raise SyncError(
                f"a git {marker.split('-')[0].split('_')[0].lower()} is in progress in {top}: "
                "finish it (or abort it) first",
                REFUSED,
            )


def _dirty_workspace_paths(top: Path, prefix: str) -> list[str]:
    """The workspace's changed files (relative to the repository); SyncError when a file
    outside it changed, or a workspace file holds conflict markers."""
    out = _git(top, "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
    fields = out.split("\0")
    mine: list[str] = []
    others: list[str] = []
    n = 0
    while n < len(fields) and fields[n]:
        status, path = fields[n][:2], fields[n][3:]
        n += 2 if status[0] in "RC" else 1  # a rename names its old path next
        if "U" in status or status in ("AA", "DD"):
            raise SyncError(f"{path} is unmerged: resolve it and git add it first", REFUSED)
        inside = not prefix or PurePosixPath(path).is_relative_to(prefix)
        (mine if inside else others).append(path)
    if others:
        listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise SyncError(
            f"files outside the workspace have changes ({listed}): commit or stash them first; "
            "mdmem sync commits only the workspace's files",
            REFUSED,
        )
    for path in mine:
        file = top / path
        if file.suffix == ".md" and file.is_file():
            text = file.read_text(encoding="utf-8", errors="replace")
            if (line := conflict_line(text)) is not None:
                raise SyncError(
                    f"{path}:{line} holds git conflict markers: resolve them first", REFUSED
                )
    return mine


def _upstream(top: Path) -> str:
    done = _git(top, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}", check=False)
    if done.returncode != 0:
        branch = _git(top, "branch", "--show-current").stdout.strip() or "<branch>"
        raise SyncError(
            f"the branch has no upstream: push it once with `git push -u origin {branch}`"
        )
    return done.stdout.strip()


def _commit(top: Path, prefix: str, paths: list[str], message: str | None) -> str:
    _git(top, "add", "--all", "--", prefix or ".")
    text = message or f"mdmem sync: {len(paths)} file(s) from {socket.gethostname()}"
    done = _git(top, "commit", "--quiet", "-m", text, check=False)
    if done.returncode != 0:
        raise SyncError(f"git commit failed: {_said(done)}")
    return _head(top)


def _pull(top: Path, rebase: bool) -> None:
    how = "--rebase" if rebase else "--no-rebase"
    done = _git(top, "pull", "--quiet", how, "--no-edit", check=False)
    if done.returncode == 0:
        return
    unmerged = _git(top, "diff", "--name-only", "--diff-filter=U").stdout.split()
    if unmerged:
        step = "git rebase --continue" if rebase else "git commit"
        raise SyncError(
            f"the pull left conflicts in {', '.join(unmerged)} (between git's conflict markers, "
            "which mdmem will not write over): resolve them, git add them, run "
            f"{step}, then mdmem sync again",
            CONFLICTS,
        )
    raise SyncError(f"git pull failed: {_said(done)}")


def _head(top: Path) -> str:
    return _git(top, "rev-parse", "HEAD").stdout.strip()


def _count(top: Path, revisions: str) -> int:
    return int(_git(top, "rev-list", "--count", revisions).stdout.strip() or 0)


def _counts(top: Path, upstream: str) -> tuple[int, int]:
    left, right = _git(
        top, "rev-list", "--left-right", "--count", f"{upstream}...HEAD"
    ).stdout.split()
    return int(left), int(right)


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stderr or done.stdout).split()) or f"exit code {done.returncode}"


def _git(where: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, env=env, check=False
        )
    except FileNotFoundError:
        raise SyncError("git is not installed (or not on PATH)") from None
    if check and done.returncode != 0:
        raise SyncError(f"git {args[0]} failed: {_said(done)}")
    return done
