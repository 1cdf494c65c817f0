"""Nothing outside the workspace is read or written for an MCP client (DESIGN invariant 7).

Over a real MCP session (the SDK's client; stdio and --http with a token as a server process,
in process for the generated cases): every argument that names a file, a source, a glob or a
pool goes through the one resolver of mdmem/paths.py. A test lists the server's tools and
resource templates and fails for a path-like argument that does not say so in its schema
(``x-mdmem-path``); a property test sends generated hostile and benign names to each one
that does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.from_thread
import httpx2
import pytest
from hostile_paths import benign_names, hostile_names
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from mdmem import Workspace
from mdmem.integrations.mcp_remote import build_remote_server
from mdmem.integrations.mcp_server import NOT_A_PATH_KEY, PATH_KEY, build_server

BIN = Path(sys.executable).with_name("mdmem")
ENV = {"MDMEM_SERVER_AUTO": "0", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
CANARY = "CANARY-OUTSIDE-7781"
NO_MODEL = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
REFUSAL = re.compile(
    r"is refused: |must be a path inside the workspace|leads outside the workspace|"
    r"never reads or indexes|invalid pool name|is empty; give a path"
)
"""The resolver's words (and check_name's, for a pool): what a refused name is answered."""
PATH_LIKE = re.compile(r"path|file|folder|dir\b|source|transcript|glob|pool|\.md\b|/", re.I)
"""A string argument whose name or description says this names a file system thing."""


def _env() -> dict[str, str]:
    env = {**os.environ, **ENV}
    env.pop("MDMEM_WORKSPACE", None)
    return env


def _workspace(tmp_path: Path) -> tuple[Workspace, Path]:
    """A workspace without a model, and a folder beside it holding private files that a
    client must never reach (one of them also through a symlink inside the workspace)."""
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text(NO_MODEL)
    outside = tmp_path / "outside"
    outside.mkdir()
    turn = {"role": "user", "content": f"Remember that the vault code is {CANARY} always"}
    (outside / "private_chat.jsonl").write_text(json.dumps(turn) + "\n")
    (outside / "private_session.md").write_text(f"# s\n\nuser: The vault code is {CANARY}\n")
    (ws.root / "out").symlink_to(outside, target_is_directory=True)
    return Workspace.open(ws.root), outside


def _workspace_text(root: Path) -> str:
    """Everything under the workspace, the state folder too (not through the symlink out)."""
    chunks = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink():
                chunks.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(chunks)


# ---- the reproduction, through real server processes -------------------------------


def _escape_attempts(outside: Path) -> list[tuple[str, dict[str, Any], str]]:
    return [
        ("extract", {"source": str(outside / "private_chat.jsonl"), "offline": True}, "source"),
        ("extract", {"source": "../outside/private_session.md", "offline": True}, "source"),
        ("compact", {"source": str(outside / "private_session.md"), "offline": True}, "source"),
        ("extract", {"source": "/etc/passwd", "offline": True}, "source"),
        ("extract", {"source": "out/private_session.md", "offline": True}, "source"),
        ("read", {"path": "out/private_session.md"}, "path"),
        ("remember", {"text": "x", "file": "../outside/new.md"}, "file"),
    ]


async def _no_escape(client: Client, outside: Path, root: Path) -> None:
    for tool, arguments, argument in _escape_attempts(outside):
        result = await client.call_tool(tool, arguments)
        text = result.content[0].text
        assert result.is_error, (tool, arguments, text)
        assert f"{argument} " in text and REFUSAL.search(text), text
        assert "invalid JSON" not in text  # /etc/passwd was never opened
    found = await client.call_tool("search", {"query": "vault code", "mode": "keyword"})
    assert found.structured_content["hits"] == []
    resource = await client.read_resource("mdmem://memory.md")
    assert CANARY not in resource.contents[0].text
    for uri in ("mdmem://out/private_session.md", "mdmem://..%2Foutside%2Fprivate_session.md"):
        with pytest.raises(Exception) as caught:  # (the SDK itself refuses the second)
            await client.read_resource(uri)
        assert CANARY not in str(caught.value)
    assert CANARY not in _workspace_text(root)
    assert sorted(p.name for p in outside.iterdir()) == [
        "private_chat.jsonl",
        "private_session.md",
    ]


@pytest.mark.slow
def test_stdio_client_cannot_read_outside_the_workspace(tmp_path: Path) -> None:
    ws, outside = _workspace(tmp_path)
    params = StdioServerParameters(
        command=str(BIN), args=["-w", str(ws.root), "mcp"], env=_env(), cwd=str(outside)
    )  # started in the outside folder: a relative name must not be read from there either

    async def main() -> None:
        async with Client(params) as client:
            await _no_escape(client, outside, ws.root)
            plain = await client.call_tool("extract", {"source": "private_chat.jsonl"})
            assert plain.is_error and CANARY not in plain.content[0].text

    anyio.run(main)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve_http(root: Path, port: int, *extra: str, token: str = "t0ken") -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [str(BIN), "-w", str(root), "mcp", "--http", "--port", str(port), *extra],
        env={**_env(), "MDMEM_MCP_TOKEN": token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"server exited: {process.stderr.read() if process.stderr else ''}"
            )
        with socket.socket() as probe:
            host = next((extra[i + 1] for i, a in enumerate(extra) if a == "--host"), "127.0.0.1")
            if probe.connect_ex((host, port)) == 0:
                return process
        time.sleep(0.05)
    process.kill()
    raise AssertionError("server did not listen in time")


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_http_client_with_the_token_cannot_read_outside_the_workspace(tmp_path: Path) -> None:
    ws, outside = _workspace(tmp_path)
    port = _free_port()
    process = _serve_http(ws.root, port)
    try:

        async def main() -> None:
            headers = {"Authorization": "Bearer t0ken"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=120) as http,
                Client(
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                ) as client,
            ):
                await _no_escape(client, outside, ws.root)

        anyio.run(main)
    finally:
        _stop(process)


def test_a_transcript_inside_the_workspace_and_a_session_id_still_work(tmp_path: Path) -> None:
    ws, _ = _workspace(tmp_path)
    (ws.root / "chats").mkdir()
    turn = {"role": "user", "content": "I always deploy staging with make ship-staging"}
    (ws.root / "chats" / "today.jsonl").write_text(json.dumps(turn) + "\n")
    with ws.session("invoices") as session:
        session.request("Invoices are numbered per year, starting at 1")

    async def main() -> None:
        async with Client(build_server(ws, warm_up=False)) as client:
            inside = await client.call_tool(
                "extract", {"source": "chats/today.jsonl", "offline": True, "dry_run": True}
            )
            assert not inside.is_error, inside.content
            by_id = await client.call_tool(
                "extract", {"source": session.id, "offline": True, "dry_run": True}
            )
            assert not by_id.is_error, by_id.content
            assert by_id.structured_content["source"] == session.id

    anyio.run(main)


# ---- every path-like argument is declared, and every declared one is resolved ---------------


def _string_typed(schema: dict[str, Any]) -> bool:
    kinds = [schema.get("type")] + [option.get("type") for option in schema.get("anyOf", [])]
    return "string" in kinds


def undeclared(tools: list[Any]) -> list[str]:
    """``tool.argument`` for each string argument that looks like a path but says neither how
    it is resolved nor why it is no path."""
    missing = []
    for tool in tools:
        for name, schema in tool.input_schema.get("properties", {}).items():
            said = f"{name} {schema.get('description', '')}"
            if not (_string_typed(schema) and PATH_LIKE.search(said)):
                continue
            if PATH_KEY not in schema and NOT_A_PATH_KEY not in schema:
                missing.append(f"{tool.name}.{name}")
    return missing


def exempt(tools: list[Any]) -> set[str]:
    return {
        f"{tool.name}.{name}"
        for tool in tools
        for name, schema in tool.input_schema.get("properties", {}).items()
        if NOT_A_PATH_KEY in schema
    }


def declared(tools: list[Any]) -> list[tuple[str, str, str]]:
    """(tool, argument, kind) for each argument whose schema says it is resolved."""
    return [
        (tool.name, name, schema[PATH_KEY])
        for tool in tools
        for name, schema in tool.input_schema.get("properties", {}).items()
        if PATH_KEY in schema
    ]


async def _listed(server: MCPServer) -> tuple[list[Any], list[Any]]:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        templates = (await client.list_resource_templates()).resource_templates
    return tools, templates


EXPECTED_DECLARED = {
    ("search", "path", "glob"),
    ("read", "path", "file"),
    ("remember", "file", "file"),
    ("compact", "source", "source"),
    ("extract", "source", "source"),
    ("pool_read", "pool", "name"),
    ("pool_write", "pool", "name"),
}


def test_every_path_like_argument_goes_through_the_resolver(tmp_path: Path) -> None:
    ws, _ = _workspace(tmp_path)
    tools, templates = anyio.run(_listed, build_server(ws, warm_up=False))
    assert undeclared(tools) == []
    assert set(declared(tools)) == EXPECTED_DECLARED  # (the property test below covers each)
    assert exempt(tools) == {"pool_read.key", "pool_write.key"}  # keys inside a pool file
    for template in templates:  # every variable of a resource URI template is declared
        variables = set(re.findall(r"\{\+?(\w+)\}", template.uri_template))
        assert variables and variables == set((template.meta or {}).get(PATH_KEY, {}))
    remote_tools, _ = anyio.run(_listed, build_remote_server(None))  # (listing reads no index)
    assert undeclared(remote_tools) == []
    assert declared(remote_tools) == [("search", "path", "glob")]


def test_the_enumeration_catches_an_undeclared_path_argument() -> None:
    """The check above can fail: a tool that takes a file name without declaring it."""
    server = MCPServer("probe")

    def leak(
        transcript: str,
        note: Annotated[str, Field(description="Saved to this .md file")] = "",
        size: int = 1,
        query: str = "",
    ) -> str:
        """A tool that forgot the resolver."""
        return transcript + note

    server.add_tool(leak)
    tools, _ = anyio.run(_listed, server)
    assert undeclared(tools) == ["leak.transcript", "leak.note"]


# ---- generated names, hostile and benign, against every declared argument ------------------


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Client, Path]]:
    """One MCP client session (the SDK's, in process) for all generated calls of a test."""
    ws, outside = _workspace(tmp_path_factory.mktemp("paths"))
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_server(ws, warm_up=False))) as client,
    ):
        yield portal, client, ws.root
    assert CANARY not in _workspace_text(ws.root)
    assert sorted(p.name for p in outside.iterdir()) == [
        "private_chat.jsonl",
        "private_session.md",
    ]


