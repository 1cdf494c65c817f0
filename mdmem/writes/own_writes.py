"""Read your own writes: which of a workspace's program writes no search has indexed yet.

While a live watcher runs, a search answers from the index as it is (the watcher indexes a
change within its debounce and one sync). A memory this workspace just wrote must still be
found by its next search: the writes it made are counted here, and a search that finds one
not yet indexed syncs the index itself first, as it does with no watcher.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdmem.writes.file_state import Target
from mdmem.writes.safe_writer import SafeWriter, WriteResult


class OwnWrites:
    """A count of writes made and of writes a sync has indexed, and which files the writes
    not yet indexed touched (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made = 0
        self._indexed = 0
        self._paths: dict[str, int] = {}
        """A written file (its real, absolute path) -> the number of the last write to it."""
        self._unnamed = 0
        """The number of the last write whose file is not known."""
        self._carried: tuple[int, int] | None = None

    def wrote(self, path: str | None = None) -> None:
        with self._lock:
            self._made += 1
            if path is None:
                self._unnamed = self._made
            else:
                self._paths[path] = self._made

    def pending(self) -> tuple[int, list[str] | None] | None:
        """None when every write is indexed; else (the mark for :meth:`indexed`, the files
        written since, or None when a write did not name its file)."""
        with self._lock:
            if self._made <= self._indexed:
                return None
            if self._unnamed > self._indexed:
                return self._made, None
            return self._made, sorted(p for p, n in self._paths.items() if n > self._indexed)

    def carry(self, said: int, generation: int) -> None:
        """A live watcher said the index caught up at generation ``said``; this workspace's
        syncs of its own writes alone have brought it to ``generation`` since."""
        with self._lock:
            self._carried = (said, generation)

    def carried(self, said: int) -> int | None:
        """The generation the watcher's word at ``said`` was carried to, or None."""
        with self._lock:
            if self._carried is None or self._carried[0] != said:
                return None
            return self._carried[1]

    def indexed(self, mark: int) -> None:
        with self._lock:
            self._indexed = max(self._indexed, mark)
            self._paths = {p: n for p, n in self._paths.items() if n > self._indexed}


class CountingWriter(SafeWriter):
    """The safe writer, counting each write (once the file is in place) in ``own``."""

    def __init__(self, state_dir: Path, *, own: OwnWrites, **options: Any) -> None:
        super().__init__(state_dir, **options)
        self.own = own

    def edit_locked(
        self, target: Target, edit: Callable[[str], str], **options: Any
    ) -> WriteResult:
        try:
            return super().edit_locked(target, edit, **options)
        finally:  # (a conflict raised after a write wrote too: one needless sync at worst)
            self.own.wrote(str(target.path))
