"""The watcher, with a real watchdog observer on real files: every editor's way of saving ends
in the index a full re-index gives."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.config import Config, EmbeddingConfig
from mdmem.index.sqlite.index import SqliteIndex as Index

EXAMPLE = Path(__file__).resolve().parent.parent / "example_workspace"

pytestmark = pytest.mark.slow
KEYWORD_ONLY = Config(embedding=EmbeddingConfig(model=""))
STATE_SQL = (
    "SELECT path, start_line, end_line, text, type, archived FROM chunks "
    "ORDER BY path, start_line, end_line, text"
)


def _state(db: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(STATE_SQL).fetchall()
    finally:
        conn.close()


def _full_reindex(root: Path, tmp: Path) -> list[tuple]:
    db = tmp / f"full-{time.monotonic_ns()}.db"
    index = Index(root, db, KEYWORD_ONLY.files, lambda: None)
    index.sync(full=True, embed=False)
    index.close()
    return _state(db)


def _converges(watcher, ws: Workspace, tmp: Path, timeout: float = 15.0) -> None:
    """The watched index equals a full re-index of the same tree (within ``timeout``)."""
    deadline = time.monotonic() + timeout
    expected = _full_reindex(ws.root, tmp)
    while True:
        watcher.wait_idle(timeout=5)
        got = _state(ws.state_dir / "index.db")
        if got == expected:
            return
        if time.monotonic() > deadline:
            missing = set(expected) - set(got)
            extra = set(got) - set(expected)
            pytest.fail(f"index never matched a full re-index: missing {missing}, extra {extra}")
        time.sleep(0.05)
        expected = _full_reindex(ws.root, tmp)


@pytest.fixture
def watched(tmp_path: Path):
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    with ws.watch() as watcher:
        assert watcher.wait_idle(timeout=30)
        yield ws, watcher, tmp_path / "scratch"


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()


def test_write_in_place(watched) -> None:
    ws, watcher, tmp = watched
    memory = ws.root / "memory.md"
    with open(memory, "r+", encoding="utf-8") as handle:
        text = handle.read().replace("Fly.io", "Render")
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    _converges(watcher, ws, tmp)
    assert any("Render" in row[3] for row in _state(ws.state_dir / "index.db"))


def test_temp_file_then_rename_over(watched) -> None:  # VS Code, many others
    ws, watcher, tmp = watched
    memory = ws.root / "memory.md"
    temp = ws.root / ".memory.md.tmp.12345"
    temp.write_text(memory.read_text() + "\n- Added through an atomic save\n")
    os.replace(temp, memory)
    _converges(watcher, ws, tmp)


def test_vim_swap_backup_and_4913_probe(watched) -> None:
    ws, watcher, tmp = watched
    memory = ws.root / "learnings.md"
    swap = ws.root / ".learnings.md.swp"
    swap.write_bytes(b"\0vim swap")
    probe = ws.root / "4913"
    probe.write_text("")
    probe.unlink()
    backup = ws.root / "learnings.md~"
    text = memory.read_text()
    os.rename(memory, backup)
    memory.write_text(text.replace("## Testing", "## Testing\n\n- Saved by vim"))
    backup.unlink()
    swap.unlink()
    _converges(watcher, ws, tmp)


def test_jetbrains_safe_write(watched) -> None:
    ws, watcher, tmp = watched
    world = ws.root / "world_state.md"
    new = ws.root / "world_state.md___jb_tmp___"
    old = ws.root / "world_state.md___jb_old___"
    new.write_text(world.read_text() + "\n- **os**: macOS 15\n")
    os.rename(world, old)
    os.rename(new, world)
    old.unlink()
    (ws.root / "download.md.part").write_text("- partial")
    _converges(watcher, ws, tmp)


def test_git_checkout_of_hundreds_of_files(watched) -> None:
    ws, watcher, tmp = watched
    notes = ws.root / "notes" / "many"
    notes.mkdir()
    for i in range(300):
        (notes / f"n{i:03}.md").write_text(f"# Note {i}\n- fact number {i} about invoices\n")
    _converges(watcher, ws, tmp, timeout=60)
    for i in range(0, 300, 2):  # a checkout: half rewritten, a third deleted, some new
        (notes / f"n{i:03}.md").write_text(f"# Note {i}\n- fact number {i}, revised\n")
    for i in range(1, 300, 3):
        (notes / f"n{i:03}.md").unlink()
    for i in range(300, 350):
        (notes / f"n{i:03}.md").write_text(f"# Note {i}\n- brand new {i}\n")
    _converges(watcher, ws, tmp, timeout=60)


def test_folders_created_moved_in_moved_out_and_deleted(watched) -> None:
    ws, watcher, tmp = watched
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("- moved in with its folder\n")
    (outside / "deep").mkdir()
    (outside / "deep" / "b.md").write_text("- deep inside\n")
    shutil.move(str(outside), str(ws.root / "incoming"))  # moved in
    created = ws.root / "created" / "sub"
    created.mkdir(parents=True)
    (created / "c.md").write_text("- in a new folder\n")
    _converges(watcher, ws, tmp)
    os.rename(ws.root / "incoming", ws.root / "renamed")  # renamed inside
    _converges(watcher, ws, tmp)
    shutil.move(str(ws.root / "renamed"), str(tmp / "gone"))  # moved out
    shutil.rmtree(ws.root / "created")  # deleted
    _converges(watcher, ws, tmp)
    paths = {row[0] for row in _state(ws.state_dir / "index.db")}
    assert not {p for p in paths if p.startswith(("renamed/", "created/", "incoming/"))}


def test_changes_while_no_watcher_ran_are_picked_up_at_start(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    ws.sync(embed=False)
    (root / "memory.md").write_text("## Facts\n- rewritten while nobody watched\n")
    (root / "notes" / "meeting-2026-11-19.md").unlink()
    with ws.watch() as watcher:
        _converges(watcher, ws, tmp_path / "scratch")


def test_an_unreadable_folder_never_removes_its_files(
    watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, watcher, tmp = watched
    before = {row[0] for row in _state(ws.state_dir / "index.db")}
    assert "notes/meeting-2026-11-19.md" in before
    real_scandir = os.scandir
    notes = str(ws.root / "notes")

    def scandir(path=".", *args):  # the OS refuses to list this folder (permissions, NFS...)
        if os.fspath(path) == notes:
            raise PermissionError(13, "Permission denied", notes)
        return real_scandir(path, *args)

    monkeypatch.setattr(os, "scandir", scandir)
    report = ws.sync(embed=False)
    assert report.removed == 0
    assert any("notes" in str(p) and "cannot read folder" in str(p) for p in report.problems)
    assert "notes/meeting-2026-11-19.md" in {row[0] for row in _state(ws.state_dir / "index.db")}
    monkeypatch.undo()
    _converges(watcher, ws, tmp)


def test_heartbeat_and_status(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    assert ws.status().watcher is None
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=30)
        info = ws.status().watcher
        assert info and info["running"] and info["pid"] == os.getpid()
    assert ws.status().watcher is None


def test_watched_edits_are_embedded(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "memory.md").write_text("## Facts\n- The office wifi is called Gandalf\n")
    ws = Workspace(root, embedder=embedder)
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=60)
        (root / "memory.md").write_text("## Facts\n- The office wifi is called Saruman now\n")
        db = ws.state_dir / "index.db"
        deadline = time.monotonic() + 60
        while not any("Saruman" in row[3] for row in _state(db)):  # the watcher, not a search
            assert time.monotonic() < deadline, "the watcher never indexed the edit"
            time.sleep(0.05)
        watcher.wait_idle(timeout=60)
        status = ws.status()
        assert status.embedded == status.chunks == 1
        hit = ws.search("what is the wifi network name", k=1, mode="vector")[0]
        assert "Saruman" in hit.text


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    mdmem = Path(sys.executable).parent / "mdmem"
    return subprocess.run([str(mdmem), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_readers_never_block_while_the_watcher_writes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    mdmem = Path(sys.executable).parent / "mdmem"
    watch = subprocess.Popen(
        [str(mdmem), "-w", str(root), "watch"], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        sock = None
        while time.monotonic() < deadline:
            status = _run_cli("-w", str(root), "status", "--json", cwd=tmp_path)
            if '"running": true' in status.stdout:
                break
            time.sleep(0.2)
        else:
            pytest.fail("watcher never reported running")
        from mdmem.layout import socket_path

        sock = socket_path(root)
        assert (sock.stat().st_mode & 0o777) == 0o600
        # a writer keeps changing files while many searchers run, in-process and via the server
        writer = subprocess.Popen(
            [sys.executable, "-c", (
                "import sys, time\n"
                "from pathlib import Path\n"
                "root = Path(sys.argv[1])\n"
                "for i in range(60):\n"
                "    (root / 'notes' / f'w{i % 7}.md').write_text(f'- churn {i} invoice\\n')\n"
                "    time.sleep(0.03)\n"
            ), str(root)]
        )  # fmt: skip
        searchers = [
            subprocess.Popen(
                [
                    str(mdmem),
                    "-w",
                    str(root),
                    "search",
                    "invoice numbering",
                    "--json",
                    *(["--no-server"] if n % 2 else []),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(8)
        ]
        outs = [p.communicate(timeout=120) for p in searchers]
        writer.wait(timeout=60)
        assert [p.returncode for p in searchers] == [0] * 8, [o[1] for o in outs]
        assert all('"hits"' in out for out, _ in outs)
        served = _run_cli("-w", str(root), "search", "invoice", "-v", cwd=tmp_path)
        assert served.returncode == 0 and "answered by the warm server" in served.stderr
    finally:
        watch.terminate()
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "watcher stopped" in err
    assert sock is not None and not sock.exists()
