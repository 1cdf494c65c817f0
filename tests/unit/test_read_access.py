"""Reads count as accesses (issue 12 §2: "a search result returned, an inclusion by
build_context, a read through any interface"): ``ws.get``, the MCP ``read`` tool and the memory
tool's ``view`` of a line range count each memory read once; a whole file, or a page of many
memories, counts none; a busy or missing index never fails the read."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

import pytest

from mdmem import Workspace
from mdmem.integrations.mcp_server import Tools


def _counts(ws: Workspace, ids: list[str]) -> dict[str, int]:
    return ws.index._backend.access_counts(ids)


def test_get_counts_each_read_once(ws: Workspace) -> None:
    a = ws.remember("The staging database is on port 6543")
    b = ws.remember("Deploys go to Fly.io")
    assert _counts(ws, [a.id, b.id]) == {}
    assert ws.get(a.id).text == a.text
    ws.get(a.id)
    assert _counts(ws, [a.id, b.id]) == {a.id: 2}


def test_mcp_read_of_a_citation_counts_its_memories_not_a_whole_file(ws: Workspace) -> None:
    ids = [ws.remember(f"Fact number {n} about the build").id for n in range(8)]
    entries = {e.id: e for e in ws.entries("memory.md")}
    tools = Tools(ws)
    tools.read("memory.md")  # the whole file: no memory in particular
    assert _counts(ws, ids) == {}
    first = entries[ids[2]]
    tools.read("memory.md", start_line=first.start_line, end_line=first.end_line)
    assert _counts(ws, ids) == {ids[2]: 1}
    last = entries[ids[-1]].end_line
    tools.read("memory.md", start_line=1, end_line=last)  # a page of 8 memories: none
    assert _counts(ws, ids) == {ids[2]: 1}


def test_memory_tool_view_of_a_range_counts(ws: Workspace) -> None:
    pytest.importorskip("anthropic")
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    from mdmem.integrations.memory_tool import MdmemMemoryTool

    a = ws.remember("The office is in Lyon")
    line = ws.get(a.id).start_line  # (this read counts once)
    tool = MdmemMemoryTool(ws)
    tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/memory.md"))
    assert _counts(ws, [a.id]) == {a.id: 1}
    tool.view(
        BetaMemoryTool20250818ViewCommand(
            command="view", path="/memories/memory.md", view_range=[line, line]
        )
    )
    assert _counts(ws, [a.id]) == {a.id: 2}


class _Held:
    """A lock held on another thread until the code under test is done with it (or 60 s have
    passed: then ``gave_up`` says that code waited for the lock to be let go)."""

    def __init__(self, acquire: Callable[[], None], release: Callable[[], None]) -> None:
        self._acquire, self._release = acquire, release
        self._held, self._done = threading.Event(), threading.Event()
        self.gave_up = False
        self._thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        self._acquire()
        self._held.set()
        self.gave_up = not self._done.wait(60)
        self._release()

    def __enter__(self) -> _Held:
        self._thread.start()
        assert self._held.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def test_a_read_never_waits_on_a_locked_index_and_counts_later(ws: Workspace) -> None:
    a = ws.remember("Backups run at 02:00")
    ws.index._backend.sync(embed=False)
    other = sqlite3.connect(ws.files._state_dir / "index.db", timeout=30, check_same_thread=False)
    # another process holds the index for writing, until the read is done
    with _Held(lambda: other.execute("BEGIN IMMEDIATE"), lambda: other.execute("ROLLBACK")) as held:
        assert ws.get(a.id).text == a.text
    other.close()
    assert not held.gave_up  # the read was done while the index was still locked
    assert _counts(ws, [a.id]) == {}
    ws.get(a.id)  # the next read counts both
    assert _counts(ws, [a.id]) == {a.id: 2}
    other = sqlite3.connect(ws.files._state_dir / "index.db", timeout=30)
    other.execute("BEGIN IMMEDIATE")
    ws.get(a.id)  # not counted yet ...
    other.execute("ROLLBACK")
    other.close()
    ws.close()  # ... closing the workspace counts it
    assert Workspace(ws.root).index._backend.access_counts([a.id]) == {a.id: 3}


def test_a_read_while_another_thread_searches_does_not_wait_for_it(ws: Workspace) -> None:
    a = ws.remember("The CI runs on Python 3.12")
    lock = ws.index._backend.searching()  # another thread searches, until the read is done
    with _Held(lock.__enter__, lambda: lock.__exit__(None, None, None)) as held:
        ws.get(a.id)
    assert not held.gave_up  # the read was done while the search still held the index
    ws.get(a.id)
    assert _counts(ws, [a.id]) == {a.id: 2}


def test_a_read_without_a_usable_index_still_answers(ws: Workspace) -> None:
    a = ws.remember("User prefers short answers")
    ws.close()
    for suffix in ("", "-wal", "-shm"):
        (ws.files._state_dir / f"index.db{suffix}").unlink(missing_ok=True)
    (ws.files._state_dir / "index.db").mkdir()  # a folder in its place: no index can be opened
    again = Workspace(ws.root)
    assert again.get(a.id).text == a.text


def test_a_read_counted_while_another_thread_counts_is_not_lost() -> None:
    """Thread A is writing counts when thread B reads: B's read waits and is counted next."""
    from mdmem.index.access_counting import ReadCounts

    writing, read_meanwhile = threading.Event(), threading.Event()
    counted: list[list[str]] = []

    class Index:
        def __init__(self) -> None:
            self.lock = threading.RLock()

        def searching(self) -> threading.RLock:
            return self.lock

        def bump_access(self, keys: list[str], *, wait_s: float | None = None) -> bool:
            writing.set()
            assert read_meanwhile.wait(10)
            counted.append(sorted(keys))
            return True

    reads, index = ReadCounts(), Index()
    reads.add(["m-a"])
    counting = threading.Thread(target=reads.flush, args=(index,))
    counting.start()
    assert writing.wait(10)
    reads.add(["m-b"])  # another thread's read, while the first count is being written
    read_meanwhile.set()
    counting.join()
    assert counted == [["m-a"]]
    assert reads.pending
    reads.flush(index)
    assert counted == [["m-a"], ["m-b"]]
    assert not reads.pending
