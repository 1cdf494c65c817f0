"""The client of the warm query server: ask it, start one when none runs, and say so.

``mdmem search`` runs this before anything else of mdmem is imported (no typer, no torch, no
SQLite): asking a warm server costs a socket round trip on top of Python's own start-up. When
no server listens, the first search starts one in the background: ``mdmem watch --idle-exit``,
detached, the same process a person starts by hand, which takes the workspace's watcher lock
(so two never run) and exits after ``server.idle_minutes`` without a search. While it loads the
model the client shows what it waits for; when a server is unhealthy the caller searches
in-process and says so in one line.

The first search of the day does not wait for the server when this process can embed the
query without torch (the default model's ONNX export, or no model): it searches in-process,
answers, and only then starts the server, for the next search (:func:`light_here`).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections import namedtuple
from pathlib import Path

from mdmem.layout import STATE_DIR, WATCHER_FILE, running_watcher, socket_path

TYPE_CHECKING = False  # neither typing nor dataclasses: each costs this path milliseconds
if TYPE_CHECKING:
    import subprocess
    from typing import Any

SEARCH_TIMEOUT_S = 30.0
TIMEOUT_ENV = "MDMEM_SERVER_TIMEOUT"
"""Seconds a search waits for the server's answer before searching in-process (default 30)."""
START_TIMEOUT_S = 120.0
"""How long a first search waits for the server it started (imports and the model load)."""
POLL_S = 0.1
AUTO_ENV = "MDMEM_SERVER_AUTO"
"""``0`` (or false, no, off) turns the automatic server off, whatever ``server.auto`` says."""
SERVER_LOG = "server.log"
"""The automatic server's stderr, in ``.mdmem/`` (the last one's only)."""
_SERVE = "import sys; from mdmem.console import main; sys.argv[0] = 'mdmem'; main()"


class ServerError(Exception):
    """The server answered with an error (bad input, like a search in-process would raise)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


Answer = namedtuple("Answer", "reply note start", defaults=(None, False))
"""What :func:`ask` got: ``reply``, the server's (``ok``, ``pid``, ``hits`` ...), or None to
search in-process; ``note``, why no server answered when one should have (one line), or None;
``start``: no server runs and none was started: search in-process, then :func:`start_server`."""


def request(path: Path, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
    """Send one request; None when no server listens there (the caller works in-process)."""
    if not path.exists():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError:
            return None
        sock.sendall(json.dumps(payload).encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    return json.loads(data) if data else None


def ping_reply(path: Path) -> dict[str, Any] | None:
    """The server's ``ping`` reply (``pid``, ``ready``: the model is loaded), or None."""
    try:
        reply = request(path, {"op": "ping"}, timeout=2.0)
    except (OSError, ValueError):
        return None
    return reply if reply and reply.get("ok") else None


def ping(path: Path) -> bool:
    return ping_reply(path) is not None


def auto_enabled(root: Path) -> bool:
    """Whether a search may start a server: not when ``$MDMEM_SERVER_AUTO`` is 0 (or false,
    no, off), else as ``server.auto`` says."""
    if os.environ.get(AUTO_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    from mdmem.config import load_config

    return load_config(root).server.auto


def ask(
    root: Path,
    query: str,
    params: dict[str, Any],
    *,
    auto: bool | None = None,
    status: Status | None = None,
    answer_first: bool = False,
) -> Answer:
    """Search through the workspace's server, starting one first when ``auto`` allows (None:
    as :func:`auto_enabled` says, asked only when no server answers). ``answer_first``: the
    caller can search in-process; when that needs no torch (:func:`light_here`) nothing is
    started here, and the answer says to start a server once the caller has answered.

    Raises :class:`ServerError` when the server answered with an error."""
    sock = socket_path(root)
    payload = {"op": "search", "query": query, "params": params}
    timeout = _timeout()
    try:
        reply = request(sock, payload, timeout=timeout)
    except (OSError, ValueError) as exc:
        return Answer(None, _unhealthy(exc))
    if reply is None:
        pid = running_watcher(root)
        process = None
        if pid is not None:
            beat = _heartbeat(root, pid)
            if beat is not None and not beat.get("socket"):
                return Answer(None)  # a watcher that serves nothing (`mdmem watch --no-serve`)
            if beat is not None:  # its server started, and answers nothing
                return Answer(None, "the warm server does not answer; searched in-process")
        elif not (auto_enabled(root) if auto is None else auto) or not _writable(root):
            return Answer(None)
        elif answer_first and light_here(root, params):
            return Answer(None, start=True)
        else:
            process = start_server(root)
        problem = wait_ready(root, process, status or Status(quiet=True))
        if problem:
            return Answer(None, f"{problem}; searched in-process")
        try:
            reply = request(sock, payload, timeout=timeout)
        except (OSError, ValueError) as exc:
            return Answer(None, _unhealthy(exc))
        if reply is None:
            return Answer(None, "the warm server stopped; searched in-process")
    if not reply.get("ok"):
        raise ServerError(str(reply.get("error")), str(reply.get("kind")))
    return Answer(reply)


def light_here(root: Path, params: dict[str, Any]) -> bool:
    """Whether a search in this process embeds its query without torch or litellm: a keyword
    search, no embedding model, or the default model with its ONNX export made."""
    if params.get("mode") == "keyword":
        return True
    from mdmem.config import load_config
    from mdmem.index.embed import queries_without_torch

    cfg = load_config(root).embedding
    return queries_without_torch(cfg.model, cfg.provider, cfg.device)


def start_server(root: Path) -> subprocess.Popen[bytes]:
    """``mdmem watch --idle-exit`` for ``root``, detached: its own session (a Ctrl-C or a
    closed terminal leaves it be), no stdin or stdout, stderr to ``.mdmem/server.log``."""
    import subprocess

    from mdmem.layout import private_file

    log = private_file(root / STATE_DIR / SERVER_LOG)
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", _SERVE, "-w", str(root), "watch", "--idle-exit"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=root,
            start_new_session=True,
        )


