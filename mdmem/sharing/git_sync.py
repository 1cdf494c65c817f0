"""Sharing a workspace through git: the merge driver's set-up, and ``mdmem sync``.

``sync`` is the one safe round trip: commit the workspace's own changes (nothing else), pull
(rebase by default) with the merge driver merging memory files entry by entry, re-index, push.
It refuses rather than guesses: other files dirty, a merge or rebase in progress, a file
holding conflict markers, no upstream, a merge driver git cannot run (without it git merges the
files line by line). After the pull it checks that every entry either side added or changed is
still in the files (:func:`mdmem.sharing.git_merge_driver.missing_entries`) and undoes the pull
rather than push a loss. It never force-pushes; a push the remote rejects (it moved on
meanwhile) is an error to run ``sync`` again after.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mdmem.config import LOCAL_CONFIG_NAME
from mdmem.errors import MdmemError
from mdmem.markdown.conflicts import conflict_line
from mdmem.sharing.git_merge_driver import (
    GIT_ATTRIBUTES,
    Missing,
    contradictions,
    file_kind,
    missing_entries,
)

DRIVER = "merge-driver %O %A %B %P"
"""The arguments git gives the driver: base, ours (the result goes there), theirs, the path."""
LEGACY_DRIVER = f"mdmem {DRIVER}"
"""What ``mdmem init`` recorded before it named the interpreter: found only on git's PATH."""
ATTRIBUTE = "merge=mdmem"
_HEADER = "# mdmem: merge memory files entry by entry. Each clone also needs (mdmem init runs it):"
REFUSED, CONFLICTS, REJECTED, LOST = 3, 4, 5, 6
"""Exit codes of ``mdmem sync`` beyond 0 (done), 1 (an error) and 2 (bad usage)."""
TEMP_PATTERN = "*.mdmem-tmp"
"""mdmem's temp files (a write in progress, or one a crash left): git-ignored, never committed."""
STATE_DIR = ".mdmem"
SYNC_LOCK = "sync.lock"
"""Under ``.mdmem/locks/``: one ``mdmem sync`` per clone at a time."""
PULLING = "sync-pulling"
"""Under ``.mdmem/``: a pull mdmem started and has not finished (this clone's HEAD before it);
a sync that finds it with git's rebase or merge still in progress rolls that pull back."""
LOCK_WAIT_S = 120.0
"""How long a sync waits for another sync, or for program writes, to finish."""


class SyncError(MdmemError):
    """``sync`` stopped; ``code`` says why (1 an error, 3 refused, 4 conflicts, 5 rejected,
    6 the merge would have lost entries: undone)."""

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
    migrated: str | None = None
    """The driver line set in place of an old one this run (None: left as it was)."""
    contradictions: tuple[str, ...] = ()
    """``contradicts`` relations the merge made (two machines replaced one memory
    differently): a person settles them."""
    kept_both: tuple[str, ...] = ()
    """Where the merge driver could not choose between two versions and kept both: a person
    may want to settle them."""

    def to_dict(self) -> dict[str, object]:
        return {
            **vars(self),
            "committed": list(self.committed),
            "contradictions": list(self.contradictions),
            "kept_both": list(self.kept_both),
        }


# ---- set-up ----------------------------------------------------------------------------------


def driver_command(python: str | None = None) -> str:
    """The driver line for this installation: its interpreter by absolute path with
    ``-m mdmem``, so git runs it whatever its PATH holds (a virtual environment not activated,
    a pipx or IDE launcher, cron)."""
    interpreter = python or sys.executable
    if not interpreter:  # an embedded Python that cannot name itself
        interpreter = shutil.which("python3") or "python3"
    return f"{shlex.quote(interpreter)} -m mdmem {DRIVER}"


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
        else [_HEADER, f'#   git config merge.mdmem.driver "<python> -m mdmem {DRIVER}"']
    )
    sep = "" if not text or text.endswith("\n") else "\n"
    path.write_text(text + sep + "\n".join([*block, *missing]) + "\n", encoding="utf-8")
    return missing


