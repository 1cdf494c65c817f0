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

from mdmem.memory.file_state import Target
from mdmem.memory.files import SafeWriter, WriteResult


class OwnWrites:
    """A count of writes made and of writes a sync has indexed (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made = 0
        self._indexed = 0

    def wrote(self) -> None:
        with self._lock:
            self._made += 1

    def unindexed(self) -> int | None:
        """None when every write is indexed; else a mark to pass to :meth:`indexed` once a
        sync that began after this call has run to the end."""
        with self._lock:
            return self._made if self._made > self._indexed else None

    def indexed(self, mark: int) -> None:
        with self._lock:
            self._indexed = max(self._indexed, mark)


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
            self.own.wrote()
