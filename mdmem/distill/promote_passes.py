"""Automatic promotion passes, coordinated across the processes of one workspace.

An agent's process promotes when its own sessions end; the watcher (``mdmem watch``, the
auto-started server) promotes when it sees a session written by another process end. Both may
see the same end. So that each session's end starts one pass, and two passes never run at once:

- a pass holds ``.mdmem/promote.lock`` (a flock, released by the kernel if its process dies);
- ``.mdmem/promote.json`` records the session ends already handled (the newest
  :data:`KEEP_HANDLED`), the L4 size the next automatic consolidation waits for, and the
  requests queued while another process held the pass lock. It is read and written under the
  short-lived ``.mdmem/promote-state.lock``.

A process never waits for another's pass: it queues its request, and the process holding the
lock takes the queue once its pass ends (it looks at it after releasing the lock, so no request
is lost in between). The file is disposable like the rest of ``.mdmem/``: without it, a session
end is at worst handled a second time, which promotes nothing new (every step has a threshold).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdmem.layout import private_dir, private_file
from mdmem.writes.file_lock import FileLock, Timeout
from mdmem.writes.safe_writer import atomic_write

log = logging.getLogger("mdmem")
PASS_LOCK = "promote.lock"
STATE_LOCK = "promote-state.lock"
STATE_FILE = "promote.json"
KEEP_HANDLED = 2_000
STATE_TIMEOUT_S = 10.0
"""The state lock is held for one small read and write; longer means something is wrong."""


@dataclass(frozen=True)
class Claim:
    """The right to run one pass (the pass lock is held until :meth:`SharedPasses.release`)."""

    sessions: frozenset[str]
    """Session ends asked for (here or queued by another process) and not handled before."""
    forced: bool
    """A pass was asked for besides session ends (L3 past its trigger, a compaction)."""
    consolidate_above: int
    lock: FileLock | None = field(default=None, compare=False, repr=False)

    @property
    def due(self) -> bool:
        return bool(self.sessions) or self.forced


class SharedPasses:
    """One workspace's pass lock and state file (one instance per process is enough)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def claim(self, sessions: Iterable[str], forced: bool) -> Claim | None:
        """The pass lock with what is to be done, or None: another process runs a pass, and
        the request is queued for it."""
        sessions = set(sessions)
        lock = self._try_pass()
        if lock is None:
            with self._state() as state:
                state["queued"] = sorted({*state["queued"], *sessions})
                state["forced"] = state["forced"] or forced
            lock = self._try_pass()  # it may have ended before the request was queued
            if lock is None:
                return None
        with self._state() as state:
            asked = sessions | set(state["queued"])
            forced = forced or state["forced"]
            state["queued"], state["forced"] = [], False
            fresh = frozenset(asked - set(state["handled"]))
            above = int(state["consolidate_above"])
        return Claim(fresh, forced, above, lock)

    def release(self, claim: Claim, *, handled: bool, consolidate_above: int) -> bool:
        """Record the claim's sessions as handled (``handled``) and the next consolidation's
        size, release the pass lock; True when requests were queued meanwhile."""
        with self._state() as state:
            if handled:
                done = [s for s in state["handled"] if s not in claim.sessions]
                state["handled"] = [*done, *sorted(claim.sessions)][-KEEP_HANDLED:]
            state["consolidate_above"] = consolidate_above
        if claim.lock is not None:
            claim.lock.release()
        with self._state() as state:  # after the release: a request queued before it is seen
            return bool(state["queued"]) or bool(state["forced"])

    def handled(self) -> list[str]:
        """The session ends handled so far (oldest first)."""
        with self._state() as state:
            return list(state["handled"])

    def _try_pass(self) -> FileLock | None:
        path = private_file(self.state_dir / PASS_LOCK)
        lock = FileLock(str(path), timeout=0, mode=0o600)
        try:
            lock.acquire()
        except Timeout:
            return None
        return lock

    def _state(self) -> _StateEdit:
        return _StateEdit(self.state_dir)


class _StateEdit:
    """``with`` the state lock held: the state as a dict, written back if it changed."""

    def __init__(self, state_dir: Path) -> None:
        private_dir(state_dir)
        self.path = state_dir / STATE_FILE
        self.lock = FileLock(str(state_dir / STATE_LOCK), timeout=STATE_TIMEOUT_S, mode=0o600)
        self.before: dict[str, Any] = {}
        self.state: dict[str, Any] = {}

    def __enter__(self) -> dict[str, Any]:
        self.lock.acquire()
        self.before = _read(self.path)
        self.state = json.loads(json.dumps(self.before))
        return self.state

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None and self.state != self.before:
                if not self.path.exists():
                    private_file(self.path)  # owner-only from the start
                atomic_write(self.path, json.dumps(self.state).encode())
        finally:
            self.lock.release()


def _read(path: Path) -> dict[str, Any]:
    state: dict[str, Any] = {"handled": [], "queued": [], "forced": False, "consolidate_above": 0}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return state
    except (OSError, ValueError) as exc:  # disposable: start afresh
        log.warning("tiers: %s unreadable (%s); starting afresh", path, exc)
        return state
    if not isinstance(data, dict):
        return state
    for key in ("handled", "queued"):
        if isinstance(data.get(key), list):
            state[key] = [s for s in data[key] if isinstance(s, str)]
    state["forced"] = data.get("forced") is True
    if isinstance(data.get("consolidate_above"), int):
        state["consolidate_above"] = data["consolidate_above"]
    return state
