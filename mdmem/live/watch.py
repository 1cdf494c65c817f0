"""The watcher: re-index hand edits within a fraction of a second, and never drift.

A watchdog observer reports changes; after a short debounce the workspace is synced
incrementally (mtime/size, then hash, then only changed chunks), which makes every editor's
way of saving — in place, temp file + rename, vim's swap and backup dance, ``git checkout`` —
end in the same index a full re-index would give. A scan at start and a periodic reconcile
repair missed events. One watcher per workspace: it holds a lock (``.mdmem/watcher.lock``) for
its whole life, which is what ``mdmem status`` and the query server ask; its heartbeat file says
how recently it was seen working.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.errors import MdmemError
from mdmem.layout import (
    PRIVATE_FILE_MODE,
    STATE_DIR,
    WATCHER_FILE,
    WATCHER_LOCK,
    private_dir,
    private_file,
    running_watcher,
)
from mdmem.live.changes import Heard, KernelChanges, open_changes
from mdmem.live.client import read_heartbeat
from mdmem.live.watched_folders import WatchedFolders

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from mdmem.index.sync import CaughtUp, SyncReport
    from mdmem.live.protocol import Indexed
    from mdmem.live.server import QueryServer

log = logging.getLogger("mdmem.live.watch")
RELEVANT_EVENTS = frozenset({"created", "deleted", "modified", "moved", "closed"})
IGNORED_DIRS = frozenset({STATE_DIR, ".git", ".hg", ".svn", "node_modules", "__pycache__"})
STALE_RETRY_S = 1.0
FAILED_RETRY_MAX_S = 60.0
"""A sync that keeps failing (an index server down) is retried ever less often, up to this."""
LOCK_RETRY_S = 1.0
"""How long a starting watcher retries the lock: ``mdmem status`` holds it for an instant."""
CAUGHT_UP_BEATS = 3
"""A watcher's word on freshness holds this many heartbeat intervals (a frozen one loses it)."""
PENDING_LISTED = 50
"""Changed files not indexed yet that the heartbeat names (the rest are counted)."""
WORD_TIMEOUT_S = 1.0
"""How long a search in another process waits for the watcher's word before it checks every
file itself (a frozen or overloaded watcher)."""
QUIET_S = 0.5
"""After one of the watcher's own files in ``.mdmem/`` goes, how long it writes nothing before
it looks again: an ``rm -rf`` of the workspace has removed its lock by then (it stops for
good), a person who deleted only the index has not (it heals, as before)."""
OWN_STATE = frozenset({WATCHER_LOCK, WATCHER_FILE, "index.db", "."})
"""Names in ``.mdmem/`` whose removal may be a removal of the whole workspace under way."""
_LIVE: dict[str, Watcher] = {}
"""The watchers running in this process, by real root path (a search asks them directly)."""


class WatcherRunningError(MdmemError):
    """Another watcher already runs on this workspace (one per workspace)."""


class _Stopping(Exception):
    """Raised from a sync's progress callback to end a long sync when the watcher stops."""


