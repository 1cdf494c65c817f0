"""Read your own writes without checking every file (issue 15): while a watcher says the
index caught up, a search after this workspace's own write indexes the files it wrote, by path, and
trusts the watcher for the rest; a watcher asked for its word first takes it back for any
change the kernel has queued (issue 31 §6), so nothing changed behind its back is missed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from postgres_cluster import both_backends

from mdmem import Workspace
from mdmem.live.watch import watcher_caught_up

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"
CONFIG = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'


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


def indexed_paths(ws: Workspace) -> set[str]:  # (SQLite)
    return {r[0] for r in ws.index._backend.conn.execute("SELECT path FROM files")}


@both_backends
def test_sync_paths_indexes_the_files_named_and_no_other(indexed: Workspace) -> None:
    root = indexed.root
    (root / ".gitignore").write_text("scratch/\n")
    (root / "notes" / "mine.md").write_text("# Mine\n\n- The otter lives upstream\n")
    (root / "notes" / "theirs.md").write_text("# Theirs\n\n- The heron waits downstream\n")
    (root / "scratch").mkdir()
    (root / "scratch" / "draft.md").write_text("# Draft\n\n- Ignored by git\n")
    gone = "learnings.md"
    (root / gone).unlink()
    assert indexed.index._backend.freshness().removed == [gone]
    mine = str((root / "notes" / "mine.md").resolve())
    report = indexed.index._backend.sync_paths(
        [mine, "scratch/draft.md", gone, "../outside.md"], embed=False
    )
    assert sorted(report.paths) == sorted(["notes/mine.md", gone])
    assert report.added == 1 and report.removed == 1
    fresh = indexed.index._backend.freshness()
    assert [f.path for f in fresh.changed] == ["notes/theirs.md"] and fresh.removed == []
    assert indexed.index._backend.sync_paths(["notes/mine.md"], embed=False).changed == 0
    hits = indexed.search("otter upstream heron downstream", mode="keyword")  # (syncs all)
    assert {hit.path for hit in hits} == {"notes/mine.md", "notes/theirs.md"}


@pytest.mark.slow
def test_an_own_write_and_a_change_behind_the_back_are_both_found(tmp_path: Path) -> None:
    # a watcher in another process, frozen before it hears of either change: asked for its
    # word, it cannot answer, so the search checks every file (issue 31 §6: before, its word
    # held for three heartbeats and the change behind the workspace's back was not seen)
    root = workspace(tmp_path)
    mdmem = Path(sys.executable).parent / "mdmem"
    watch = subprocess.Popen([str(mdmem), "-w", str(root), "watch"])
    try:
        with Workspace.open(root) as ws:
            wait_until(
                lambda: (
                    (v := watcher_caught_up(root)) is not None
                    and v.generation == ws.index._backend.generation()
                ),
                "the watcher never said the index caught up",
            )
            os.kill(watch.pid, signal.SIGSTOP)
            try:
                (root / "notes" / "zebra.md").write_text(
                    "# Town\n\n- The zebra crossing is on Elm Street\n"
                )
                ws.remember("The yak shed is behind the barn")
                hits = ws.search("yak shed behind the barn", mode="keyword")
                assert hits and "yak shed" in hits[0].text and hits.fresh
                hits = ws.search("zebra crossing Elm Street", mode="keyword")
                assert hits and "zebra" in hits[0].text
                assert "notes/zebra.md" in indexed_paths(ws)
            finally:
                os.kill(watch.pid, signal.SIGCONT)
    finally:
        watch.terminate()
        watch.wait(timeout=30)
