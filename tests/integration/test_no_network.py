"""Nothing phones home: the whole loop (init, remember, a session, indexing with the real model,
search, context counted with a real tokenizer, offline compaction and extraction, the task and
the world, the watcher's warm server and the CLI) runs in processes where any network socket to
anything but 127.0.0.1, and any name lookup but localhost's, is refused and logged.

The guard is a ``sitecustomize`` audit hook, so every Python process the loop starts (the CLI
too) has it from its first line. The environment is stripped of the offline switches the test
suite sets for itself (``HF_HUB_OFFLINE``, ``LITELLM_LOCAL_MODEL_COST_MAP``...), so what is
checked is mdmem's own promise, not the suite's settings.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GUARD = textwrap.dedent(
    """
    import os, socket, sys, traceback

    LOG = os.environ["MDMEM_NETWORK_LOG"]
    LOOKUPS = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
               "socket.gethostbyaddr", "socket.getnameinfo"}
    SENDS = {"socket.connect", "socket.sendto", "socket.sendmsg"}
    ALLOWED_NAMES = {None, "127.0.0.1", b"127.0.0.1", "localhost", b"localhost"}

    def refuse(what):
        with open(LOG, "a") as log:
            log.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:120]}): {what}\\n")
            log.write("".join(traceback.format_stack(limit=15)) + "\\n")
        raise PermissionError(f"network refused by the test's guard: {what}")

    def guard(event, args):
        if event in SENDS:
            sock, address = args[0], args[1]
            if address is None or sock.family == socket.AF_UNIX:
                return  # Unix sockets: the warm query server
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or address[0] != "127.0.0.1":
                refuse(f"{event} {address!r}")
        elif event in LOOKUPS:
            host = args[0][0] if event == "socket.getnameinfo" else args[0]
            if host not in ALLOWED_NAMES:
                refuse(f"{event} {host!r}")

    sys.addaudithook(guard)
    GUARDED = True
    """
)

LOOP = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from pathlib import Path

    import sitecustomize
    assert sitecustomize.GUARDED  # this process runs under the guard

    from mdmem import Workspace

    root = Path(sys.argv[1])
    mdmem = str(Path(sys.executable).parent / "mdmem")
    out = {}

    def cli(*args):
        run = subprocess.run([mdmem, "-w", str(root), *args], capture_output=True, text=True)
        assert run.returncode == 0, (args, run.stderr)
        return run

    ws = Workspace.init(root, mode="full", agent="coder")  # the default model
    ws.remember("User prefers short answers without preamble", type="preference")
    ws.remember("Deploys go to Fly.io staging from main", type="fact", importance=0.8)
    ws.task.new("Ship the invoice API", ["write tests", "deploy to staging"])
    ws.world.set("db", "PostgreSQL 16 on port 5433", section="Services")
    with ws.session("ship the invoice api") as s:
        s.request("Please ship the invoice API to staging")
        s.event("planning", "run the tests, then deploy")
        s.tool("shell", {"cmd": "pytest -q"}, "FAILED test_api.py - KeyError: 'token'")
        s.event("execute", "Fixed app/auth.py: read the token from the header")
        s.tool("shell", {"cmd": "pytest -q"}, "12 passed in 0.8s")
        s.response("Deployed; I always run the tests before a deploy.")
        ws.task.complete(1)
    report = ws.index.update()  # the real model: torch, sentence-transformers, the packaged weights
    out["embedded"] = report.embedded
    out["model"] = ws.index.status().model
    hits = ws.search("where do we deploy", k=3)
    out["top_hit"] = hits[0].text
    out["fresh"] = hits.fresh
    ctx = ws.build_context("deploy", budget_tokens=800, model="gpt-4o")  # litellm's tokenizer
    out["context_tokens"] = ctx.tokens
    out["extracted"] = len(ws.extract(s.id, offline=True).changes)
    out["compacted_into"] = ws.compact(s.id, offline=True).path
    ws.set_mode("minimal")
    with ws.session("a quick chat") as chat:
        chat.request("Which port does the database use?")
        chat.response("5433")
    out["minimal_compacted_into"] = ws.compact(chat.record(), offline=True).path
    ws.set_mode("full")
    cli("remember", "Staging runs on two machines", "--type", "fact")
    with ws.watch(serve=True) as watcher:  # a Unix socket, and the CLI asking it
        watcher.wait_idle(timeout=120)
        served = cli("search", "staging machines", "-k", "2", "-v")
        out["served"] = "answered by the warm server" in served.stderr
        out["served_hit"] = "Staging runs on two machines" in served.stdout
        out["cli_context"] = "Deploys go to Fly.io" in cli("context", "--budget-tokens", "400").stdout
        out["status"] = "running" in cli("status").stdout
    print(json.dumps(out))
    """
)

CHECK_THE_GUARD = textwrap.dedent(
    """
    import json, socket, sys, tempfile, os
    tried = {}
    for name, attempt in {
        "tcp to a public address": lambda: socket.create_connection(("10.255.255.1", 80), 2),
        "name lookup": lambda: socket.getaddrinfo("pypi.org", 443),
        "udp to a public address": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            .sendto(b"x", ("8.8.8.8", 53)),
    }.items():
        try:
            attempt()
            tried[name] = "allowed"
        except PermissionError as exc:
            tried[name] = "refused" if "refused by the test's guard" in str(exc) else repr(exc)
        except OSError as exc:
            tried[name] = repr(exc)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    socket.create_connection(server.getsockname(), 2).close()  # 127.0.0.1: allowed
    tried["loopback"] = "allowed"
    path = os.path.join(tempfile.mkdtemp(), "s.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(path)
    unix.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)  # Unix sockets: allowed
    tried["unix"] = "allowed"
    print(json.dumps(tried))
    """
)

OFFLINE_SWITCHES = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "MDMEM_WORKSPACE",
)


def _guarded_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network.log"
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_SWITCHES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(guard_dir), env.get("PYTHONPATH")]))
    env["MDMEM_NETWORK_LOG"] = str(log)
    env["HOME"] = str(tmp_path / "home")  # no caches or settings of this machine's user
    return env, log


def test_the_guard_refuses_the_network_and_allows_local_sockets(tmp_path: Path) -> None:
    env, log = _guarded_env(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", CHECK_THE_GUARD], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "tcp to a public address": "refused",
        "name lookup": "refused",
        "udp to a public address": "refused",
        "loopback": "allowed",
        "unix": "allowed",
    }
    attempts = log.read_text()
    assert "10.255.255.1" in attempts and "pypi.org" in attempts and "8.8.8.8" in attempts
    assert socket.AF_UNIX  # (the test process itself is not guarded)


def test_nothing_phones_home(tmp_path: Path) -> None:
    env, log = _guarded_env(tmp_path)
    (tmp_path / "home").mkdir()
    run = subprocess.run(
        [sys.executable, "-c", LOOP, str(tmp_path / "ws")],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    attempts = log.read_text() if log.exists() else ""
    assert attempts == "", f"network attempts:\n{attempts}"
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["model"] == "sentence-transformers/all-MiniLM-L6-v2" and out["embedded"] > 0
    assert out["fresh"] and "Fly.io" in out["top_hit"]
    assert 0 < out["context_tokens"] <= 800
    assert out["compacted_into"].startswith(".sessions/")
    assert out["minimal_compacted_into"] == ".compact_memory.md"
    assert out["extracted"] > 0
    assert out["served"] and out["served_hit"] and out["cli_context"] and out["status"]
