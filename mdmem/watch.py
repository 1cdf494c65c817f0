"""The watcher: re-index hand edits within a fraction of a second, and never drift.

A watchdog observer reports changes; after a short debounce the workspace is synced
incrementally (mtime/size, then hash, then only changed chunks), which makes every editor's
way of saving — in place, temp file + rename, vim's swap and backup dance, ``git checkout`` —
end in the same index a full re-index would give. A scan at start and a periodic reconcile
repair missed events; a heartbeat file tells ``mdmem status`` the watcher is alive.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.discovery import STATE_DIR, WATCHER_FILE, private_file
from mdmem.files import atomic_write, pid_alive

if TYPE_CHECKING:
    from mdmem.index.sync import SyncReport
    from mdmem.server import QueryServer
    from mdmem.workspace import Workspace

log = logging.getLogger("mdmem.watch")
RELEVANT_EVENTS = frozenset({"created", "deleted", "modified", "moved", "closed"})
IGNORED_DIRS = frozenset({STATE_DIR, ".git", ".hg", ".svn", "node_modules", "__pycache__"})
STALE_RETRY_S = 1.0


class Watcher:
    """Watches one workspace in a background thread. Use as a context manager, or start/stop."""

    def __init__(
        self,
        ws: Workspace,
        *,
        debounce: float = 0.05,
        max_delay: float = 1.0,
        reconcile: float = 30.0,
        heartbeat: float = 2.0,
        serve: bool = False,
    ) -> None:
        self.ws = ws
        self.debounce = debounce
        self.max_delay = max_delay
        self.reconcile = reconcile
        self.heartbeat = heartbeat
        self.serve = serve
        self.syncs = 0
        self.last_report: SyncReport | None = None
        self.server: QueryServer | None = None
        self._cond = threading.Condition()
        self._first_event: float | None = None
        self._last_event = 0.0
        self._retry_at: float | None = None
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._beats: threading.Thread | None = None
        self._observer: Any = None
        self._started = 0.0

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Watcher:
        from watchdog.observers import Observer

        self._started = time.time()
        self._observer = Observer()
        self._observer.schedule(_Handler(self), str(self.ws.root), recursive=True)
        self._observer.start()  # before the start-up scan, so no change falls in between
        if self.serve:
            from mdmem.server import QueryServer

            self.server = QueryServer(self.ws).start()
        self._write_heartbeat()
        self._beats = threading.Thread(target=self._beat, name="mdmem-heartbeat", daemon=True)
        self._beats.start()
        self.notify()  # the start-up scan: changes made while no watcher ran
        self._thread = threading.Thread(target=self._run, name="mdmem-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._beats is not None:
            self._beats.join(timeout=5)
        if self.server is not None:
            self.server.stop()
        (self.ws.state_dir / WATCHER_FILE).unlink(missing_ok=True)

    def __enter__(self) -> Watcher:
        return self if self._thread is not None else self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until every change seen so far is indexed (for tests and scripts)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._first_event is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # ---- events ----------------------------------------------------------------------------

    def notify(self) -> None:
        now = time.monotonic()
        with self._cond:
            if self._first_event is None:
                self._first_event = now
            self._last_event = now
            self._cond.notify_all()

    def _run(self) -> None:
        next_reconcile = time.monotonic() + self.reconcile
        while True:
            with self._cond:
                if self._stopping:
                    return
                now = time.monotonic()
                due = [next_reconcile]
                if self._first_event is not None:
                    due.append(
                        min(self._last_event + self.debounce, self._first_event + self.max_delay)
                    )
                if self._retry_at is not None:
                    due.append(self._retry_at)
                wait = min(due) - now
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                now = time.monotonic()
                settled = self._first_event is not None and (
                    now >= self._last_event + self.debounce
                    or now >= self._first_event + self.max_delay
                )
                retry = self._retry_at is not None and now >= self._retry_at
                reconcile = now >= next_reconcile
                if settled:
                    self._first_event = None
                if retry:
                    self._retry_at = None
                self._busy = settled or retry or reconcile
            if self._busy:
                reason = "change" if settled and self.syncs else "start-up scan"
                if not settled:
                    reason = "retry" if retry else "reconcile"
                self._sync(reason)
                if reconcile:
                    next_reconcile = time.monotonic() + self.reconcile
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _beat(self) -> None:
        """Heartbeats from their own thread, so a long sync never looks like a dead watcher."""
        while True:
            with self._cond:
                if self._cond.wait_for(lambda: self._stopping, self.heartbeat):
                    return
            self._write_heartbeat()

    def _sync(self, reason: str) -> None:
        try:
            report = self.ws.sync()
        except Exception:
            log.exception("sync failed; will retry")
            with self._cond:
                self._retry_at = time.monotonic() + STALE_RETRY_S
            return
        self.syncs += 1
        self.last_report = report
        if report.paths:
            log.info(
                "%s: re-indexed %d file(s) in %.0f ms (%d embedded): %s",
                reason,
                len(report.paths),
                report.seconds * 1000,
                report.embedded,
                ", ".join(report.paths[:5]) + (" ..." if len(report.paths) > 5 else ""),
            )
        for problem in report.problems:
            log.warning("%s", problem)
        if report.stale:  # unreadable right now: not deleted, try again soon
            with self._cond:
                self._retry_at = time.monotonic() + STALE_RETRY_S

    def _write_heartbeat(self) -> None:
        info = {
            "pid": os.getpid(),
            "started": self._started,
            "heartbeat": time.time(),
            "interval": self.heartbeat,
            "syncs": self.syncs,
            "socket": str(self.server.path) if self.server else None,
        }
        path = self.ws.state_dir / WATCHER_FILE
        try:
            if not path.exists():
                private_file(path)  # owner-only, like all of .mdmem/ (the replace keeps it)
            atomic_write(path, json.dumps(info).encode())
        except OSError as exc:
            log.warning("cannot write heartbeat %s: %s", path, exc)


class _Handler:
    """watchdog handler: any relevant change to a Markdown file or a folder wakes the watcher."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.root = str(watcher.ws.root)

    def dispatch(self, event: Any) -> None:
        if event.event_type not in RELEVANT_EVENTS:
            return  # opened / closed-without-write: our own reads would loop forever
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        if any(self._relevant(os.fsdecode(p), event.is_directory) for p in paths if p):
            self.watcher.notify()

    def _relevant(self, path: str, is_directory: bool) -> bool:
        rel = os.path.relpath(path, self.root)
        parts = Path(rel).parts
        if not parts or parts[0] == ".." or IGNORED_DIRS.intersection(parts):
            return False
        return is_directory or path.endswith(".md")


def watcher_info(root: Path) -> dict[str, Any] | None:
    """The heartbeat of a watcher on this workspace, with ``running`` set, or None."""
    path = root / STATE_DIR / WATCHER_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    age = time.time() - float(info.get("heartbeat", 0))
    alive = pid_alive(int(info.get("pid", 0)))
    info["heartbeat_age"] = round(age, 1)
    info["running"] = alive and age < 3 * float(info.get("interval", 2.0)) + 5
    return info
