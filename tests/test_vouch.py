"""A live watcher vouches for freshness: while it has seen no change since its last sync, a
search skips its own check of every file; a frozen or stopped watcher's word does not hold."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from mdmem import Workspace
from mdmem.live.watch import current_vouch

EXAMPLE = Path(__file__).resolve().parent.parent / "example_workspace"
CONFIG = (
    'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n[watch]\nheartbeat_seconds = 1.0\n'
)


def wait_until(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_search_trusts_a_live_watcher_and_only_while_it_lives(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text(CONFIG)
    log = tmp_path / "watch.log"
    mdmem = Path(sys.executable).parent / "mdmem"
    watch = subprocess.Popen(
        [str(mdmem), "-w", str(root), "watch", "--no-serve"], stderr=log.open("w")
    )
    ws = Workspace.open(root)
    try:
        wait_until(
            lambda: (
                (v := current_vouch(root)) is not None and v.generation == ws.index.generation()
            ),
            "the watcher never vouched for the index",
        )
        assert ws.search("invoice numbering", mode="keyword")
        os.kill(watch.pid, signal.SIGSTOP)  # frozen before it can see the next edit
        try:
            (root / "notes" / "zebra.md").write_text(
                "# Town\n\n- The zebra crossing is on Elm Street\n"
            )
            if current_vouch(root) is not None:  # (a very slow machine may be past it)
                assert not ws.search("zebra crossing", mode="keyword")  # trusted: not checked
            wait_until(lambda: current_vouch(root) is None, "a frozen watcher kept its word", 10)
            hits = ws.search("zebra crossing", mode="keyword")  # checked, and re-indexed
            assert hits and "zebra" in hits[0].text
        finally:
            os.kill(watch.pid, signal.SIGCONT)
        # alive again: it sees the edit (already indexed by the search) and vouches again
        wait_until(lambda: current_vouch(root) is not None, "the watcher never vouched again")
        (root / "notes" / "yak.md").write_text("# Farm\n\n- The yak shed is behind the barn\n")
        wait_until(lambda: current_vouch(root) is None or ws.search("yak shed", mode="keyword"),
                   "the edit neither withdrew the vouch nor was indexed")  # fmt: skip
        wait_until(lambda: bool(ws.search("yak shed", mode="keyword")), "never indexed")
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        ws.close()
    assert watch.returncode == 0, log.read_text()
    assert current_vouch(root) is None  # a stopped watcher vouches for nothing