class WatcherLock:
    """The flock that makes one watcher per workspace. Never unlinked: removing a locked
    file would let a second watcher lock a new file of the same name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STATE_DIR / WATCHER_LOCK
        self._fd: int | None = None

    def acquire(self) -> WatcherLock:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            private_dir(self.path.parent)
            fd = os.open(self.path, flags, PRIVATE_FILE_MODE)
        except OSError as exc:  # a read-only mount: nothing to keep up to date from here
            raise MdmemError(f"cannot watch {self.root}: {self.path}: {exc.strerror}") from exc
        deadline = time.monotonic() + LOCK_RETRY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
            if time.monotonic() > deadline:
                os.close(fd)
                pid = running_watcher(self.root)
                who = f"pid {pid}" if pid else "another process"
                raise WatcherRunningError(
                    f"a watcher ({who}) is already running on {self.root}; "
                    "one per workspace (stop it first, or use it: `mdmem search` asks it)"
                )
            time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def in_place(self) -> bool:
        """Whether the lock file at its path is still the one held: once it is removed (with
        ``.mdmem/``, or the whole workspace), another watcher could lock a new one."""
        if self._fd is None:
            return False
        try:
            here = os.stat(self.path)
        except OSError:
            return False
        held = os.fstat(self._fd)
        return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = None


class Watcher:
    """Watches one workspace in a background thread. Use as a context manager, or start/stop."""

    def __init__(
        self,
        ws: Indexed,
        *,
        debounce: float = 0.05,
        max_delay: float = 1.0,
        reconcile: float = 30.0,
        heartbeat: float = 2.0,
        serve: bool = False,
        watched: Callable[[str], bool] | None = None,
        on_synced: Callable[[SyncReport], None] | None = None,
        sync: Callable[..., SyncReport] | None = None,
    ) -> None:
        """``sync(progress=...)``: how to sync (default ``ws.sync``); a workspace gives one on
        a connection of its own, so that its searches never wait for the watcher's sync."""
        self.ws = ws
        self.on_synced = on_synced
        """Called after each sync that re-indexed files (automatic promotion: live/promotion)."""
        self._sync_with = sync or ws.sync
        self.watched = watched or _markdown
        self.debounce = debounce
        self.max_delay = max_delay
        self.reconcile = reconcile
        self.heartbeat = heartbeat
        self.serve = serve
        self.syncs = 0
        self.scanned = threading.Event()
        """Set once the start-up scan has run (what changed while no watcher ran)."""
        self.last_report: SyncReport | None = None
        self.server: QueryServer | None = None
        self._cond = threading.Condition()
        self._first_event: float | None = None
        self._last_event = 0.0
        self._retry_at: float | None = None
        self._failed: tuple[str, int] | None = None
        """The last failed sync's message, and how many failed in a row."""
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._beats: threading.Thread | None = None
        self._observer: Any = None
        self.folders: WatchedFolders | None = None
        """The folders the observer watches (``.mdmem/`` and the other ignored ones are not)."""
        self._lock: WatcherLock | None = None
        self._started = 0.0
        self._readonly: str | None = None
        self._root_id: tuple[int, int] | None = None
        self._caught_up: tuple[int, list[dict[str, Any]]] | None = None
        """(index generation, problems) of the last sync, while no change came after it."""
        self._synced: tuple[int, list[dict[str, Any]]] | None = None
        """The same for the last complete sync, changes or not since (None: the last sync was
        incomplete, or none ran yet): every change since is then in ``_heard``/``_syncing``."""
        self._heard: set[str] = set()
        """Files (and folders) changes were heard of since the current sync began."""
        self._syncing: set[str] = set()
        """Those heard of before the current sync began: it is indexing them."""
        self._changes: KernelChanges | None = None
        """The kernel's record of changes, read by each search (None: no barrier, no word)."""
        self._beat_fd: int | None = None
        """The heartbeat file, written in place: a write never makes a new name in ``.mdmem/``
        (one made while ``rm -rf`` empties it would fail the ``rmdir``)."""
        self._quiet_until = 0.0
        self.abandoned: str | None = None
        """Why the watcher writes nothing more (its workspace is being removed), or None."""

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Watcher:
        """Raises WatcherRunningError when another watcher runs on the workspace."""
        from watchdog.observers import Observer

        self._lock = WatcherLock(self.ws.root).acquire()
        try:
            self._started = time.time()
            self._root_id = _identity(self.ws.root)
            self._observer = Observer()
            self._observer.start()  # watching before the start-up scan: no change falls between
            self.folders = WatchedFolders(
                self._observer, _Handler(self), self.ws.root, IGNORED_DIRS
            )
            self.folders.start()
            self._changes = open_changes(self.ws.root, STATE_DIR, IGNORED_DIRS, self._heard_of)
            self._beat_fd = _open_heartbeat(self.ws.state_dir / WATCHER_FILE)
            if self.serve:
                from mdmem.live.server import QueryServer

                self.server = QueryServer(
                    self.ws, scanned=self.scanned, word=self.word, writable=self.writable
                ).start()
        except BaseException:
            self.stop()
            raise
        _LIVE[os.path.realpath(self.ws.root)] = self
        self._write_heartbeat()
        self._beats = threading.Thread(target=self._beat, name="mdmem-heartbeat", daemon=True)
        self._beats.start()
        self.notify()  # the start-up scan: changes made while no watcher ran
        self._thread = threading.Thread(target=self._run, name="mdmem-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> bool:
        """Stop every thread it started and release the lock; safe to call twice.

        A sync in progress ends after its current batch. With ``timeout``, waits that long for
        the threads in all; False when one is still running then (inside a model load or an
        embedding batch, which cannot be interrupted): the caller is about to exit.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if _LIVE.get(os.path.realpath(self.ws.root)) is self:
            del _LIVE[os.path.realpath(self.ws.root)]
        if self._changes is not None:
            self._changes.close()
            self._changes = None
        ended = True
        if self._observer is not None:
            self._observer.stop()
            ended &= _join(self._observer, deadline)
            self._observer = None
            self.folders = None
        for thread in (self._thread, self._beats):
            if thread is not None:
                ended &= _join(thread, deadline)
        self._thread = self._beats = None
        if self.server is not None:
            ended &= self.server.stop(None if deadline is None else deadline - time.monotonic())
            self.server = None
        if self._lock is not None:
            if self._beat_fd is not None and self._lock.in_place():
                (self.ws.state_dir / WATCHER_FILE).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None
        if self._beat_fd is not None:
            os.close(self._beat_fd)
            self._beat_fd = None
        return ended

    def orphaned(self) -> str | None:
        """Why this watcher watches nothing any more, or None: its workspace folder was
        deleted or replaced, or its lock file removed. A running process should then stop."""
        if self._lock is None:
            return None
        if _identity(self.ws.root) != self._root_id:
            return f"{self.ws.root} was deleted or replaced"
        if not self._lock.in_place():
            return f"{self._lock.path} was removed"
        if self.abandoned:
            return self.abandoned
        return None

    def writable(self) -> bool:
        """Whether the watcher may write into ``.mdmem/`` now: not while one of its own files
        there has just gone (a removal may be under way: see :data:`QUIET_S`), nor ever after
        its workspace or lock went. Decides once the quiet time is over."""
        with self._cond:
            return self._writable()

    def _writable(self) -> bool:
        if self.abandoned:
            return False
        if self._quiet_until == 0.0:
            return True
        if time.monotonic() < self._quiet_until:
            return False
        if gone := self._gone():
            self.abandoned = f"{gone}; writing nothing more"
            return False
        self._quiet_until = 0.0
        path = self.ws.state_dir / WATCHER_FILE
        if self._beat_fd is not None and not _same_file(path, self._beat_fd):
            os.close(self._beat_fd)  # only the heartbeat was deleted: make it again
            self._beat_fd = _open_heartbeat(path)
        return True

    def _gone(self) -> str | None:
        if _identity(self.ws.root) != self._root_id:
            return f"{self.ws.root} was deleted or replaced"
        if self._lock is not None and not self._lock.in_place():
            return f"{self._lock.path} was removed"
        return None

    def word(self) -> CaughtUp | None:
        """This watcher's word as of now: first every change the kernel queued
        before this call is heard of (which takes back a word given before it), then its
        word, or None (a change not indexed yet, no barrier, a removal under way)."""
        from mdmem.index.sync import CaughtUp
        from mdmem.markdown.parse import Problem

        changes = self._changes
        if changes is None or not self.writable():
            return None
        changes.drain()
        with self._cond:
            if self._caught_up is None or self._stopping or not changes.complete:
                return None
            generation, problems = self._caught_up
        found = tuple(Problem(p["path"], p["message"], p["line"]) for p in problems)
        return CaughtUp(generation, found)

    def _heard_of(self, heard: Heard) -> None:
        """What a drain of the kernel's record read (under its lock: told before it ends)."""
        if any(name in OWN_STATE for name in heard.state_removed):
            if gone := self._gone():
                self.abandoned = f"{gone}; writing nothing more"
            else:
                self._quiet_until = time.monotonic() + QUIET_S
        relevant = [rel for rel, folder in heard.paths if _relevant(rel, folder, self.watched)]
        if relevant or heard.lost:
            self.notify(relevant)

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

    def notify(self, paths: Iterable[str] = ()) -> None:
        """A change was heard of (``paths``: relative to the root, for the heartbeat)."""
        now = time.monotonic()
        with self._cond:
            if self._first_event is None:
                self._first_event = now
            self._last_event = now
            self._cond.notify_all()
            new = [p for p in paths if p not in self._heard]  # (the sync under way may have
            self._heard.update(new)  # read one it is indexing before this change: once more)
            listed = new and len(self._heard | self._syncing) <= PENDING_LISTED
            if self._caught_up is not None or listed:  # a change not indexed yet: say so
                self._caught_up = None
                self._write_heartbeat()

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
                if self.abandoned:
                    due = [now + self.heartbeat]  # writes nothing; the process stops it
                elif self._quiet_until:
                    due = [max(self._quiet_until, now + 0.01)]
                wait = min(due) - now
                if wait > 0 or not self.writable():
                    self._cond.wait(max(wait, 0.01))
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
                with self._cond:  # what this sync will index (a later change: the next one)
                    self._syncing |= self._heard
                    self._heard = set()
                reason = "change" if settled and self.syncs else "start-up scan"
                if not settled:
                    reason = "retry" if retry else "reconcile"
                if reconcile and self.folders is not None:
                    self.folders.rescan()  # (a folder whose event was missed)
                self._sync(reason)
                self.scanned.set()
                if reconcile:
                    next_reconcile = time.monotonic() + self.reconcile
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _beat(self) -> None:
        """Heartbeats from their own thread, so a long sync never looks like a dead watcher."""
        while True:
            with self._cond:  # (every write under it: a change withdraws the word in order)
                if self._cond.wait_for(lambda: self._stopping, self.heartbeat):
                    return
                self._write_heartbeat()

    def _sync(self, reason: str) -> None:
        try:
            report = self._sync_with(progress=self._progress)
        except _Stopping:
            return  # what was committed stays; the next watcher's start-up scan does the rest
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            same, failures = self._failed or ("", 0)
            failures = failures + 1 if message == same else 1
            self._failed = (message, failures)
            wait = min(STALE_RETRY_S * 2 ** (failures - 1), FAILED_RETRY_MAX_S)
            if failures == 1 or wait == FAILED_RETRY_MAX_S:  # once, then once a minute at most
                log.warning(
                    "sync failed (%s); will retry in %.0f s%s",
                    message,
                    wait,
                    f" ({failures} failures in a row)" if failures > 1 else "",
                )
            log.debug("sync failure", exc_info=True)
            with self._cond:
                self._retry_at = time.monotonic() + wait
            self._give_word(None)
            return
        if self._failed is not None:
            log.warning("sync works again (after %d failure(s))", self._failed[1])
            self._failed = None
        self.syncs += 1
        self.last_report = report
        self._note_readonly(report.readonly)
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
        self._give_word(report)  # (after the log lines: what a reader of the log sees came first)
        if self.on_synced is not None and report.paths:
            self.on_synced(report)

    def _give_word(self, report: SyncReport | None) -> None:
        """After a sync that left the index matching every file, with no change seen since:
        say so in the heartbeat file, so searches skip their own check of every file. After
        any other (or a failed one, None): take it back."""
        complete = (
            report is not None
            and report.generation is not None
            and not (report.stale or report.readonly or report.busy)
        )
        with self._cond:
            if complete:
                assert report is not None and report.generation is not None  # what complete says
                problems: list[dict[str, Any]] = [
                    {"path": p.path, "message": p.message, "line": p.line} for p in report.problems
                ]
                self._synced = (report.generation, problems)
                self._syncing = set()
            else:  # not indexed after all: searches check the files themselves again
                self._synced = None
                self._heard |= self._syncing
                self._syncing = set()
            barrier = self._changes is not None and self._changes.complete
            if complete and barrier and self._first_event is None and not self._stopping:
                self._caught_up = self._synced
            else:
                self._caught_up = None
            self._write_heartbeat()

    def _progress(self, _stage: str, _done: int, _total: int) -> None:
        """Between batches of a long sync: the place to give up when the watcher stops."""
        if self._stopping:
            raise _Stopping

    def _note_readonly(self, reason: str | None) -> None:
        """One line when the index becomes unwritable and one when it is writable again,
        not one per change."""
        if reason and not self._readonly:
            log.warning("%s; searching it as it is until it can be written", reason)
        elif self._readonly and not reason:
            log.info("index writable again")
        self._readonly = reason
        if reason:
            with self._cond:
                self._retry_at = time.monotonic() + STALE_RETRY_S * 10

    def _write_heartbeat(self) -> None:
        info = {
            "pid": os.getpid(),
            "started": self._started,
            "heartbeat": time.time(),
            "interval": self.heartbeat,
            "syncs": self.syncs,
            "socket": str(self.server.path) if self.server else None,
            "caught_up": self._caught_up[0] if self._caught_up else None,
            "problems": self._synced[1] if self._synced else [],
            "synced": self._synced[0] if self._synced else None,
            "pending": sorted(self._syncing | self._heard)[:PENDING_LISTED],
            "pending_count": len(self._syncing | self._heard),
        }
        if self._beat_fd is None or not self.writable():
            return
        data = json.dumps(info).encode()
        try:  # in place, under an exclusive flock: readers take a shared one
            fcntl.flock(self._beat_fd, fcntl.LOCK_EX)
            try:
                os.pwrite(self._beat_fd, data, 0)
                os.ftruncate(self._beat_fd, len(data))
            finally:
                fcntl.flock(self._beat_fd, fcntl.LOCK_UN)
        except OSError as exc:
            log.warning("cannot write heartbeat %s: %s", self.ws.state_dir / WATCHER_FILE, exc)


class _Handler:
    """watchdog handler: a change to a watched file (``watched(rel)``: by default Markdown; the
    workspace passes its ``files.include``) or to a folder wakes the watcher."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.root = str(watcher.ws.root)

    def dispatch(self, event: Any) -> None:
        if event.event_type not in RELEVANT_EVENTS:
            return  # opened / closed-without-write: our own reads would loop forever
        folders = self.watcher.folders  # (None once the watcher stops)
        if folders is not None:
            folders.heard(event)
        paths = [event.src_path, getattr(event, "dest_path", "") or ""]
        rels = [os.path.relpath(os.fsdecode(p), self.root) for p in paths if p]
        relevant = [rel for rel in rels if self._relevant(rel, event.is_directory)]
        if relevant:  # (a folder "modified" is a file in it changing: that one is named)
            named = event.event_type != "modified" or not event.is_directory
            self.watcher.notify(relevant if named else ())

    def _relevant(self, rel: str, is_directory: bool) -> bool:
        return _relevant(rel, is_directory, self.watcher.watched)


def _relevant(rel: str, is_directory: bool, watched: Callable[[str], bool]) -> bool:
    """A change the watcher indexes: a folder, or a watched file, in no ignored folder."""
    parts = Path(rel).parts
    if not parts or parts[0] == ".." or IGNORED_DIRS.intersection(parts):
        return False
    return is_directory or watched(rel)


def _markdown(rel: str) -> bool:
    return rel.endswith(".md")


def _open_heartbeat(path: Path) -> int:
    """The heartbeat file, owner-only, opened once for writing in place."""
    private_file(path)
    return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)


def _same_file(path: Path, fd: int) -> bool:
    try:
        here = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def _join(thread: Any, deadline: float | None) -> bool:
    thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not thread.is_alive()


def watcher_caught_up(root: Path) -> CaughtUp | None:
    """The workspace's live watcher's word as of this call (see
    :class:`~mdmem.index.sync.CaughtUp`), or None: a search then checks every file itself.

    A heartbeat file alone cannot say it: a change whose event the watcher has not handled yet
    would let the old text through. So the watcher is asked: directly when it runs in this
    process, else over its server's socket (one round trip); it first reads every change the
    kernel queued before the question (:mod:`mdmem.live.changes`). A watcher with no server
    (``mdmem watch --no-serve``), a frozen one (no answer within :data:`WORD_TIMEOUT_S`) or one
    with no such barrier (not Linux) gives no word."""
    from mdmem.index.sync import CaughtUp
    from mdmem.markdown.parse import Problem

    live = _LIVE.get(os.path.realpath(root))
    if live is not None:
        return live.word()
    from mdmem.layout import socket_path
    from mdmem.live.client import request

    try:
        reply = request(socket_path(root), {"op": "word"}, timeout=WORD_TIMEOUT_S)
        if not reply or not reply.get("ok") or reply.get("caught_up") is None:
            return None
        problems = tuple(Problem(p["path"], p["message"], p["line"]) for p in reply["problems"])
        return CaughtUp(int(reply["caught_up"]), problems)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def watcher_info(root: Path) -> dict[str, Any] | None:
    """The watcher of this workspace: its heartbeat, with ``running`` (it holds the lock) and
    ``stalled`` (running, but no heartbeat for three intervals); None when none ever ran."""
    pid = running_watcher(root)
    info = read_heartbeat(root)
    if pid is None and not info:
        return None
    if pid and info.get("pid") != pid:
        info = {"pid": pid}  # no heartbeat of its own yet (or it cannot write one)
    age = time.time() - float(info["heartbeat"]) if "heartbeat" in info else None
    info["heartbeat_age"] = None if age is None else round(age, 1)
    info["running"] = pid is not None
    limit = 3 * float(info.get("interval", 2.0)) + 5
    info["stalled"] = pid is not None and (age is None or age > limit)
    return info