def wait_ready(root: Path, process: subprocess.Popen[bytes] | None, status: Status) -> str | None:
    """Wait until the workspace's server answers with its model loaded; what went wrong, or
    None. ``process`` is the one this client started (None: another one is starting)."""
    sock = socket_path(root)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            reply = ping_reply(sock)
            if reply is not None and reply.get("ready", True) and reply.get("scanned", True):
                return None
            if reply is not None:
                pid = reply.get("pid")
                doing = "loading the model" if not reply.get("ready", True) else "indexing changes"
                status.show(f"the search server (pid {pid}) is {doing}")
            elif (pid := running_watcher(root)) is None and (
                process is None or process.poll() is not None
            ):
                log = root / STATE_DIR / SERVER_LOG
                return f"the search server did not start (see {log})"
            elif pid and (beat := _heartbeat(root, pid)) is not None and not beat.get("socket"):
                return f"the watcher (pid {pid}) that started serves no searches"
            else:
                status.show("starting a search server for this workspace")
            time.sleep(POLL_S)
        return f"the search server was not ready after {START_TIMEOUT_S:.0f} s"
    finally:
        status.done()


class Status:
    """What a first search waits for, on stderr: one line rewritten in place on a terminal,
    each new stage once on its own line otherwise (an agent's log gets two lines at most)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.shown: str | None = None

    def show(self, stage: str) -> None:
        if self.quiet:
            return
        if self.tty:
            seconds = time.monotonic() - self.started
            sys.stderr.write(f"\r\x1b[Kmdmem: {stage}… {seconds:.0f} s")
            sys.stderr.flush()
        elif stage != self.shown:
            print(f"mdmem: {stage}…", file=sys.stderr, flush=True)
        self.shown = stage

    def done(self) -> None:
        if self.tty and self.shown is not None and not self.quiet:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _heartbeat(root: Path, pid: int) -> dict[str, Any] | None:
    """The heartbeat of watcher ``pid``, or None when it has written none yet (starting)."""
    info = read_heartbeat(root)
    return info if info.get("pid") == pid else None


def read_heartbeat(root: Path) -> dict[str, Any]:
    """The watcher's heartbeat file as it last wrote it (it rewrites the file in place under an
    exclusive flock: read under a shared one, never half-written); {} when there is none."""
    import fcntl

    try:
        fd = os.open(root / STATE_DIR / WATCHER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        info = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return info if isinstance(info, dict) else {}


def _timeout() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or SEARCH_TIMEOUT_S)
    except ValueError:
        return SEARCH_TIMEOUT_S


def _writable(root: Path) -> bool:
    """A server needs to write its lock and index; a read-only workspace is searched as is."""
    state = root / STATE_DIR
    return os.access(state if state.exists() else root, os.W_OK)


def _unhealthy(exc: BaseException) -> str:
    reason = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
    return f"the warm server did not answer ({reason}); searched in-process"


def server_search(
    root: Path, query: str, params: dict[str, Any], *, verbose: bool = False
) -> dict[str, Any] | None:
    """What ``mdmem search`` does first: the server's reply, or None to search in-process.
    Notes go to stderr: why a server did not answer, and with ``verbose``, who answered."""
    started = time.perf_counter()
    return said(ask(root, query, params, status=Status()), started, verbose)


def said(answer: Answer, started: float, verbose: bool) -> dict[str, Any] | None:
    """The reply of ``answer`` (None: search in-process), after saying on stderr why no server
    answered and, with ``verbose``, who answers (``started``: when the asking began)."""
    if answer.note:
        print(f"mdmem: note: {answer.note}", file=sys.stderr)
    if answer.reply is None:
        if verbose and answer.start:
            print(
                "mdmem: warning: no warm server runs; searching in-process (no torch), then "
                "starting one for the next search",
                file=sys.stderr,
            )
        elif verbose and not answer.note:
            print("mdmem: warning: no warm server answered; searching in-process", file=sys.stderr)
        return None
    if verbose:
        ms = (time.perf_counter() - started) * 1000
        pid = answer.reply.get("pid")
        print(
            f"mdmem: warning: answered by the warm server (pid {pid}) in {ms:.0f} ms",
            file=sys.stderr,
        )
    return answer.reply
