"""A search that starts after a file's write has completed sees that write, with a live watcher
and its server running (issue 31 §6): a change whose event the watcher has not handled yet
never lets the old text through. Real processes: a detached `mdmem watch --idle-exit` started
the way the first `mdmem search` starts it, edits in place and by rename, searches through
the client function `mdmem search` uses and through the real CLI."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.layout import running_watcher
from mdmem.live.client import ask
from mdmem.live.watch import watcher_caught_up

BIN = Path(sys.executable).parent / "mdmem"
CONFIG = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
MEMORY = "# Memory\n\n## Facts\n- The deploy target cluster is in {city}\n- Backups run nightly\n"
PAIRS = 200


def wait_until(check: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    """A workspace whose automatic server runs (started by a first search), stopped after."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text(CONFIG)
    (root / "memory.md").write_text(MEMORY.format(city="city0"))
    first = ask(root, "deploy target cluster", {"mode": "keyword"}, auto=True)
    assert first.reply is not None, first.note
    pid = first.reply["pid"]
    try:
        wait_until(lambda: watcher_caught_up(root) is not None, "the watcher never gave its word")
        yield root
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: running_watcher(root) is None, "the server never stopped", 30)


def in_place(path: Path, text: str) -> None:
    with path.open("r+") as f:  # truncate and rewrite the same inode, as `cat >` does
        f.truncate()
        f.write(text)


def by_rename(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.swp")  # a temp file renamed over it, as `sed -i` does
    tmp.write_text(text)
    os.replace(tmp, path)


def cities(reply: dict[str, object]) -> list[str]:
    hits = reply["hits"]
    assert isinstance(hits, list)
    return [w for hit in hits for w in hit["text"].split() if w.startswith("city")]


def search(root: Path, query: str) -> list[dict[str, str]]:
    answer = ask(root, query, {"mode": "keyword", "k": 50}, auto=False)
    assert answer.reply is not None, answer.note  # the server answered, not in-process
    return answer.reply["hits"]


def test_a_search_right_after_an_edit_sees_it_through_the_server(served: Path) -> None:
    """200 edits of every kind, each followed at once by a search through the server: the
    fact at the heart of the report edited in place and by rename, and folders made, renamed
    and files deleted (which also moves the barrier's own watches). 0 stale answers."""
    rng = random.Random(31)
    memory = served / "memory.md"
    folders: list[str] = []  # each holds n.md, with the token of the folder's number
    stale = []
    for i in range(1, PAIRS + 1):
        kind = rng.choice(["in place", "rename", "in place", "rename", "folder", "move", "rm"])
        if kind in ("in place", "rename") or not folders:
            (in_place if kind == "in place" else by_rename)(memory, MEMORY.format(city=f"city{i}"))
            seen = cities({"hits": search(served, "deploy target cluster")})
            expected: object = [f"city{i}"]
        elif kind == "folder":
            (served / f"d{i}").mkdir()
            (served / f"d{i}" / "n.md").write_text(f"# N\n\n- token{i} is here\n")
            folders.append(f"d{i}")
            seen = [h["path"] for h in search(served, f"token{i}")]
            expected = [f"d{i}/n.md"]
        else:
            folder = folders.pop(rng.randrange(len(folders)))
            token = "token" + folder[1:]
            if kind == "move":
                os.rename(served / folder, served / f"e{folder[1:]}")
                seen = [h["path"] for h in search(served, token)]
                expected = [f"e{folder[1:]}/n.md"]
            else:
                (served / folder / "n.md").unlink()
                seen = [h["path"] for h in search(served, token)]
                expected = []
        if seen != expected:
            stale.append((i, kind, seen, expected))
    assert stale == []


def test_a_search_in_another_process_sees_an_edit_the_watcher_has_not_heard_of(
    served: Path,
) -> None:
    """The library in another process, with the server's watcher frozen: it is asked for its
    word and gives none, so the search checks the files itself."""
    memory = served / "memory.md"
    pid = running_watcher(served)
    assert pid
    with Workspace.open(served) as ws:
        assert [h.text for h in ws.search("deploy target cluster", mode="keyword")]
        os.kill(pid, signal.SIGSTOP)
        try:
            by_rename(memory, MEMORY.format(city="Dublin"))
            hits = ws.search("deploy target cluster", mode="keyword")
            assert hits and "Dublin" in hits[0].text
        finally:
            os.kill(pid, signal.SIGCONT)
        for i in range(20):  # and alive, racing its own event delivery
            (in_place if i % 2 else by_rename)(memory, MEMORY.format(city=f"town{i}"))
            hits = ws.search("deploy target cluster", mode="keyword")
            assert hits and f"town{i}" in hits[0].text


@pytest.mark.slow
def test_sed_then_mdmem_search_never_returns_the_old_text(served: Path) -> None:
    """The reported run, with the real CLI: `sed -i` then at once `mdmem search --json`."""
    env = {**os.environ, "MDMEM_SERVER_AUTO": "1"}
    env.pop("MDMEM_WORKSPACE", None)
    memory = served / "memory.md"
    before = "city0"
    for i in range(1, 13):
        after = f"city{i}"
        subprocess.run(["sed", "-i", f"s/{before}/{after}/", str(memory)], check=True)
        done = subprocess.run(
            [str(BIN), "-w", str(served), "search", "deploy target cluster", "--json", "-v"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        assert "answered by the warm server" in done.stderr
        assert cities(json.loads(done.stdout)) == [after], i
        before = after
