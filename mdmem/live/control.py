"""A way to see and stop what starts itself: the workspace's search server (``mdmem server
status|stop``).

The first ``mdmem search`` starts one (``mdmem watch --idle-exit``, detached); a person may
have started one by hand (``mdmem watch``). Either is the process that holds the workspace's
watcher lock. Stopping goes through its socket: the process then stops as on SIGTERM (its
socket, heartbeat and lock released). A watcher that serves no socket (``mdmem watch
--no-serve``, or an agent's ``ws.watch()`` inside its own process) is never signalled from
here: killing it could kill the agent it runs in.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mdmem.layout import running_watcher, socket_path
from mdmem.live.client import request
from mdmem.live.watch import read_heartbeat

STOP_WAIT_S = 15.0
"""How long :func:`stop_server` waits for the process to let go of its lock (a sync in
progress ends after its current batch; a model load cannot be interrupted)."""


@dataclass(frozen=True)
class ServerStatus:
    """The workspace's watcher and search server, as seen from outside."""

    root: str
    running: bool
    """A process holds the workspace's watcher lock."""
    pid: int | None
    serving: bool
    """It answers searches on its socket (False: a watcher with no server, or a frozen one)."""
    socket: str | None
    ready: bool = False
    """Its model is loaded (or there is none): searches take milliseconds."""
    idle_seconds: float | None = None
    """Seconds since its last search (an automatic server exits after ``server.idle_minutes``)."""
    heartbeat_age: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StopResult:
    """What :func:`stop_server` did: ``stopped`` (or nothing ran), with a line saying so."""

    root: str
    was_running: bool
    stopped: bool
    pid: int | None
    message: str

    @property
    def ok(self) -> bool:
        return self.stopped or not self.was_running

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def server_status(root: Path) -> ServerStatus:
    """Who holds the lock, and whether it answers on its socket. Starts nothing, writes
    nothing (a read-only or half-removed workspace is only looked at)."""
    pid = running_watcher(root)
    if pid is None:
        return ServerStatus(str(root), False, None, False, None)
    beat = read_heartbeat(root)
    age = None
    if beat.get("pid") == pid and "heartbeat" in beat:
        age = round(time.time() - float(beat["heartbeat"]), 1)
    reply = _ask(root, "status")
    if reply is None or reply.get("pid") != pid:
        return ServerStatus(str(root), True, pid or None, False, None, heartbeat_age=age)
    return ServerStatus(
        str(root),
        True,
        pid,
        True,
        str(reply.get("socket")),
        bool(reply.get("ready")),
        reply.get("idle_seconds"),
        age,
    )


def stop_server(root: Path, timeout: float = STOP_WAIT_S) -> StopResult:
    """Ask the workspace's server to stop and wait (up to ``timeout``) until its process has
    let go of the watcher lock. Nothing running is no error (``was_running`` False)."""
    pid = running_watcher(root)
    if pid is None:
        return StopResult(str(root), False, False, None, f"no server runs for {root}")
    reply = _ask(root, "stop")
    if reply is None:
        return StopResult(
            str(root),
            True,
            False,
            pid or None,
            f"the watcher (pid {pid}) of {root} answers on no socket (`mdmem watch --no-serve`, "
            "an agent's ws.watch(), or frozen): stop it where it runs (Ctrl-C, or kill it)",
        )
    pid = int(reply.get("pid") or pid)
    deadline = time.monotonic() + timeout
    while running_watcher(root) == pid:
        if time.monotonic() > deadline:
            return StopResult(
                str(root),
                True,
                False,
                pid,
                f"the server (pid {pid}) was asked to stop and still runs after {timeout:g} s "
                "(a server an agent runs with ws.watch(serve=True) is stopped by the agent)",
            )
        time.sleep(0.05)
    return StopResult(str(root), True, True, pid, f"stopped the server (pid {pid}) of {root}")


def _ask(root: Path, op: str) -> dict[str, Any] | None:
    try:
        reply = request(socket_path(root), {"op": op}, timeout=2.0)
    except (OSError, ValueError):
        return None
    return reply if reply and reply.get("ok") else None
