"""Clones of one workspace sharing a bare remote through real git: the world the git sync
scenario tests, the git model (tests/integration/test_git_model.py) and the soak run
(benchmarks/git_sync_soak.py) drive.

Every clone is a keyword-only workspace (no model to load) that ran ``mdmem init``'s git
set-up; the agent's operations go through the library, a person's edits straight to the file,
``mdmem sync`` through the library or the real command, plain pulls through git itself.

Speed (each scenario and each model example builds a world): the remote and its clones are
made once per process and copied (:func:`shutil.copytree`) for every world; every repository is
set for speed (no auto gc or maintenance, no fsync, no hooks); and git's merge driver is a
few-line client (``python -S``, the standard library only) that hands the merge to
:func:`~mdmem.sharing.git_merge_driver.run_driver` in this process over a socket, instead of a
process importing mdmem for every file merged. git still runs it as a driver, with the same
arguments, exit code and messages as ``mdmem merge-driver``; a world built with
``driver_process=True`` configures the real command (what ``mdmem init`` records).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mdmem.config import set_local_agent
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import parse_document
from mdmem.sharing.git_merge_driver import run_driver
from mdmem.sharing.git_sync import SyncError, configure_driver, install_gitattributes
from mdmem.workspace import Workspace

MDMEM = str(Path(sys.executable).with_name("mdmem"))
SEED = ("Seed one: deploys go to Heroku", "Seed two: CI runs on Jenkins")
CONFIG = '\n[embedding]\nmodel = ""\n\n[write]\nlate_save_ms = 50\n'
"""Keyword only (no model to load); a short late-save window (each close waits for it)."""


def git(where: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true"}
    done = subprocess.run(
        ["git", *args], cwd=where, capture_output=True, text=True, check=False, env=env
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} in {where}: {done.stderr}{done.stdout}")
    return done


@dataclass(frozen=True)
class Synced:
    """What one sync (or pull) did: its exit code (0 done) and what it said."""

    code: int
    said: str


FAST = (
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("core.fsync", "none"),
    ("core.fsyncObjectFiles", "false"),
    ("core.hooksPath", "/dev/null"),
)
"""git config for speed: a test's repositories live seconds, nothing needs to reach the disk."""

_CLIENT = """
import json, os, socket, sys
a = sys.argv[1:]
s = socket.socket(socket.AF_UNIX)
s.connect(a[0])
paths = [os.path.abspath(p) for p in a[1:4]]
s.sendall((json.dumps(paths + [a[4]]) + chr(10)).encode())
code, messages = json.loads(s.makefile().read())
for m in messages:
    sys.stderr.write("mdmem merge-driver: " + m + chr(10))
sys.exit(code)
"""
"""The driver git runs: argv is the socket, then %O %A %B %P (no percent sign in here: git
would substitute it)."""