def driver_notice(in_repository: bool) -> str:
    """The line ``mdmem init`` prints as it installs the merge driver: which files it changed and
    how to undo it, so nothing in a person's git set-up changes unannounced."""
    if not in_repository:
        return ".gitattributes: merge=mdmem lines (git merges memory files entry by entry)"
    return (
        ".gitattributes and .git/config: merge=mdmem lines, and merge.mdmem.driver for this "
        "clone (git merges memory files entry by entry); undo: "
        "git config --remove-section merge.mdmem, and delete those lines"
    )


def ignore_temp_files(root: Path) -> bool:
    """Add mdmem's temp files (``*.mdmem-tmp``) to the workspace's .gitignore; True if added.
    Every other line stays as it is."""
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if TEMP_PATTERN in {line.strip().lstrip("/") for line in text.splitlines()}:
        return False
    sep = "" if not text or text.endswith("\n") else "\n"
    comment = "# a write in progress (mdmem's temp files)\n"
    path.write_text(text + sep + comment + TEMP_PATTERN + "\n", encoding="utf-8")
    return True


def ignore_local_config(root: Path) -> bool:
    """Add mdmem.local.toml (this machine's agent) to the workspace's .gitignore; True if
    added. Every other line stays as it is."""
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if LOCAL_CONFIG_NAME in {line.strip().lstrip("/") for line in text.splitlines()}:
        return False
    sep = "" if not text or text.endswith("\n") else "\n"
    comment = "# this machine's mdmem settings (agent)\n"
    path.write_text(text + sep + comment + LOCAL_CONFIG_NAME + "\n", encoding="utf-8")
    return True


def repo_root(path: Path) -> Path | None:
    """The top of the git work tree ``path`` is in; None outside one (or without git)."""
    try:
        done = _git(path, "rev-parse", "--show-toplevel", check=False)
    except SyncError:
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def configure_driver(path: Path, command: str | None = None) -> str:
    """Define the ``mdmem`` merge driver in the repository's own config (this clone only:
    git does not copy config with a clone); the command set."""
    command = command or driver_command()
    _git(path, "config", "merge.mdmem.name", "mdmem: memory files entry by entry")
    _git(path, "config", "merge.mdmem.driver", command)
    return command


def configured_driver(path: Path) -> str | None:
    """The driver line this clone's git config holds; None when it has none."""
    done = _git(path, "config", "--get", "merge.mdmem.driver", check=False)
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def migrate_driver(path: Path) -> str | None:
    """Replace the bare-name line an older ``mdmem init`` recorded by this installation's; the
    new line, or None when there was nothing to migrate."""
    if configured_driver(path) != LEGACY_DRIVER:
        return None
    return configure_driver(path)


def driver_problem(top: Path, prefix: str) -> str | None:
    """Why git could not run the merge driver on this workspace's files (None: it can): the
    attribute or the driver line missing, or the program it names gone."""
    probe = f"{prefix}/memory.md" if prefix else "memory.md"
    attr = _git(top, "check-attr", "merge", "--", probe).stdout.strip()
    fix = f"run `mdmem init {top / prefix if prefix else top}` in this clone"
    if not attr.endswith(": mdmem"):
        return (
            f"{probe} has no merge=mdmem attribute, so git would merge memory files line by "
            f"line (duplicates and conflicts on simple adds): {fix} and commit .gitattributes"
        )
    command = configured_driver(top)
    if command is None:
        return (
            "this clone has no merge.mdmem.driver in its git config (git does not copy config "
            f"with a clone), so git would merge memory files line by line: {fix}"
        )
    why = _cannot_run(command, top)
    if why is None:
        return None
    return (
        f"git cannot run the merge driver this clone names ({command!r}: {why}); a pull would "
        f"leave memory files unmerged: {fix} (it sets merge.mdmem.driver to {driver_command()})"
    )


