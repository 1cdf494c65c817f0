"""Searching while files change under a live watcher (issue 15): a search answers from the
index as it is, neither checking every file nor waiting for the watcher's sync, and names
the files the watcher is still indexing; this workspace's own writes are found at once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import mdmem.index.sync as sync_module
from mdmem import Workspace
from mdmem.index.search import SearchResults
from mdmem.live.watch import current_vouch, watcher_word

EXAMPLE = Path(__file__).resolve().parent.parent / "example_workspace"
CONFIG = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
HOLD_LOCK = (
    "import sys; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
    "print('held', flush=True); sys.stdin.read()"
)


def wait_until(check: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def workspace(tmp_path: Path, config: str = CONFIG) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text(config)
    return root


def vouched(ws: Workspace) -> bool:
    vouch = current_vouch(ws.root)
    return vouch is not None and vouch.generation == ws.index.generation()


def heard(root: Path, rel: str) -> bool:
    word = watcher_word(root)
    return word is not None and rel in (word.pending or ())


def test_a_search_neither_checks_the_files_nor_waits_while_the_watcher_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace(tmp_path)
    scans: list[threading.Thread] = []  # which threads looked at every file
    scan = sync_module.scan
    monkeypatch.setattr(
        sync_module, "scan", lambda *a: (scans.append(threading.current_thread()), scan(*a))[1]
    )
    with Workspace(root) as ws, ws.watch() as watcher:
        wait_until(lambda: vouched(ws), "the watcher never vouched for the index")
        # another process writes the index (`mdmem index`, a second agent's sync): the
        # watcher's sync of the next change waits for it
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(root / ".mdmem" / "index.lock")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            (root / "notes" / "zebra.md").write_text(
                "# Town\n\n- The zebra crossing is on Elm St\n"
            )
            wait_until(lambda: heard(root, "notes/zebra.md"), "the watcher never said it heard")
            found: list[SearchResults] = []
            search = threading.Thread(
                target=lambda: found.append(ws.search("zebra crossing", mode="keyword"))
            )
            search.start()
            search.join(timeout=10)  # (it takes milliseconds; before, it waited for the sync)
            assert not search.is_alive(), "the search waited for the watcher's sync"
            assert search not in scans, "the search looked at every file"
        finally:
            holder.communicate("")
        hits = found[0]
        assert not hits  # the index as it is: the watcher has not indexed the change yet
        assert hits.stale == ["notes/zebra.md"] and not hits.fresh
        assert "the watcher is indexing 1 changed file(s)" in hits.problems[0]
        assert watcher.wait_idle(timeout=30)
        wait_until(lambda: ws.search("zebra crossing", mode="keyword"), "never indexed")
        hits = ws.search("zebra crossing", mode="keyword")
        assert hits.fresh and "zebra" in hits[0].text


def test_a_workspace_finds_what_it_wrote_itself_at_once(tmp_path: Path) -> None:
    # a watcher in another process, frozen before it hears of the write: its word (given
    # for the index before the write) still holds for three heartbeats
    root = workspace(tmp_path, CONFIG + "[watch]\nheartbeat_seconds = 5.0\n")
    mdmem = Path(sys.executable).parent / "mdmem"
    watch = subprocess.Popen([str(mdmem), "-w", str(root), "watch", "--no-serve"])
    try:
        with Workspace.open(root) as ws:
            wait_until(lambda: vouched(ws), "the watcher never vouched for the index")
            assert not ws.search("yak shed behind the barn", mode="keyword")
            os.kill(watch.pid, signal.SIGSTOP)
            try:
                ws.remember("The yak shed is behind the barn")
                assert current_vouch(root) is not None  # trusted for others' edits, but:
                hits = ws.search("yak shed behind the barn", mode="keyword")
                assert hits and "yak shed" in hits[0].text and hits.fresh
                with ws.session("feed the yak") as session:
                    session.event("execute", "Moved the yak to the north pasture")
                    hits = ws.search("yak north pasture", mode="keyword")
                    assert hits and "north pasture" in hits[0].text
            finally:
                os.kill(watch.pid, signal.SIGCONT)
    finally:
        watch.terminate()
        watch.wait(timeout=30)
