"""Watching one file for changes made by anyone (other processes, a person's editor).

A watchdog observer on the file's folder (a program write swaps a new file in, an editor may
save by rename: the folder sees both); changes are reported once things are quiet for
``debounce`` seconds, from one thread, never two reports at once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("mdmem")


class FileWatch:
    """Calls ``on_change()`` after the file at ``path`` changed (debounced)."""

    def __init__(self, path: Path, on_change: Callable[[], None], debounce: float = 0.05) -> None:
        self.path = path
        self.on_change = on_change
        self.debounce = debounce
        self._observer: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._report = threading.Lock()
        self._stopped = False

    def start(self) -> FileWatch:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watch = self
        target = os.fsencode(self.path)

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                paths = (event.src_path, getattr(event, "dest_path", ""))
                if any(os.fsencode(p) == target for p in paths if p):
                    watch._changed()

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._observer = Observer()
        self._observer.schedule(Handler(), str(self.path.parent), recursive=False)
        self._observer.start()
        return self

    def _changed(self) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.debounce, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._report:
            if self._stopped:
                return
            try:
                self.on_change()
            except Exception:  # a failing callback must not end the watch
                log.exception("%s: reporting a change failed", self.path.name)

    def stop(self) -> None:
        """Stop watching; a report in progress ends first. Safe to call twice."""
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        with self._report:
            pass

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
