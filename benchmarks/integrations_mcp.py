"""What an agent pays to reach mdmem through MCP and through Claude's memory tool.

    .venv/bin/python benchmarks/integrations_mcp.py [--searches 60] [--commands 100]

A copy of example_workspace/ plus ``--memories`` synthetic entries (in .bench/integrations_mcp/)
is indexed with the default model, then:

  search         ``ws.search(query, k=5)`` in-process (hybrid, warm model; in the main thread
                 and in a worker thread, as the server runs it), next to the same
                 search as an MCP ``tools/call`` through the SDK's client to a real ``mdmem mcp``
                 process over stdio: once answered in that process, once through the warm query
                 server of a running ``mdmem watch``. The first MCP search (model load) and the
                 start-up until ``initialize`` is answered are shown apart.
  memory tool    each command of Claude's memory tool (``MdmemMemoryTool.call``) on a workspace
                 folder, next to the SDK's reference backend (``BetaLocalFilesystemMemoryTool``)
                 on plain files: our writes go through the safe writes (lock, compare-and-swap,
                 journal, fsync).

Medians and p95 of one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.table import Table

from mdmem import Workspace

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / ".bench" / "integrations_mcp"
BIN = Path(sys.executable).with_name("mdmem")
QUERIES = [
    "which port does the test database use",
    "how are invoices numbered",
    "what does the user prefer for http clients",
    "where do deploys go",
    "why did the migration fail",
    "how do I run the integration tests",
    "what is the current task",
    "which python version",
]


def ms(values: list[float]) -> tuple[str, str]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.1f}", f"{p95 * 1000:.1f}"


def build(root: Path, memories: int) -> Workspace:
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "example_workspace", root)
    lines = [
        f"- Synthetic fact {n}: service {n % 37} talks to queue {n % 11}" for n in range(memories)
    ]
    with open(root / "notes.md", "w") as handle:
        handle.write("# Notes\n\n" + "\n".join(lines) + "\n")
    ws = Workspace.open(root)
    ws.index.update()
    return ws


def in_process(ws: Workspace, n: int, worker: bool = False) -> list[float]:
    """``ws.search`` timed in this thread, or in a worker thread (where the MCP server's tools
    and ``ws.asearch`` run it: torch's thread pool behaves differently there)."""
    ws.search(QUERIES[0], k=5)  # model loaded, vectors in memory
    times: list[float] = []

    def run() -> None:
        for i in range(n):
            started = time.perf_counter()
            ws.search(QUERIES[i % len(QUERIES)], k=5)
            times.append(time.perf_counter() - started)

    if worker:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    else:
        run()
    return times


def over_stdio(root: Path, n: int) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=str(BIN), args=["-w", str(root), "mcp"], env=env)

    async def main() -> dict[str, Any]:
        started = time.perf_counter()
        async with Client(params, mode="legacy", cache=None) as client:
            ready = time.perf_counter() - started
            await client.list_tools()
            started = time.perf_counter()
            first = await client.call_tool("search", {"query": QUERIES[0], "k": 5})
            cold = time.perf_counter() - started
            times = []
            for i in range(n):
                started = time.perf_counter()
                result = await client.call_tool("search", {"query": QUERIES[i % len(QUERIES)]})
                times.append(time.perf_counter() - started)
                assert not result.is_error, result.content
            answered = first.structured_content["answered_by"]
            return {"ready": ready, "cold": cold, "times": times, "by": answered}

    return anyio.run(main)


def with_watcher(root: Path, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    watcher = subprocess.Popen(
        [str(BIN), "-w", str(root), "watch"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while b"answering searches" not in (watcher.stderr.readline() if watcher.stderr else b""):
            if time.monotonic() > deadline or watcher.poll() is not None:
                raise RuntimeError("mdmem watch did not start")
        time.sleep(3)  # its model warm-up
        return run()
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=30)


def memory_tool_commands(tool: Any, n: int) -> dict[str, list[float]]:
    """Each command ``n`` times on files of its own, as Claude would send them."""
    times: dict[str, list[float]] = {}

    def timed(name: str, command: dict[str, Any]) -> None:
        started = time.perf_counter()
        tool.call(command)
        times.setdefault(name, []).append(time.perf_counter() - started)

    text = "".join(f"- line {k}: the user prefers short answers\n" for k in range(40))
    for i in range(n):
        path = f"/memories/bench/note{i}.md"
        timed("create", {"command": "create", "path": path, "file_text": text})
        timed("view file", {"command": "view", "path": path})
        timed(
            "str_replace",
            {"command": "str_replace", "path": path, "old_str": "line 7:", "new_str": "line 7b:"},
        )
        timed("insert", {"command": "insert", "path": path, "insert_line": 3, "insert_text": "- x"})
        timed("rename", {"command": "rename", "old_path": path, "new_path": path + ".md"})
        timed("delete", {"command": "delete", "path": path + ".md"})
        if i % 10 == 0:
            timed("view folder", {"command": "view", "path": "/memories"})
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searches", type=int, default=60)
    parser.add_argument("--commands", type=int, default=100)
    parser.add_argument("--memories", type=int, default=1000)
    args = parser.parse_args()
    console = Console(width=120)

    root = OUT / "workspace"
    ws = build(root, args.memories)
    local = in_process(ws, args.searches)
    worker = in_process(ws, args.searches, worker=True)
    ws.close()
    stdio = over_stdio(root, args.searches)
    warm = with_watcher(root, lambda: over_stdio(root, args.searches))

    table = Table(title=f"search, k=5, hybrid: {args.searches} queries each (ms)")
    for column in ("path", "answered by", "p50", "p95", "first search", "until initialize"):
        table.add_column(column, justify="right" if column != "path" else "left")
    table.add_row("ws.search(), main thread", "-", *ms(local), "-", "-")
    table.add_row("ws.search(), worker thread", "-", *ms(worker), "-", "-")
    for label, run in (("MCP tools/call over stdio", stdio), ("  … with mdmem watch", warm)):
        cold, ready = f"{run['cold'] * 1000:.0f}", f"{run['ready'] * 1000:.0f}"
        table.add_row(label, run["by"], *ms(run["times"]), cold, ready)
    console.print(table)

    from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

    from mdmem.integrations.memory_tool import MdmemMemoryTool

    ours = memory_tool_commands(MdmemMemoryTool(Workspace.open(root)), args.commands)
    reference_root = OUT / "reference"
    shutil.rmtree(reference_root, ignore_errors=True)
    backend = BetaLocalFilesystemMemoryTool(str(reference_root))
    reference = memory_tool_commands(backend, args.commands)
    table = Table(title=f"memory tool: {args.commands} of each command (ms)")
    for column in ("command", "mdmem p50", "mdmem p95", "reference p50", "reference p95"):
        table.add_column(column, justify="right" if column != "command" else "left")
    for name, values in ours.items():
        table.add_row(name, *ms(values), *ms(reference[name]))
    console.print(table)


if __name__ == "__main__":
    main()
