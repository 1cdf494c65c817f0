"""Reads count as accesses (issue 12 §2: "a search result returned, an inclusion by
build_context, a read through any interface"): ``ws.get``, the MCP ``read`` tool and the memory
tool's ``view`` of a line range count each memory read once; a whole file, or a page of many
memories, counts none; a busy or missing index never fails the read."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from mdmem import Workspace
from mdmem.integrations.mcp_server import Tools


def _counts(ws: Workspace, ids: list[str]) -> dict[str, int]:
    return ws.index.access_counts(ids)


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


def test_a_read_never_waits_on_a_locked_index_and_counts_later(ws: Workspace) -> None:
    a = ws.remember("Backups run at 02:00")
    ws.index.sync(embed=False)
    other = sqlite3.connect(ws.state_dir / "index.db", timeout=30)
    other.execute("BEGIN IMMEDIATE")  # another process holds the index for writing
    try:
        started = time.perf_counter()
        assert ws.get(a.id).text == a.text
        assert time.perf_counter() - started < 1.0
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _counts(ws, [a.id]) == {}
    ws.get(a.id)  # the next read counts both
    assert _counts(ws, [a.id]) == {a.id: 2}
    other = sqlite3.connect(ws.state_dir / "index.db", timeout=30)
    other.execute("BEGIN IMMEDIATE")
    ws.get(a.id)  # not counted yet ...
    other.execute("ROLLBACK")
    other.close()
    ws.close()  # ... closing the workspace counts it
    assert Workspace(ws.root).index.access_counts([a.id]) == {a.id: 3}


def test_a_read_while_another_thread_searches_does_not_wait_for_it(ws: Workspace) -> None:
    a = ws.remember("The CI runs on Python 3.12")
    lock = ws.index.searching()
    held, release = threading.Event(), threading.Event()

    def search_long() -> None:
        with lock:
            held.set()
            release.wait(5)

    worker = threading.Thread(target=search_long)
    worker.start()
    held.wait(5)
    try:
        started = time.perf_counter()
        ws.get(a.id)
        assert time.perf_counter() - started < 1.0
    finally:
        release.set()
        worker.join()
    ws.get(a.id)
    assert _counts(ws, [a.id]) == {a.id: 2}


def test_a_read_without_a_usable_index_still_answers(ws: Workspace) -> None:
    a = ws.remember("User prefers short answers")
    ws.close()
    for suffix in ("", "-wal", "-shm"):
        (ws.state_dir / f"index.db{suffix}").unlink(missing_ok=True)
    (ws.state_dir / "index.db").mkdir()  # a folder in its place: no index can be opened
    again = Workspace(ws.root)
    assert again.get(a.id).text == a.text


def test_a_read_counted_while_another_thread_counts_is_not_lost() -> None:
    """Thread A is writing counts when thread B reads: B's read waits and is counted next."""
    from mdmem.index.reads import ReadCounts

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