class _DriverServer:
    """:func:`run_driver` for git's driver clients, on a socket in this process."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="mdmem-driver-")
        self.path = os.path.join(self.dir, "s")
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()
        self.command = " ".join(
            shlex.quote(word) for word in (sys.executable, "-S", "-c", _CLIENT, self.path)
        )
        self.command += " %O %A %B %P"

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:
            base, ours, theirs, path = json.loads(stream.readline())
            try:
                outcome = run_driver(Path(base), Path(ours), Path(theirs), path)
                answer = [1 if outcome.conflicts else 0, list(outcome.messages)]
            except Exception as exc:  # the client must hear of it, not hang
                answer = [2, [f"{path}: the test's driver failed: {exc!r}"]]
            stream.write(json.dumps(answer).encode())


_server: _DriverServer | None = None
_templates: dict[tuple[int, tuple[str, ...]], Path] = {}


def _driver() -> _DriverServer:
    global _server
    if _server is None:
        _server = _DriverServer()
    return _server


def _fast(repo: Path) -> None:
    for key, value in FAST:
        git(repo, "config", key, value)


def _make(n: int, seed: tuple[str, ...]) -> Path:
    """The remote and ``n`` clones, made once per process (removed when it exits)."""
    base = Path(tempfile.mkdtemp(prefix="mdmem-git-world-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    remote = base / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    _fast(remote)
    first = _clone(base, "c0")
    Workspace.init(first, mode="minimal", agent="c0")
    install_gitattributes(first)
    with (first / "mdmem.toml").open("a", encoding="utf-8") as config:
        config.write(CONFIG)
    with Workspace.open(first) as ws:
        for text in seed:
            ws.remember(text)
    git(first, "add", "--all")
    git(first, "commit", "--quiet", "-m", "seed")
    git(first, "push", "--quiet", "-u", "origin", "main")
    roots = [first] + [_clone(base, f"c{i}") for i in range(1, n)]
    for i, root in enumerate(roots):
        set_local_agent(root, f"c{i}")
    return base


def _clone(base: Path, name: str) -> Path:
    target = base / name
    git(base, "clone", "--quiet", str(base / "remote.git"), str(target))
    for key, value in (
        ("user.name", name),
        ("user.email", f"{name}@example.invalid"),
        ("commit.gpgsign", "false"),
    ):
        git(target, "config", key, value)
    _fast(target)
    configure_driver(target, _driver().command)
    return target


class GitWorld:
    """A bare remote and ``n`` clones of a workspace seeded with :data:`SEED`: a copy of the
    set this process made first for ``(n, seed)``."""

    def __init__(
        self,
        base: Path,
        n: int = 2,
        *,
        seed: tuple[str, ...] = SEED,
        driver_process: bool = False,
    ) -> None:
        self.base = base
        self.remote = base / "remote.git"
        made = _templates.get((n, seed))
        if made is None:
            made = _templates[(n, seed)] = _make(n, seed)
        shutil.copytree(made / "remote.git", self.remote, symlinks=True)
        self.roots: list[Path] = []
        for i in range(n):
            root = base / f"c{i}"
            shutil.copytree(made / f"c{i}", root, symlinks=True)
            config = root / ".git" / "config"
            config.write_text(
                config.read_text(encoding="utf-8").replace(
                    str(made / "remote.git"), str(self.remote)
                ),
                encoding="utf-8",
            )
            if driver_process:
                configure_driver(root)
            self.roots.append(root)

    # ---- the agent ---------------------------------------------------------------------------

    @contextmanager
    def ws(self, i: int) -> Iterator[Workspace]:
        with Workspace.open(self.roots[i]) as ws:
            yield ws

    def remember(self, i: int, text: str) -> str:
        with self.ws(i) as ws:
            return ws.remember(text).id

    def update(self, i: int, text: str, new: str) -> str:
        with self.ws(i) as ws:
            return ws.update(self.find(i, text), text=new).id

    def supersede(self, i: int, text: str, new: str) -> str:
        with self.ws(i) as ws:
            return ws.supersede(self.find(i, text), new).id

    def forget(self, i: int, text: str) -> None:
        with self.ws(i) as ws:
            ws.forget(self.find(i, text))

    def pool_write(self, i: int, key: str, value: str) -> int:
        with self.ws(i) as ws:
            return ws.sharing.pool("team").write(key, value, writer=f"c{i}").version

    def find(self, i: int, text: str) -> Entry:
        found = [e for e in self.entries(i) if e.text == text and not e.archived]
        assert found, f"c{i}: no live entry {text!r}"
        return found[0]

    # ---- a person ----------------------------------------------------------------------------

    def edit(self, i: int, change: Callable[[str], str], rel: str = "memory.md") -> None:
        """A person's editor: reads the file, changes it, saves it in place."""
        path = self.roots[i] / rel
        path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")

    # ---- git -------------------------------------------------------------------------------

    def sync(self, i: int, *, rebase: bool = True, cli: bool = False) -> Synced:
        """``mdmem sync`` (``--merge`` when not ``rebase``): in this process, or the command."""
        if cli:
            args = [MDMEM, "-w", str(self.roots[i]), "sync", *([] if rebase else ["--merge"])]
            done = subprocess.run(args, capture_output=True, text=True, check=False)
            return Synced(done.returncode, done.stdout + done.stderr)
        try:
            with self.ws(i) as ws:
                ws.sharing.sync(rebase=rebase)
        except SyncError as exc:
            return Synced(exc.code, str(exc))
        return Synced(0, "")

    def pull(self, i: int, *, rebase: bool = True) -> Synced:
        """A person's plain ``git pull`` (after committing what is dirty), then a push."""
        root = self.roots[i]
        git(root, "add", "--all")
        git(root, "commit", "--quiet", "-m", "by hand", check=False)
        done = git(root, "pull", "--quiet", "--rebase" if rebase else "--no-rebase", check=False)
        if done.returncode != 0:
            return Synced(done.returncode, done.stderr + done.stdout)
        pushed = git(root, "push", "--quiet", check=False)
        return Synced(pushed.returncode, pushed.stderr)

    def head(self, i: int) -> str:
        return git(self.roots[i], "rev-parse", "HEAD").stdout.strip()

    def in_progress(self, i: int) -> bool:
        dot = self.roots[i] / ".git"
        return any((dot / m).exists() for m in ("rebase-merge", "rebase-apply", "MERGE_HEAD"))

    # ---- what the clones hold ----------------------------------------------------------------

    def text(self, i: int, rel: str = "memory.md") -> str:
        return (self.roots[i] / rel).read_text(encoding="utf-8")

    def entries(self, i: int, rel: str = "memory.md") -> list[Entry]:
        return parse_document(rel, self.text(i, rel)).entries

    def files(self, i: int) -> dict[str, bytes]:
        """The clone's workspace files as git sees them: tracked and untracked, not ignored."""
        root = self.roots[i]
        listed = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return {
            rel: (root / rel).read_bytes()
            for rel in sorted(set(listed.stdout.split("\0")))
            if rel and (root / rel).is_file()
        }

    def committed(self, i: int) -> list[str]:
        return [p for p in git(self.roots[i], "ls-files", "-z").stdout.split("\0") if p]

    def everywhere(self, i: int, needle: str) -> list[str]:
        """Every file of the clone (the index, .git aside) whose bytes hold ``needle``."""
        found = []
        for path in self.roots[i].rglob("*"):
            parts = path.relative_to(self.roots[i]).parts
            if parts[0] in (".git", ".mdmem") or not path.is_file():
                continue
            if needle.encode() in path.read_bytes():
                found.append(path.relative_to(self.roots[i]).as_posix())
        return found


def count(entries: list[Entry], text: str) -> tuple[int, int]:
    """How many live and archived entries hold exactly ``text``."""
    live = sum(1 for e in entries if e.text == text and not e.archived)
    return live, sum(1 for e in entries if e.text == text and e.archived)


def without_meta(text: str) -> str:
    """``text`` without mdmem's metadata comments: what a person sees."""
    return re.sub(r" ?<!-- mdmem [^>]*-->", "", text)
