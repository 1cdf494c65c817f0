"""A live watcher says the index caught up only as of the moment it is asked: a search in
another process asks its server, which first reads every change the kernel queued before the
question; a frozen watcher, or one with no server to ask, gives no word."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from mdmem import Workspace
from mdmem.live.watch import watcher_caught_up

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"
CONFIG = (
    'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n[watch]\nheartbeat_seconds = 1.0\n'
)


def wait_until(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_search_trusts_a_live_watcher_and_only_as_of_asking(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text(CONFIG)
    log = tmp_path / "watch.log"
    mdmem = Path(sys.executable).parent / "mdmem"
    watch = subprocess.Popen([str(mdmem), "-w", str(root), "watch"], stderr=log.open("w"))
    ws = Workspace.open(root)
    try:
        wait_until(
            lambda: (
                (v := watcher_caught_up(root)) is not None
                and v.generation == ws.index._backend.generation()
            ),
            "the watcher never said the index caught up",
        )
        assert ws.search("invoice numbering", mode="keyword")
        os.kill(watch.pid, signal.SIGSTOP)  # frozen before it can see the next edit
        try:
            (root / "notes" / "zebra.md").write_text(
                "# Town\n\n- The zebra crossing is on Elm Street\n"
            )
            assert watcher_caught_up(root) is None  # it cannot answer: no word
            hits = ws.search("zebra crossing", mode="keyword")  # checked, and re-indexed
            assert hits and "zebra" in hits[0].text
        finally:
            os.kill(watch.pid, signal.SIGCONT)
        wait_until(
            lambda: watcher_caught_up(root) is not None, "the watcher never gave its word again"
        )
        (root / "notes" / "yak.md").write_text("# Farm\n\n- The yak shed is behind the barn\n")
        hits = ws.search("yak shed", mode="keyword")  # at once: its word is taken back first
        assert hits and "yak" in hits[0].text
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        ws.close()
    assert watch.returncode == 0, log.read_text()
    assert watcher_caught_up(root) is None  # a stopped watcher gives no word


def test_a_watcher_with_no_server_gives_no_word_to_another_process(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text(CONFIG)
    with Workspace.open(root) as ws, ws.watch() as watcher:  # (serves no socket)
        assert watcher.wait_idle(timeout=30)
        wait_until(lambda: watcher.word() is not None, "the watcher never gave its word")
        assert watcher_caught_up(root) is not None  # in its own process: asked directly
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from mdmem.live.watch import watcher_caught_up; "
             "from pathlib import Path; print(watcher_caught_up(Path(sys.argv[1])))", str(root)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert other.stdout.strip() == "None"  # elsewhere: nobody to ask
