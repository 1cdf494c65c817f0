"""The watcher, with a real watchdog observer on real files: every editor's way of saving ends
in the index a full re-index gives."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.config import Config, EmbeddingConfig, FilesConfig
from mdmem.index.sqlite.index import SqliteIndex as Index

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"

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


def _state_once_created(db: Path) -> list[tuple]:
    """Another process may have created the file but not yet its tables: nothing indexed yet."""
    try:
        return _state(db) if db.exists() else []
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return []


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
        got = _state(ws.files._state_dir / "index.db")
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
    assert any("Render" in row[3] for row in _state(ws.files._state_dir / "index.db"))


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
    paths = {row[0] for row in _state(ws.files._state_dir / "index.db")}
    assert not {p for p in paths if p.startswith(("renamed/", "created/", "incoming/"))}


def _inotify_watches() -> int:
    """This process's inotify watches (Linux: one ``inotify wd:`` line each in fdinfo)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                info = Path(f"/proc/self/fdinfo/{fd}").read_text()
                count += sum(line.startswith("inotify wd:") for line in info.splitlines())
    return count


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="inotify: Linux only")
def test_the_state_folder_costs_no_watch_and_every_other_folder_is_watched(
    tmp_path: Path,
) -> None:
    """``.mdmem/journal/`` keeps a folder per file a program write replaced: none of them is
    watched (a watch each, once, ran out of inotify watches in silence). A top-level folder
    renamed, or deleted and made again, is watched under its name: an edit in it is heard
    (the reconcile, 30 s, is later than the 15 s ``_converges`` waits). Each folder has two
    watches, the observer's and the search barrier's (``live/changes.py``), which also
    watches ``.mdmem/`` itself, alone, for the removal of the watcher's own files."""
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    ws.index.update(embed=False)
    for i in range(40):  # what the journal holds after writes to 40 files
        (ws.files._state_dir / "journal" / "notes" / f"f{i}.md").mkdir(parents=True)
    folders = 1 + sum(  # the root and each folder in it, but not under an ignored one
        len(dirs) for _, dirs, _ in _walk_not_ignored(root)
    )
    before = _inotify_watches()
    with ws.watch() as watcher:
        assert watcher.wait_idle(timeout=30)
        assert _inotify_watches() - before == 2 * folders + 1
        assert watcher.folders is not None and ".mdmem" not in watcher.folders.names()
        tmp = tmp_path / "scratch"

        os.rename(root / "notes", root / "renamed")
        _converges(watcher, ws, tmp)
        (root / "renamed" / "later.md").write_text("- written after the rename\n")
        _converges(watcher, ws, tmp)
        assert "renamed" in watcher.folders.names() and "notes" not in watcher.folders.names()

        shutil.rmtree(root / "renamed")
        (root / "renamed").mkdir()
        _converges(watcher, ws, tmp)
        (root / "renamed" / "again.md").write_text("- in the folder made again\n")
        _converges(watcher, ws, tmp)
        paths = {row[0] for row in _state(ws.files._state_dir / "index.db")}
        assert "renamed/again.md" in paths and "renamed/later.md" not in paths
        assert _inotify_watches() - before == 2 * folders + 1  # renamed/ in place of notes/
    assert _inotify_watches() == before


def _walk_not_ignored(root: Path):  # type: ignore[no-untyped-def]
    from mdmem.live.watch import IGNORED_DIRS

    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in IGNORED_DIRS]
        yield top, dirs, files