def _cannot_run(command: str, top: Path) -> str | None:
    """Why the driver line's program cannot run as git would start it; None when it can."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"not a command line: {exc}"
    if not words:
        return "empty"
    program = words[0]
    if "/" in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            return f"{program} does not exist any more (a virtual environment rebuilt?)"
    else:
        exec_path = _git(top, "--exec-path", check=False).stdout.strip()
        search = os.pathsep.join(p for p in (exec_path, os.environ.get("PATH", "")) if p)
        found = shutil.which(program, path=search)
        if found is None:
            return f"{program!r} is not on git's PATH"
        program = found
    if words[1:3] == ["-m", "mdmem"] and not _same_file(program, sys.executable):
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('mdmem') is None)"
        done = subprocess.run([program, "-c", probe], capture_output=True, check=False)
        if done.returncode != 0:
            return f"{program} cannot import mdmem"
    return None


def _same_file(a: str, b: str) -> bool:
    """The same path (not resolved: two virtual environments link to one interpreter)."""
    return bool(b) and os.path.abspath(a) == os.path.abspath(b)


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
    with _sync_lock(root):
        with _write_locks(root, top, prefix):
            _roll_back_own_pull(root, top)
            _refuse_in_progress(top)
            if (root / LOCAL_CONFIG_NAME).exists():
                ignore_local_config(root)  # this machine's agent: never committed for every clone
            if not dry_run:
                ignore_temp_files(root)
            mine = _dirty_workspace_paths(top, prefix)
            upstream = _upstream(top)
            migrated = None if dry_run else migrate_driver(top)
            if (problem := driver_problem(top, prefix)) is not None:
                raise SyncError(problem, REFUSED)
            if dry_run:
                _git(top, "fetch", "--quiet")
                behind, ahead = _counts(top, upstream)
                return SyncReport(True, tuple(mine), None, behind, ahead, False)
            commit = _commit(top, prefix, mine, message) if mine else None
            before = _head(top)
            told = _pull_once(root, top, rebase, before)
            found = _check_merge(top, prefix, before)
            behind = _count(top, f"{before}..{upstream}")
        reindex()
        ahead = _count(top, f"{upstream}..HEAD")
        if ahead:
            pushed = _git(top, "push", "--quiet", check=False)
            if pushed.returncode != 0:
                raise SyncError(
                    "the remote refused the push (it moved on meanwhile?); nothing was forced: "
                    f"run mdmem sync again. git said: {_said(pushed)}",
                    REJECTED,
                )
    return SyncReport(False, tuple(mine), commit, behind, ahead, True, migrated, found, told)


@contextlib.contextmanager
def _sync_lock(root: Path) -> Iterator[None]:
    """One ``mdmem sync`` per clone at a time: a second waits for the first to finish."""
    from mdmem.writes.file_lock import FileLock, Timeout

    lock = root / STATE_DIR / "locks" / SYNC_LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(lock), timeout=LOCK_WAIT_S):
            yield
    except Timeout:
        raise SyncError(
            f"another mdmem sync in this clone held {lock} for {LOCK_WAIT_S:.0f} s; nothing "
            "was done: run mdmem sync again when it has finished"
        ) from None


def write_lock_path(root: Path, rel: str) -> Path:
    """The lock every program write of ``rel`` takes (mdmem.writes.safe_writer's
    ``SafeWriter.lock_path``; a test holds the two to one name)."""
    return root / STATE_DIR / "locks" / f"{urllib.parse.quote(rel, safe='')}.lock"


@contextlib.contextmanager
def _write_locks(root: Path, top: Path, prefix: str) -> Iterator[None]:
    """Hold the write lock of every Markdown file of the workspace while sync commits and
    pulls: a program write (this process or another) waits, so it never lands between the
    commit and the pull, nor in the middle of a rebase. All are taken at once or none (a
    write holds one lock at a time; no one waits while holding another)."""
    from mdmem.writes.file_lock import FileLock, Timeout

    listed = _git(
        top, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", prefix or "."
    ).stdout.split("\0")
    rels = {
        PurePosixPath(p).relative_to(prefix).as_posix() if prefix else p
        for p in listed
        if p.endswith(".md")
    }
    rels |= {p for p in GIT_ATTRIBUTES if "*" not in p}  # made by a write meanwhile, too
    locks = [FileLock(str(write_lock_path(root, rel)), timeout=0) for rel in sorted(rels)]
    if locks:
        write_lock_path(root, "x").parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        held: list[FileLock] = []
        try:
            for lock in locks:
                lock.acquire(timeout=0)
                held.append(lock)
            break
        except Timeout:
            for lock in reversed(held):
                lock.release()
            if time.monotonic() > deadline:
                raise SyncError(
                    f"program writes kept the workspace's files locked for {LOCK_WAIT_S:.0f} s; "
                    "nothing was done: run mdmem sync again"
                ) from None
            time.sleep(0.02)
    try:
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def _roll_back_own_pull(root: Path, top: Path) -> None:
    """A pull an earlier sync started and never finished (killed, a machine that went down):
    git's rebase or merge still in progress. It is rolled back to the commit the sync had made
    (this clone's work, all committed before the pull), unless files changed since (then the
    person is told which: nothing is thrown away)."""
    marker = root / STATE_DIR / PULLING
    if not marker.exists():
        return
    if not _in_progress(top):
        marker.unlink(missing_ok=True)
        return
    status = _git(top, "status", "--porcelain=v1", "-z", "--untracked-files=no").stdout
    changed = [f[3:] for f in status.split("\0") if f and "U" not in f[:2] and f[:2] != "  "]
    unmerged = [f[3:] for f in status.split("\0") if f and "U" in f[:2]]
    if changed and not unmerged:
        raise SyncError(
            "an earlier mdmem sync stopped mid-pull and files changed since "
            f"({', '.join(changed[:5])}): git add them and run git rebase --continue (git "
            "commit, for a merge), then mdmem sync again",
            REFUSED,
        )
    _abort(top)
    marker.unlink(missing_ok=True)


def _in_progress(top: Path) -> str | None:
    for marker in ("rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        found = _git(top, "rev-parse", "--git-path", marker).stdout.strip()
        if (top / found).exists():
            return marker
    return None


def _abort(top: Path) -> None:
    """Roll back a rebase or merge in progress (this clone's work is committed)."""
    what = _in_progress(top)
    if what is None:
        return
    verb = "merge" if what == "MERGE_HEAD" else "rebase"
    _git(top, verb, "--abort", check=False)


def _pull_once(root: Path, top: Path, rebase: bool, before: str) -> tuple[str, ...]:
    """The pull, marked as this sync's own while it runs: a sync that finds the mark with a
    rebase still in progress knows it may roll it back."""
    marker = root / STATE_DIR / PULLING
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(before + "\n", encoding="utf-8")
    try:
        said = _pull(top, rebase)
    finally:
        if _in_progress(top) is None:
            marker.unlink(missing_ok=True)
    prefix = "mdmem merge-driver: "
    notes = [
        line.removeprefix(prefix)
        for line in said.splitlines()
        if line.startswith(prefix) and "kept" in line and "both" in line
    ]
    return tuple(dict.fromkeys(notes))  # a rebase replays commits: each note once


def _check_merge(top: Path, prefix: str, before: str) -> tuple[str, ...]:
    """After a pull that merged (not a fast-forward): every entry either side added or changed
    since their merge base is in the result, else the pull is undone (``git reset --keep``
    back to ``before``, which holds this clone's work) and nothing is pushed. Returns the
    contradictions the merge made."""
    theirs = _git(top, "rev-parse", "@{u}").stdout.strip()
    head = _head(top)
    base_done = _git(top, "merge-base", before, theirs, check=False)
    base = base_done.stdout.strip() if base_done.returncode == 0 else None
    if base in (before, theirs):
        return ()  # nothing pulled, or a fast-forward: no merge to check (a rebase that
        # dropped this clone's commit as empty ends on theirs too: that one is checked)
    lost: list[tuple[str, Missing, str]] = []
    made: list[str] = []
    for path in _changed_md(top, prefix, base, (before, theirs)):
        old, result = _show(top, base, path), _show(top, head, path)
        mine, remote = _show(top, before, path), _show(top, theirs, path)
        lost += [(path, m, "this clone") for m in missing_entries(path, old, mine, result)]
        lost += [(path, m, "the remote") for m in missing_entries(path, old, remote, result)]
        made += [f"{path}: {c}" for c in contradictions(path, mine, remote, result)]
    if lost:
        _git(top, "reset", "--quiet", "--keep", before)
        shown = "; ".join(f"{p}: {m.text[:60]!r} (from {side})" for p, m, side in lost[:5])
        more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        raise SyncError(
            f"the merge would have lost {len(lost)} entr{'y' if len(lost) == 1 else 'ies'} "
            f"({shown}{more}): the pull was undone (this clone is back at {before[:12]}, its own "
            f"work, committed), nothing was pushed and nothing is lost; this is a defect of the "
            "merge: report it with the entries named (a plain git pull would drop them)",
            LOST,
        )
    return tuple(made)


def _changed_md(top: Path, prefix: str, base: str | None, sides: tuple[str, ...]) -> list[str]:
    """The workspace's files the driver merges that a side changed since ``base`` (every one:
    no base)."""
    paths: dict[str, None] = {}
    for side in sides:
        if base is None:
            args = ["ls-tree", "-r", "--name-only", "-z", side, "--", prefix or "."]
        else:
            args = ["diff", "--name-only", "--no-renames", "-z", base, side, "--", prefix or "."]
        for path in _git(top, *args).stdout.split("\0"):
            if file_kind(path) is not None:  # the files the driver merges; the rest are git's
                paths[path] = None
    return list(paths)


def _show(top: Path, rev: str | None, path: str) -> str:
    """``path`` as commit ``rev`` holds it ("" where it has none)."""
    if rev is None:
        return ""
    done = _git(top, "show", f"{rev}:{path}", check=False)
    return done.stdout if done.returncode == 0 else ""


def _prefix(root: Path, top: Path) -> str:
    rel = root.resolve().relative_to(top.resolve())
    return "" if rel == Path(".") else rel.as_posix()


def _refuse_in_progress(top: Path) -> None:
    """A rebase or merge a person started: theirs to finish (aborting it would throw away
    what they resolved so far, so mdmem never advises it)."""
    marker = _in_progress(top)
    if marker is not None:
        what = marker.split("-")[0].split("_")[0].lower()
        step = "git commit" if what == "merge" else f"git {what} --continue"
        raise SyncError(
            f"a git {what} you started is in progress in {top}: finish it first (resolve, "
            f"git add, {step}), then mdmem sync",
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
        if PurePosixPath(path).match(TEMP_PATTERN):
            continue  # a write in progress: never committed
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
    _git(top, "add", "--all", "--", prefix or ".", f":(exclude,glob)**/{TEMP_PATTERN}")
    text = message or f"mdmem sync: {len(paths)} file(s) from {socket.gethostname()}"
    done = _git(top, "commit", "--quiet", "-m", text, check=False)
    if done.returncode != 0:
        raise SyncError(f"git commit failed: {_said(done)}")
    return _head(top)


def _pull(top: Path, rebase: bool) -> str:
    """The pull; what git (and the merge driver, through it) said."""
    how = "--rebase" if rebase else "--no-rebase"
    done = _git(top, "pull", "--quiet", how, "--no-edit", check=False)
    if done.returncode == 0:
        return done.stderr
    unmerged = _git(top, "diff", "--name-only", "-z", "--diff-filter=U").stdout.split("\0")
    unmerged = [path for path in unmerged if path]
    if not unmerged:
        raise SyncError(f"git pull failed: {_said(done)}")
    marked = {path: line for path in unmerged if (line := _marker_line(top / path)) is not None}
    if len(marked) < len(unmerged):
        # no markers: git's merge of that file failed outright (a driver that did not run,
        # a file deleted on one side). Its copy holds one side only; adding it as it is
        # would drop the other's entries, so the pull is undone instead.
        _git(top, "rebase" if rebase else "merge", "--abort", check=False)
        bare = ", ".join(p for p in unmerged if p not in marked)
        raise SyncError(
            f"git could not merge {bare} (it left no conflict markers; git said: {_said(done)}): "
            "the pull was undone, nothing was lost or pushed; fix the cause and run mdmem sync "
            "again",
            CONFLICTS,
        )
    where = ", ".join(f"{path}:{line}" for path, line in marked.items())
    _git(top, "rebase" if rebase else "merge", "--abort", check=False)
    raise SyncError(
        f"the same lines were changed on both sides ({where}): the pull was undone (this clone "
        "keeps its work, committed; nothing pushed). To settle them by hand: git pull "
        "--no-rebase, edit the lines between the conflict markers, git add, git commit, then "
        "mdmem sync",
        CONFLICTS,
    )


def _marker_line(file: Path) -> int | None:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return conflict_line(text)


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
