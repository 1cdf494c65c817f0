"""The warm query server: answers searches over a local Unix socket while ``mdmem watch`` runs.

Importing torch and loading the model takes seconds; a search against a warm process takes
milliseconds. One JSON request per connection, one JSON reply. The socket lives in
``.mdmem/`` with owner-only permissions; it is local by nature. Clients fall back to searching
in-process when no server answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.discovery import socket_path

if TYPE_CHECKING:
    from mdmem.workspace import Workspace

MAX_REQUEST = 1_000_000
SEARCH_PARAMS = frozenset(
    {"k", "mode", "type", "path", "agent", "session", "since", "until", "include_archived"}
)


class QueryServer:
    def __init__(self, ws: Workspace, path: Path | None = None) -> None:
        self.ws = ws
        self.path = path or socket_path(ws.root)
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> QueryServer:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            if ping(self.path):
                raise RuntimeError(f"another mdmem server is already listening on {self.path}")
            self.path.unlink()  # left behind by a process that died
        handler = type("Handler", (_Handler,), {"ws": self.ws})
        old_umask = os.umask(0o177)  # the socket is created owner-only, no window
        try:
            self._server = socketserver.ThreadingUnixStreamServer(str(self.path), handler)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="mdmem-server", daemon=True
        )
        self._thread.start()
        threading.Thread(target=self._warm_up, name="mdmem-warm-up", daemon=True).start()
        return self

    def _warm_up(self) -> None:
        """Load the model now, not on the first query (that would cost the user seconds)."""
        embedder = self.ws.embedder()
        if embedder is not None:
            with contextlib.suppress(Exception):
                embedder.embed(["warm up"])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class _Handler(socketserver.StreamRequestHandler):
    ws: Workspace

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        try:
            reply = self._answer(json.loads(line))
        except Exception as exc:
            reply = {"ok": False, "error": str(exc), "kind": type(exc).__name__}
        self.wfile.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "root": str(self.ws.root)}
        if op != "search":
            raise ValueError(f"unknown op {op!r}")
        params = {k: v for k, v in request.get("params", {}).items() if k in SEARCH_PARAMS}
        results = self.ws.search(str(request["query"]), **params)
        return {
            "ok": True,
            "pid": os.getpid(),
            "mode": results.mode,
            "fresh": results.fresh,
            "stale": results.stale,
            "problems": results.problems,
            "hits": [hit.to_dict() for hit in results],
        }


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


def ping(path: Path) -> bool:
    try:
        reply = request(path, {"op": "ping"}, timeout=2.0)
    except (OSError, ValueError):
        return False
    return bool(reply and reply.get("ok"))