def _call(session: tuple[Any, Client, Path], tool: str, argument: str, value: str) -> str:
    """Call ``tool`` with ``argument=value`` (and harmless values for its other required
    arguments, read from its schema); the text answered, "ERROR: " first on an error."""
    portal, client, _ = session
    tools = {t.name: t for t in portal.call(client.list_tools).tools}
    schema = tools[tool].input_schema
    arguments: dict[str, Any] = {
        name: {"integer": 1, "number": 0.5}.get(schema["properties"][name].get("type"), "x")
        for name in schema.get("required", [])
    }
    if "offline" in schema["properties"]:
        arguments.update(offline=True, dry_run=True)
    if tool == "search":
        arguments["mode"] = "keyword"
    arguments[argument] = value
    result = portal.call(client.call_tool, tool, arguments)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    assert CANARY not in text, (tool, value)
    return f"ERROR: {text}" if result.is_error else text


@pytest.mark.parametrize(("tool", "argument", "kind"), sorted(EXPECTED_DECLARED))
@given(data=st.data())
def test_hostile_names_are_refused_naming_the_argument(
    session: Any, tool: str, argument: str, kind: str, data: st.DataObject
) -> None:
    name = data.draw(hostile_names(links=() if kind == "glob" else ("link",)))
    answer = _call(session, tool, argument, name)
    assert answer.startswith("ERROR: "), (tool, name, answer)
    assert REFUSAL.search(answer), (tool, name, answer)
    assert f"{argument} " in answer, answer
    assert len(answer.splitlines()) == 1, answer


