"""`mdmem mcp`: a real server process driven by the MCP SDK's own client, over stdio and over
streamable HTTP on 127.0.0.1; the raw stdio wire; host and token rules; the warm server;
long work next to short calls."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mdmem import Workspace
from mdmem.integrations.mcp_server import build_server

BIN = Path(sys.executable).with_name("mdmem")
TOOLS = {
    "search",
    "read",
    "context",
    "sessions",
    "remember",
    "update",
    "supersede",
    "session_event",
    "task",
    "world",
    "compact",
    "extract",
    "pool_read",
    "pool_write",
}
ENV = {"MDMEM_SERVER_AUTO": "0", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _env() -> dict[str, str]:
    env = {**os.environ, **ENV}
    env.pop("MDMEM_WORKSPACE", None)
    return env


async def _round_trip(client: Client) -> dict[str, Any]:
    """What every transport must do: list the tools, remember, read back the line the write
    reported, find it by meaning, and use the other tools once."""
    listed = await client.list_tools()
    names = {tool.name for tool in listed.tools}
    assert names == TOOLS
    for tool in listed.tools:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object", tool.name
    search_schema = next(t for t in listed.tools if t.name == "search").input_schema
    assert search_schema["required"] == ["query"]
    assert {"k", "mode", "type", "path", "since", "until"} <= set(search_schema["properties"])

    wrote = await client.call_tool(
        "remember", {"text": "The staging database listens on port 6001", "importance": 0.8}
    )
    assert not wrote.is_error, wrote.content
    entry = wrote.structured_content
    assert entry["path"] == "memory.md" and entry["citation"] == f"memory.md:{entry['start_line']}"
    read = await client.call_tool(
        "read",
        {"path": entry["path"], "start_line": entry["start_line"], "end_line": entry["end_line"]},
    )
    shown = read.content[0].text
    assert shown.splitlines()[0].startswith(entry["citation"])
    assert f"{entry['start_line']:>6}\t- The staging database listens on port 6001" in shown

    found = await client.call_tool("search", {"query": "which port does staging db use", "k": 3})
    assert not found.is_error, found.content
    result = found.structured_content
    assert result["fresh"] is True and result["mode"] == "hybrid"
    assert result["hits"][0]["citation"] == entry["citation"]
    assert result["hits"][0]["id"] == entry["id"]

    escaped = await client.call_tool("read", {"path": "../outside.md"})
    assert escaped.is_error and "inside the workspace" in escaped.content[0].text

    newer = await client.call_tool("supersede", {"id": entry["id"], "by": "Staging DB: port 6002"})
    assert newer.structured_content["superseded"] == entry["id"]
    event = await client.call_tool("session_event", {"action": "planning", "text": "check db"})
    assert event.structured_content["path"].startswith(".sessions/")
    task = await client.call_tool("task", {"action": "add", "text": "migrate the db"})
    assert task.structured_content["items"][-1]["text"] == "migrate the db"
    world = await client.call_tool("world", {"action": "set", "key": "db", "value": "port 6002"})
    assert not world.is_error
    got = await client.call_tool("world", {"action": "get", "key": "db"})
    assert "6002" in json.dumps(got.structured_content)
    shared = await client.call_tool("pool_write", {"key": "db/port", "value": {"port": 6002}})
    assert shared.structured_content["version"] == 1, shared.content
    stale = await client.call_tool(
        "pool_write", {"key": "db/port", "value": {"port": 1}, "expected_version": 0}
    )
    assert stale.is_error and "expected version 0, found version 1" in stale.content[0].text
    pooled = await client.call_tool("pool_read", {"key": "db/port"})
    assert pooled.structured_content["content"] == {"port": 6002}
    recent = await client.call_tool("sessions", {"limit": 3})
    assert recent.structured_content["sessions"][0]["title"] == "MCP session"
    context = await client.call_tool("context", {"query": "staging db", "budget_tokens": 400})
    assert "6002" in context.structured_content["text"]

    resources = await client.list_resources()
    uris = {str(r.uri) for r in resources.resources}
    assert "mdmem://memory.md" in uris and "mdmem://world_state.md" in uris
    memory = await client.read_resource("mdmem://memory.md")
    assert "port 6002" in memory.contents[0].text
    return entry


@pytest.mark.slow
def test_stdio_round_trip_with_the_sdk_client(ws: Workspace, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    # `embedder` made the default model's ONNX export (as building any index does): the search
    # is hybrid at once; without it, one arriving before torch's load is answered by keyword
    params = StdioServerParameters(
        command=str(BIN),
        args=["-w", str(ws.root), "mcp", "--agent", "claude-code"],
        env=_env(),
        cwd=str(tmp_path),  # clients start servers in unrelated folders
    )

    async def main() -> dict[str, Any]:
        async with Client(params) as client:
            return await _round_trip(client)

    entry = anyio.run(main)
    [session] = Workspace.open(ws.root).sessions.list()
    assert session.agent == "claude-code" and session.status == "completed"
    assert entry["text"] in (ws.root / "memory.md").read_text()  # archived, with its pointer


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"server exited: {process.stderr.read() if process.stderr else ''}"
            )
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("server did not listen in time")


@pytest.mark.slow
def test_http_round_trip_on_loopback_with_a_token(ws: Workspace) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [str(BIN), "-w", str(ws.root), "mcp", "--http", "--port", str(port)],
        env={**_env(), "MDMEM_MCP_TOKEN": "s3cret-token"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_for_port(port, process)

        async def main() -> None:
            headers = {"Authorization": "Bearer s3cret-token"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=120) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                await _round_trip(client)

        anyio.run(main)
        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        bare = httpx2.post(url, json=hello, headers=accept)
        assert bare.status_code == 401
        wrong = httpx2.post(url, json=hello, headers={**accept, "Authorization": "Bearer no"})
        assert wrong.status_code == 401
        rebound = httpx2.post(  # DNS rebinding: a page on evil.example resolving to 127.0.0.1
            url,
            json=hello,
            headers={**accept, "Authorization": "Bearer s3cret-token", "Host": "evil.example"},
        )
        assert rebound.status_code == 421
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert process.stdout is not None and process.stdout.read() == ""


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "example.com", "::"])
def test_a_host_off_loopback_needs_a_token(ws: Workspace, host: str) -> None:
    result = subprocess.run(
        [str(BIN), "-w", str(ws.root), "mcp", "--http", "--host", host],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"--host {host} is not a loopback address" in result.stderr
    assert "--token" in result.stderr and "Traceback" not in result.stderr


def test_help_imports_no_sdk() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['mdmem', 'mcp', '--help']\n"
        "from mdmem.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'mcp', 'anthropic', 'uvicorn', 'starlette', 'torch'}\n"
        "print(sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "--http" in result.stdout and "--token" in result.stdout
    assert result.stderr.strip() == "[]"


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _reply(process: subprocess.Popen[bytes], lines: list[bytes], wanted: int) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        assert line, "server closed stdout"
        lines.append(line)
        message = json.loads(line)
        if message.get("id") == wanted:
            return message


def _torch_loaded(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_stdio_wire_is_json_rpc_only_and_initialize_comes_before_torch(
    ws: Workspace,
    embedder,  # type: ignore[no-untyped-def]  # (the ONNX export: the search is hybrid at once)
) -> None:
    ws.remember("Deploys go to Fly.io staging first", type="fact")
    process = subprocess.Popen(
        [str(BIN), "-w", str(ws.root), "mcp"],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[bytes] = []
    try:
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            },
        )
        hello = _reply(process, lines, 1)
        assert hello["result"]["serverInfo"]["name"] == "mdmem"
        assert not _torch_loaded(process.pid)  # answered before the model's import
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert len(_reply(process, lines, 2)["result"]["tools"]) == len(TOOLS)
        call = {"name": "search", "arguments": {"query": "where do deploys go", "k": 1}}
        _send(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        found = _reply(process, lines, 3)["result"]["structuredContent"]
        assert found["hits"][0]["text"] == "Deploys go to Fly.io staging first"
        # the model did load (on torch, or the default model's ONNX export on onnxruntime), and
        # printed nothing to stdout
        maps = Path(f"/proc/{process.pid}/maps").read_text()
        assert "libtorch" in maps or "onnxruntime" in maps
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)
    assert process.stdout is not None
    lines += process.stdout.readlines()
    assert process.returncode == 0
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line


@pytest.mark.slow
def test_searches_go_through_the_warm_server_when_one_runs(ws: Workspace) -> None:
    ws.remember("The invoice numbering must have no gaps", type="fact")
    watcher = subprocess.Popen(
        [str(BIN), "-w", str(ws.root), "watch"],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        server = build_server(Workspace.open(ws.root), warm_up=False)

        async def main() -> dict[str, Any]:
            async with Client(server) as client:
                while True:
                    found = await client.call_tool("search", {"query": "invoice gaps", "k": 1})
                    answer = found.structured_content
                    if answer["answered_by"] != "in-process" or time.monotonic() > deadline:
                        return answer
                    await anyio.sleep(0.2)

        answer = anyio.run(main)
        assert answer["answered_by"] == f"warm server (pid {watcher.pid})"
        assert answer["hits"][0]["text"] == "The invoice numbering must have no gaps"
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=30)


def _blocking_provider(monkeypatch: pytest.MonkeyPatch, gate: threading.Event) -> threading.Event:
    """A litellm provider whose reply waits for ``gate``: an extraction that takes as long as
    the test wants. Returns the event set once the model call has started."""
    from mdmem.tokens import import_litellm

    litellm = import_litellm()
    from litellm.utils import custom_llm_setup

    started = threading.Event()
    reply = '{"memories": [{"type": "fact", "text": "Invoices are numbered per year"}]}'

    class Slow(litellm.CustomLLM):
        def completion(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            started.set()
            assert gate.wait(60)
            return litellm.completion(
                model="gpt-4o-mini", messages=kwargs["messages"], mock_response=reply
            )

    monkeypatch.setattr(
        litellm, "custom_provider_map", [{"provider": "slow", "custom_handler": Slow()}]
    )
    custom_llm_setup()
    return started


def test_long_work_does_not_block_other_calls(
    ws: Workspace, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ws.root / "mdmem.toml"
    config.write_text(config.read_text() + '\n[llm]\nmodel = "slow/model"\n')
    with ws.session("invoices") as session:
        session.request("Invoices are numbered per year, starting at 1")
    gate = threading.Event()
    started = _blocking_provider(monkeypatch, gate)
    server = build_server(Workspace.open(ws.root, embedder=embedder), warm_up=False)

    async def main() -> tuple[Any, Any, bool]:
        async with Client(server) as client:
            extraction: dict[str, Any] = {}

            async def extract() -> None:
                extraction["result"] = await client.call_tool("extract", {})

            async with anyio.create_task_group() as group:
                group.start_soon(extract)
                await anyio.to_thread.run_sync(started.wait, 60)
                with anyio.fail_after(30):
                    found = await client.call_tool(
                        "search", {"query": "invoices", "mode": "keyword"}
                    )
                still_running = not gate.is_set() and "result" not in extraction
                gate.set()
            return found, extraction["result"], still_running

    found, extracted, still_running = anyio.run(main)
    assert still_running  # the search was answered while the extraction waited on its model
    assert not found.is_error and found.structured_content["hits"]
    assert not extracted.is_error, extracted.content
    assert extracted.structured_content["changes"][0]["text"] == "Invoices are numbered per year"


@pytest.mark.slow
def test_stdio_errors_descriptions_and_mime_types_as_a_client_sees_them(tmp_path: Path) -> None:
    """Through the SDK's stdio client against a real server process: a FIFO in the workspace
    is refused at once (opening it waited forever for a writer), the library's message for a
    missing TODO item reaches the client (it got only "Error executing tool task"), tool
    descriptions carry no source indentation, and a resource is read with the MIME type it
    was listed with (listed text/markdown, read text/plain)."""
    import inspect

    root = tmp_path / "ws"
    Workspace.init(root, mode="full", agent="claude")
    (root / "mdmem.toml").write_text(
        'mode = "full"\nagent = "claude"\n[embedding]\nmodel = ""\n'
        '[files]\ninclude = ["**/*.md", "**/*.txt"]\n'
    )
    (root / "notes.txt").write_text("plain notes\n")
    os.mkfifo(root / "pipe.md")
    params = StdioServerParameters(
        command=str(BIN), args=["-w", str(root), "mcp"], env=_env(), cwd=str(tmp_path)
    )

    async def main() -> None:
        async with Client(params) as client:
            with anyio.fail_after(30):
                piped = await client.call_tool("read", {"path": "pipe.md"})
            assert piped.is_error
            assert piped.content[0].text == (  # the SDK's prefix, then our line
                "Error executing tool read: "
                "pipe.md is not a regular file (a FIFO, a socket or a device); not read"
            )
            with anyio.fail_after(30), pytest.raises(Exception, match="not a regular file"):
                await client.read_resource("mdmem://pipe.md")

            await client.call_tool("task", {"action": "add", "text": "the only item"})
            missing = await client.call_tool("task", {"action": "done", "n": 99})
            assert missing.is_error
            assert missing.content[0].text == (
                "Error executing tool task: task_process.md: no TODO item 99 (the list has 1)"
            )

            for tool in (await client.list_tools()).tools:
                text = tool.description or ""
                assert text == inspect.cleandoc(text) and "\n    " not in text, tool.name

            listed = {str(r.uri): r.mime_type for r in (await client.list_resources()).resources}
            assert listed["mdmem://memory.md"] == "text/markdown"
            assert listed["mdmem://notes.txt"] == "text/plain"
            for uri in ("mdmem://memory.md", "mdmem://notes.txt", "mdmem://task_process.md"):
                [contents] = (await client.read_resource(uri)).contents
                assert contents.mime_type == listed[uri], uri

    anyio.run(main)
