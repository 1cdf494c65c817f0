"""SQLite's locks on the index, held by this process, survive mdmem's own file handling.

POSIX record locks (SQLite's) belong to a process and a file: closing ANY descriptor of the file
in the process drops every one of them, including those of connections still open. A process
that opened the index twice (two ``Workspace`` objects on one folder: a library user, a test
running the CLI in its own process) then held no lock for the first connection, so another
process closing its own connection took itself for the last one and deleted ``-wal`` and
``-shm`` under it: this process's next open of the index failed with "disk I/O error"
(``SQLITE_IOERR_SHORT_READ``) and the other process's commit was missing from its reads."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.layout import private_file

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HOLDS_LOCK = """
import fcntl, sys
fd = open(sys.argv[1], "rb+")
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("held")
else:
    print("free")
"""


def _lock_seen_by_another_process(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", HOLDS_LOCK, str(path)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_making_an_existing_file_private_keeps_this_process_locks_on_it(tmp_path: Path) -> None:
    path = tmp_path / ".mdmem" / "index.db"
    private_file(path)
    with open(path, "rb+") as held:
        fcntl.lockf(held, fcntl.LOCK_SH)
        assert _lock_seen_by_another_process(path) == "held"
        private_file(path)  # as each open of the index does
        assert _lock_seen_by_another_process(path) == "held"
    assert (path.stat().st_mode & 0o777) == 0o600


def test_a_symlink_or_a_folder_in_place_of_a_private_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".mdmem").mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("not ours")
    target.chmod(0o644)
    (tmp_path / ".mdmem" / "index.db").symlink_to(target)
    with pytest.raises(OSError):
        private_file(tmp_path / ".mdmem" / "index.db")
    assert (target.stat().st_mode & 0o777) == 0o644 and target.read_text() == "not ours"
    folder = tmp_path / ".mdmem" / "index.lock"
    folder.mkdir(mode=0o755)
    with pytest.raises(IsADirectoryError):
        private_file(folder)
    assert (folder.stat().st_mode & 0o777) == 0o755


def _mdmem(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDMEM_SERVER_AUTO": "0"}
    env.pop("MDMEM_WORKSPACE", None)
    done = subprocess.run(
        [sys.executable, "-m", "mdmem", *args], cwd=cwd, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done


def test_two_workspaces_on_one_folder_in_one_process_beside_another_process(
    indexed_template: Path, tmp_path: Path, embedder
) -> None:
    """The doc tests' case: this process opens the workspace twice; a real `mdmem` process
    writes to the index and exits; this process goes on writing and searching."""
    root = tmp_path / "ws"
    shutil.copytree(indexed_template, root)
    first = Workspace.open(root, embedder=embedder)
    second = Workspace.open(root, embedder=embedder)
    try:
        assert first.search("test database port", k=1)
        assert second.search("test database port", k=1)
        _mdmem(root, "remember", "Release notes go out on Thursdays", "--type", "fact")
        _mdmem(root, "index")  # its connection, closed at exit, is not the last one
        first.remember("The staging bucket is s3://acme-staging", type="fact")
        assert first.search("staging bucket", k=1)[0].text.endswith("s3://acme-staging")
        with Workspace.open(root, embedder=embedder) as third:  # a new connection here
            assert third.search("release notes day", k=1)[0].text.endswith("on Thursdays")
            assert third.search("staging bucket", k=1)[0].text.endswith("s3://acme-staging")
    finally:
        first.close()
        second.close()
    found = _mdmem(root, "search", "staging bucket", "-k", "1", "--json").stdout
    assert "s3://acme-staging" in found