@pytest.mark.parametrize(("tool", "argument", "kind"), sorted(EXPECTED_DECLARED))
@given(data=st.data())
def test_benign_names_are_not_refused(
    session: Any, tool: str, argument: str, kind: str, data: st.DataObject
) -> None:
    if kind == "name":
        name = data.draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True))
    else:
        suffix = ".md" if kind == "file" else data.draw(st.sampled_from(["", ".md", ".jsonl"]))
        name = data.draw(benign_names(suffix=suffix, glob=kind == "glob"))
    answer = _call(session, tool, argument, name)
    assert not (answer.startswith("ERROR: ") and REFUSAL.search(answer)), (tool, name, answer)


@pytest.fixture(scope="module")
def remote_session() -> Iterator[tuple[Any, Client]]:
    """The search-only server of a machine without the files, over no index at all: a
    hostile glob must be refused before the index is asked anything."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_remote_server(None))) as client,
    ):
        yield portal, client


@given(name=hostile_names(links=()))
def test_the_remote_search_refuses_hostile_globs(remote_session: Any, name: str) -> None:
    portal, client = remote_session
    result = portal.call(client.call_tool, "search", {"query": "x", "path": name})
    text = result.content[0].text
    assert result.is_error and REFUSAL.search(text) and "path " in text, (name, text)


@given(name=hostile_names())
def test_resources_refuse_hostile_paths(session: Any, name: str) -> None:
    portal, client, _ = session
    import urllib.parse

    with pytest.raises(Exception) as caught:
        portal.call(
            client.read_resource,
            f"mdmem://{urllib.parse.quote(name, safe='/', errors='surrogateescape')}",
        )
    assert CANARY not in str(caught.value)


# ---- a client that reaches the machine by another name (loopback addresses only) -----------


def _post(port: int, host_header: str) -> httpx2.Response:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer t0ken",
        "Host": host_header,
    }
    return httpx2.post(f"http://127.0.0.1:{port}/mcp", json=hello, headers=headers, timeout=60)


@pytest.mark.slow
def test_allow_host_takes_host_and_port_and_the_421_says_what_to_pass(tmp_path: Path) -> None:
    """127.0.0.2 plays the machine's address as a remote client types it in the URL (the
    request goes to 127.0.0.1 with that Host header: no traffic leaves loopback)."""
    ws, _ = _workspace(tmp_path)
    port = _free_port()
    other = f"127.0.0.2:{port}"
    process = _serve_http(ws.root, port)
    try:
        refused = _post(port, other)
        assert refused.status_code == 421
        assert f"--allow-host {other}" in refused.text, refused.text
        assert _post(port, f"127.0.0.1:{port}").status_code != 421  # (400: no session yet)
    finally:
        _stop(process)
    for exact in (True, False):  # HOST:PORT exactly, or HOST at any port
        port = _free_port()
        allow = f"127.0.0.2:{port}" if exact else "127.0.0.2"
        process = _serve_http(ws.root, port, "--allow-host", allow)
        try:
            assert _post(port, f"127.0.0.2:{port}").status_code != 421, allow

            async def session(port: int = port) -> list[str]:
                headers = {"Authorization": "Bearer t0ken", "Host": f"127.0.0.2:{port}"}
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=120) as http,
                    Client(
                        streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                    ) as client,
                ):
                    return [tool.name for tool in (await client.list_tools()).tools]

            assert "search" in anyio.run(session)
            if exact:  # that port only
                assert _post(port, "127.0.0.2:1").status_code == 421
        finally:
            _stop(process)


def test_a_malformed_allow_host_is_one_line() -> None:
    result = subprocess.run(
        [str(BIN), "mcp", "--http", "--allow-host", "box:port"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "mdmem: error: --allow-host 'box:port': expected HOST, HOST:PORT or [IPv6]:PORT"
    )


def test_a_folder_that_is_no_workspace_is_not_served(tmp_path: Path) -> None:
    plain = tmp_path / "notes"
    (plain / "sub").mkdir(parents=True)
    (plain / "sub" / "private.md").write_text("# private\n")
    for args, env in (
        (["-w", str(plain), "mcp"], _env()),
        (["mcp"], {**_env(), "MDMEM_WORKSPACE": str(plain)}),
        (["-w", str(plain), "mcp", "--http"], _env()),
    ):
        result = subprocess.run(
            [str(BIN), *args], env=env, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        [line] = result.stderr.splitlines()
        assert (
            line.startswith(f"mdmem: error: {plain} is no mdmem workspace") and "mdmem init" in line
        )
        assert sorted(p.name for p in plain.iterdir()) == ["sub"]  # no memory.md, no .mdmem/


def test_the_local_cli_user_still_extracts_and_compacts_any_file(tmp_path: Path) -> None:
    """The resolver is for clients: the person at the terminal already has the file."""
    ws, outside = _workspace(tmp_path)
    for args in (
        ["extract", str(outside / "private_chat.jsonl"), "--offline", "--dry-run"],
        ["compact", str(outside / "private_session.md"), "--offline", "--dry-run"],
    ):
        result = subprocess.run(
            [str(BIN), "-w", str(ws.root), *args], env=_env(), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "refused" not in result.stderr