def test_changes_while_no_watcher_ran_are_picked_up_at_start(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    ws.index.update(embed=False)
    (root / "memory.md").write_text("## Facts\n- rewritten while nobody watched\n")
    (root / "notes" / "meeting-2026-11-19.md").unlink()
    with ws.watch() as watcher:
        _converges(watcher, ws, tmp_path / "scratch")


UNPRIVILEGED = """
import ctypes, os, sys
# Root reads any folder (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): drop both from the bounding
# set, then exec, so the program runs as root without them and a 0o000 folder is unreadable to
# it, as to anyone else. (Not root: prctl fails and permissions apply anyway.)
libc = ctypes.CDLL(None, use_errno=True)
for capability in (1, 2):
    libc.prctl(24, capability, 0, 0, 0)  # PR_CAPBSET_DROP
os.execv(sys.argv[1], sys.argv[1:])
"""


def _unprivileged(*argv: str) -> list[str]:
    return [sys.executable, "-c", UNPRIVILEGED, *argv]


def _wait_for(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_an_unreadable_folder_never_removes_its_files(tmp_path: Path) -> None:
    """A real folder the watcher's process may not list (mode 0o000), under a real
    `mdmem watch`: its files stay in the index, and come back in step once it is readable."""
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    notes = root / "notes"
    notes.chmod(0)
    try:
        probe = subprocess.run(
            _unprivileged(sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])", str(notes)),
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        notes.chmod(0o755)
    if probe.returncode == 0:
        pytest.skip("this process cannot give up reading every folder (no CAP_SETPCAP)")
    db = root / ".mdmem" / "index.db"
    log = tmp_path / "watch.log"
    mdmem = str(Path(sys.executable).parent / "mdmem")
    watch = subprocess.Popen(
        _unprivileged(mdmem, "-w", str(root), "watch", "--no-serve"), stderr=log.open("w")
    )
    meeting = "notes/meeting-2026-11-19.md"
    try:
        _wait_for(lambda: meeting in {r[0] for r in _state_once_created(db)}, "never indexed")
        notes.chmod(0)  # the OS now refuses to list it (permissions, NFS...)
        with (root / "memory.md").open("a") as handle:  # a change elsewhere: a sync runs
            handle.write("- A fact written while notes/ was unreadable\n")
        _wait_for(
            lambda: any("while notes/ was unreadable" in r[3] for r in _state(db)),
            "the watcher never synced the change",
        )
        assert "cannot read folder" in log.read_text()
        assert meeting in {r[0] for r in _state(db)}  # not a deletion
        notes.chmod(0o755)
        (notes / "meeting-2026-11-19.md").write_text("- Edited once the folder came back\n")
        deadline = time.monotonic() + 30
        while _state(db) != (expected := _full_reindex(root, tmp_path / "scratch")):
            assert time.monotonic() < deadline, "the index never matched a full re-index"
            time.sleep(0.1)
        assert any("Edited once the folder came back" in r[3] for r in expected)
    finally:
        notes.chmod(0o755)
        watch.terminate()
        watch.wait(timeout=30)
    assert watch.returncode == 0, log.read_text()


def test_heartbeat_and_status(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    ws = Workspace(root, KEYWORD_ONLY)
    assert ws.index.status().watcher is None
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=30)
        info = ws.index.status().watcher
        assert info and info["running"] and info["pid"] == os.getpid()
    assert ws.index.status().watcher is None


def test_watched_edits_are_embedded(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "memory.md").write_text("## Facts\n- The office wifi is called Gandalf\n")
    ws = Workspace(root, embedder=embedder)
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=60)
        (root / "memory.md").write_text("## Facts\n- The office wifi is called Saruman now\n")
        db = ws.files._state_dir / "index.db"
        deadline = time.monotonic() + 60
        while not any("Saruman" in row[3] for row in _state(db)):  # the watcher, not a search
            assert time.monotonic() < deadline, "the watcher never indexed the edit"
            time.sleep(0.05)
        watcher.wait_idle(timeout=60)
        status = ws.index.status()
        assert status.embedded == status.chunks == 1
        hit = ws.search("what is the wifi network name", k=1, mode="vector")[0]
        assert "Saruman" in hit.text


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    mdmem = Path(sys.executable).parent / "mdmem"
    return subprocess.run([str(mdmem), *args], capture_output=True, text=True, cwd=cwd, timeout=120)


TIMED_SEARCHES = """
import json, sys, time
from pathlib import Path
from mdmem import Workspace
from mdmem.layout import socket_path
from mdmem.live.server import request

root, how = Path(sys.argv[1]), sys.argv[2]
ws = Workspace.open(root)
seconds, hits = [], 0
ws.search("warm up", k=1)  # imports and the first load, which a busy machine slows: untimed
for i in range(10):
    started = time.monotonic()
    if how == "local":
        hits += len(ws.search("invoice numbering", k=5))
    else:
        reply = request(socket_path(root), {"op": "search", "query": "invoice numbering",
                                           "params": {"k": 5}})
        hits += len(reply["hits"])
    seconds.append(time.monotonic() - started)
    time.sleep(0.02)
print(json.dumps({"seconds": seconds, "hits": hits}))
"""


@pytest.mark.serial
def test_readers_never_block_while_the_watcher_writes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    mdmem = Path(sys.executable).parent / "mdmem"
    log = tmp_path / "watch.log"  # a file, not a pipe: a full pipe would stall the watcher
    watch = subprocess.Popen([str(mdmem), "-w", str(root), "watch"], stderr=log.open("w"))
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
                "for i in range(100_000):  # until the readers are done\n"
                "    (root / 'notes' / f'w{i % 7}.md').write_text(f'- churn {i} invoice\\n')\n"
                "    time.sleep(0.03)\n"
            ), str(root)]
        )  # fmt: skip
        # readers of both kinds, each timing its own answers: in-process searches (each with
        # its freshness check) and searches the watcher's server answers
        searchers = [
            subprocess.Popen(
                [sys.executable, "-c", TIMED_SEARCHES, str(root), "server" if n % 2 else "local"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(8)
        ]
        outs = [p.communicate(timeout=120) for p in searchers]
        assert writer.poll() is None  # the writer wrote all along
        writer.terminate()
        writer.wait(timeout=60)
        assert [p.returncode for p in searchers] == [0] * 8, [o[1] for o in outs]
        answers = [json.loads(out) for out, _ in outs]
        assert all(a["hits"] for a in answers)
        # never blocked: not one answer waited the 5 s a blocked search waits for the index
        # (each takes milliseconds; 4.5 s allows for 8 searchers and a writer on 2 loaded cores)
        slowest = max(max(a["seconds"]) for a in answers)
        assert slowest < 4.5, answers
        served = _run_cli("-w", str(root), "search", "invoice", "-v", cwd=tmp_path)
        assert served.returncode == 0 and "answered by the warm server" in served.stderr
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    err = log.read_text()
    assert watch.returncode == 0, err
    assert "watcher stopped" in err
    assert sock is not None and not sock.exists()


def test_included_non_markdown_files_are_watched(tmp_path: Path) -> None:
    """A `.txt` file selected by files.include (Claude's memory tool writes them) is indexed on
    its change event, not only by the 30 s reconcile scan."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "memory.md").write_text("## Facts\n- The office wifi is called Gandalf\n")
    (root / "claude").mkdir()  # before the watch: a new folder alone would wake the watcher
    config = Config(
        embedding=EmbeddingConfig(model=""),
        files=FilesConfig(include=("**/*.md", "**/*.txt")),
    )
    ws = Workspace(root, config)
    db = ws.files._state_dir / "index.db"
    with ws.watch() as watcher:  # reconcile_seconds keeps its default of 30 s
        assert watcher.wait_idle(timeout=30)
        (root / "claude" / "notes.txt").write_text("The deploy key rotates on Fridays\n")
        (root / "scratch.log").write_text("not included: never indexed\n")
        _wait_for(
            lambda: any("rotates on Fridays" in r[3] for r in _state(db)),
            "an included .txt file was not indexed on its change event",
            timeout=10.0,
        )
        assert not any("never indexed" in r[3] for r in _state(db))


def test_a_late_deletion_event_leaves_a_folder_made_again_watched(tmp_path: Path) -> None:
    """``rm -r a; mkdir a``: the old folder's own watch may report its deletion after the root
    reported ``a`` made again; what ``a`` is now decides, so it stays watched. A folder whose
    event was missed is found by a rescan (the reconcile runs one)."""
    from watchdog.events import DirCreatedEvent, DirDeletedEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    from mdmem.live.watch import IGNORED_DIRS
    from mdmem.live.watched_folders import WatchedFolders

    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    (root / ".mdmem").mkdir()
    observer = Observer()
    observer.start()
    try:
        folders = WatchedFolders(observer, FileSystemEventHandler(), root, IGNORED_DIRS)
        folders.start()  # (its handler hears nothing: events are given by hand below)
        assert folders.names() == ["a"]
        shutil.rmtree(root / "a")
        folders.heard(DirDeletedEvent(str(root / "a")))  # from the root's watch
        assert folders.names() == []
        (root / "a").mkdir()
        folders.heard(DirCreatedEvent(str(root / "a")))
        folders.heard(DirDeletedEvent(str(root / "a")))  # late, from the old folder's watch
        assert folders.names() == ["a"]

        (root / "b").mkdir()  # no event for these: a rescan finds them
        shutil.rmtree(root / "a")
        folders.rescan()
        assert folders.names() == ["b"]
        assert len(observer.emitters) == 2  # the root and b/: none left behind
    finally:
        observer.stop()
        observer.join()
