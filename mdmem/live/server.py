"""The warm query server: answers searches over a local Unix socket while ``mdmem watch`` runs.

Importing torch and loading the model takes seconds; a search against a warm process takes
milliseconds. One JSON request per connection, one JSON reply. The socket lives in
``.mdmem/`` (an owner-only folder), or in an owner-only folder of the temp folder when that path
is too long; it is local by nature. Clients fall back to searching in-process when no server
answers. Only the workspace's watcher, which holds ``.mdmem/watcher.lock``, starts one: a
socket found at the path is then a dead process's, never a live server's.
"""

from __future__ import annotations

import contextlib
import json
import os
import socketserver
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.index.request import SearchRequest
from mdmem.layout import STATE_DIR, private_dir, running_watcher, socket_path
from mdmem.live.client import ping, request

__all__ = ["MAX_REQUEST", "SOCKET_MODE", "QueryServer", "ping", "request"]

if TYPE_CHECKING:
    from mdmem.index.sync import CaughtUp
    from mdmem.live.protocol import Indexed

MAX_REQUEST = 1_000_000
RUNTIMES = ("onnxruntime", "torch", "litellm")
"""The heavy runtimes a ``status`` reply says this process has loaded."""
SOCKET_MODE = 0o600


class QueryServer:
    def __init__(
        self,
        ws: Indexed,
        path: Path | None = None,
        scanned: threading.Event | None = None,
        *,
        word: Callable[[], CaughtUp | None] | None = None,
        writable: Callable[[], bool] | None = None,
    ) -> None:
        """``scanned``: set once the watcher's start-up scan is done (a first client shows
        that it waits for it). ``word``: the watcher's word on freshness as of now (what a
        search in another process asks for). ``writable``: False while the workspace may be
        being removed (no search is answered then: it would write the latency log)."""
        self.ws = ws
        self.word = word or (lambda: None)
        self.writable = writable or (lambda: True)
        self.stop_requested = threading.Event()
        """Set by a client's ``stop`` (``mdmem server stop``): the process running the server
        (``mdmem watch``) stops it and exits."""
        self.path = path or socket_path(ws.root)
        self.scanned = scanned
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        self._warming: threading.Thread | None = None
        self.ready = threading.Event()
        """Set once the model is loaded (or there is none): searches then take milliseconds."""
        self._last_query = time.monotonic()

    def touch(self) -> None:
        """A request arrived: the server is in use."""
        self._last_query = time.monotonic()

    def idle_seconds(self) -> float:
        """Seconds since the last request (or since the server started)."""
        return time.monotonic() - self._last_query

    def start(self) -> QueryServer:
        """Listen on the socket. The caller holds the workspace's watcher lock."""
        if running_watcher(self.ws.root) != os.getpid():
            raise RuntimeError(
                "the query server is started by the watcher that holds "
                f"{self.ws.state_dir / 'watcher.lock'}"
            )
        _private_folder(self.path.parent, self.ws.root)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left behind by a watcher that died: no live one has the lock
        handler = type("Handler", (_Handler,), {"ws": self.ws, "owner": self})
        server = socketserver.ThreadingUnixStreamServer(
            str(self.path), handler, bind_and_activate=False
        )
        try:
            server.server_bind()  # in an owner-only folder: unreachable by others even now
            os.chmod(self.path, SOCKET_MODE)
            server.server_activate()
        except BaseException:
            server.server_close()
            raise
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(  # stop() waits for one poll: a short one
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="mdmem-server",
            daemon=True,
        )
        self._thread.start()
        self._warming = threading.Thread(target=self._warm_up, name="mdmem-warm-up", daemon=True)
        self._warming.start()
        return self

    def _warm_up(self) -> None:
        """Load the model now, not on the first query (that would cost the user seconds). For
        the default model that is its ONNX export when there is one: ready in about a second,
        without torch, which loads later only if the watcher has many texts to embed."""
        try:
            embedder = self.ws.embedder()
            if embedder is not None:
                with contextlib.suppress(Exception):
                    embedder.embed(["warm up"])
        finally:
            self.ready.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop answering and remove the socket, then wait (up to ``timeout``) for the model
        warm-up: a process must not exit normally while a thread is inside the model's native
        code. False when the warm-up is still running."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._warming is not None:
            self._warming.join(None if timeout is None else max(0.0, timeout))
            if self._warming.is_alive():
                return False
            self._warming = None
        return True


def _private_folder(folder: Path, root: Path) -> None:
    """The socket's folder, owner-only: ``.mdmem/`` itself, or a folder of the temp folder
    that must be ours and closed to others (anyone can create names there)."""
    if folder == root / STATE_DIR:
        private_dir(folder)
        return
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise RuntimeError(f"{folder} is not a private folder of yours; not listening there")


def _about(owner: QueryServer, ws: Indexed) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "root": str(ws.root),
        "socket": str(owner.path),
        "ready": owner.ready.is_set(),
        "scanned": owner.scanned is None or owner.scanned.is_set(),
        "idle_seconds": round(owner.idle_seconds(), 1),
        "runtimes": [name for name in RUNTIMES if name in sys.modules],
    }


def _word(word: CaughtUp | None) -> dict[str, Any]:
    if word is None:
        return {"ok": True, "pid": os.getpid(), "caught_up": None}
    problems = [{"path": p.path, "message": p.message, "line": p.line} for p in word.problems]
    return {"ok": True, "pid": os.getpid(), "caught_up": word.generation, "problems": problems}


def _writable_soon(owner: QueryServer, wait: float = 1.0) -> bool:
    """Whether the watcher writes again within ``wait`` seconds (it pauses when one of its
    files in ``.mdmem/`` goes, then decides whether the workspace is being removed)."""
    deadline = time.monotonic() + wait
    while not owner.writable():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class _Handler(socketserver.StreamRequestHandler):
    ws: Indexed
    owner: QueryServer

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        try:
            reply = self._answer(json.loads(line))
        except Exception as exc:
            reply = {"ok": False, "error": str(exc), "kind": type(exc).__name__}
        self.wfile.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        owner = self.owner
        if op == "word":  # (not a use of the server: a search elsewhere in the workspace)
            return _word(owner.word())
        if op == "stop":
            owner.stop_requested.set()
            return {"ok": True, "pid": os.getpid()}
        if op == "status":
            return {"ok": True, **_about(owner, self.ws)}
        owner.touch()  # a ping too: a first search waiting for the model to load
        if op == "ping":
            return {"ok": True, **_about(owner, self.ws)}
        if op != "search":
            raise ValueError(f"unknown op {op!r}")
        if not _writable_soon(owner):
            raise RuntimeError(f"{self.ws.root} is being removed; the server answers no more")
        wanted = SearchRequest.from_params(str(request["query"]), request.get("params", {}))
        results = self.ws.search(wanted)
        return {"ok": True, "pid": os.getpid(), **results.to_dict()}
