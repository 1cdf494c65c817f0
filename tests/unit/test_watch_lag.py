"""Searching while files change under a live watcher: a search never answers from an index
that lags an edit made before it started, and never waits for the watcher's debounce either:
a watcher that has heard of a change it has not indexed gives no word, and the search checks
the files itself (issue 31 §6; before, it answered from the index as it was)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from mdmem import Workspace

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


def test_a_search_indexes_an_edit_the_watcher_has_not_yet_indexed(tmp_path: Path) -> None:
    """A 5 s debounce (at most 1 s: ``max_delay``): the search right after the edit finds it
    (it took the watcher's word back through the kernel's record, whatever the observer had
    delivered by then), where it used to answer from the index as it was."""
    root = workspace(tmp_path, CONFIG + "[watch]\ndebounce_ms = 5000\n")
    with Workspace(root) as ws, ws.watch() as watcher:
        wait_until(lambda: watcher.word() is not None, "the watcher never gave its word")
        (root / "notes" / "zebra.md").write_text("# Town\n\n- The zebra crossing is on Elm St\n")
        assert watcher.word() is None  # heard of, not indexed: no word
        hits = ws.search("zebra crossing", mode="keyword")
        assert hits and "zebra" in hits[0].text and hits.fresh
        assert watcher.wait_idle(timeout=30)
        wait_until(lambda: watcher.word() is not None, "the watcher never gave its word again")
