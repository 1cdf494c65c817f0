"""Which folders the watcher's observer watches: the workspace's top level on its own, and each
top-level folder with everything under it, except the ignored ones.

One recursive watch on the root also watched ``.mdmem/``, whose journal keeps a folder per file a
program write replaced: each cost an inotify watch (305 for a workspace of 300 files written
once by ``remember``), and past ``fs.inotify.max_user_watches`` (8,192 on older systems) the
folders watchdog cannot watch are skipped in silence, their changes left to the reconcile. So the
top level is watched alone, and a top-level folder gets its own recursive watch when it appears
(a file made in it before its watch starts is found by the sync that its appearance starts); a
watch goes with its folder, and one renamed is watched again under its new name, where its old
watch would report its changes under the old one.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("mdmem.live.watch")


class WatchedFolders:
    """The observer's watches of one workspace, followed from the top level's own events."""

    def __init__(self, observer: Any, handler: Any, root: Path, ignored: frozenset[str]) -> None:
        self._observer = observer
        self._handler = handler
        self._root = str(root)
        self._ignored = ignored
        self._watches: dict[str, Any] = {}

    def start(self) -> None:
        """The top level, then each of its folders. Call it once the observer runs: a folder
        gone before its watch starts is then skipped (``schedule`` raises), where the observer's
        own start would fail. Events may come in meanwhile: scheduling a folder twice gives the
        same watch, and each folder's watch is dropped before it is made again."""
        self._observer.schedule(self._handler, self._root, recursive=False)
        self.rescan()

    def names(self) -> list[str]:
        """The top-level folders watched."""
        return sorted(self._watches)

    def heard(self, event: Any) -> None:
        """An event of any watch (on the observer's thread): a top-level folder that appeared
        is watched, one that went is not any more, one renamed is watched under its new name.
        What a folder is now decides, not the event alone: a deleted folder's own watch may
        report its deletion after the root reported it made again. An event of the top level
        itself (a "modified" of the root: all that some observers report there) rescans it."""
        if not event.is_directory:
            return
        if os.fsdecode(event.src_path).rstrip(os.sep) == self._root:
            self.rescan()
            return
        if event.event_type == "created":
            self._follow(self._top(event.src_path))
            return
        if event.event_type == "moved":
            self._follow(self._top(event.dest_path))
        gone = self._top(event.src_path)
        if gone is not None and not os.path.isdir(os.path.join(self._root, gone)):
            self._drop(gone)

    def rescan(self) -> None:
        """The top level's folders now: new ones watched, gone ones not (also the watcher's
        reconcile calls it, in case an event was missed)."""
        try:
            with os.scandir(self._root) as entries:
                now = {e.name for e in entries if e.is_dir(follow_symlinks=False)}
        except OSError as exc:  # the workspace itself gone: the watcher notices and stops
            log.debug("cannot list %s: %s", self._root, exc)
            return
        for name in now - self._watches.keys():
            self._follow(name)
        for name in self._watches.keys() - now:
            self._drop(name)

    def _top(self, path: str | bytes) -> str | None:
        """The top-level folder's name ``path`` is, or None (deeper, or outside)."""
        rel = os.path.relpath(os.fsdecode(path), self._root)
        return None if os.sep in rel or rel in (os.curdir, os.pardir) else rel

    def _follow(self, name: str | None) -> None:
        if name is None or name in self._ignored:
            return
        self._drop(name)  # a folder made again: the old watch ended with the old folder
        folder = os.path.join(self._root, name)
        if os.path.islink(folder) or not os.path.isdir(folder):
            return
        try:
            self._watches[name] = self._observer.schedule(self._handler, folder, recursive=True)
        except OSError as exc:  # gone again already, or unreadable: the reconcile covers it
            log.debug("cannot watch %s: %s", folder, exc)

    def _drop(self, name: str | None) -> None:
        watch = self._watches.pop(name, None) if name is not None else None
        if watch is not None:
            with contextlib.suppress(KeyError):
                self._observer.unschedule(watch)
