"""Reads of memories counted as accesses in the index (``ws.get``, an interface showing a
memory's lines), cheaply and never failing the read: a busy index makes them wait in memory
for the next read, or for the workspace's close."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

TYPE_CHECKING = False  # not typing's: a workspace imports this module at start-up

if TYPE_CHECKING:
    from mdmem.index.backend import IndexBackend

WAIT_S = 0.05
"""How long a read waits to count itself (for a sync or another thread): never longer."""
KEEP = 1000
"""Reads kept to count later while the index is busy or cannot be opened (the newest)."""


class ReadCounts:
    """Safe to share between threads (an MCP server reads on several): each read is counted
    once, whichever thread counts it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[str] = []
        """Ids read but not yet counted."""

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def add(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._pending = [*self._pending, *ids][-KEEP:]

    def flush(self, index: IndexBackend) -> None:
        """Count what waits. Past ``WAIT_S`` for the index's lock or its write, the rest
        waits again; an index that fails leaves it waiting too."""
        lock = index.searching()
        if not lock.acquire(timeout=WAIT_S):  # type: ignore[attr-defined]
            return
        with self._lock:  # taken: reads that come meanwhile wait for the next flush
            pending, self._pending = Counter(self._pending), []
        try:
            while pending:  # a memory read twice meanwhile counts twice
                if not index.bump_access(list(pending), wait_s=WAIT_S):
                    break
                pending -= Counter(list(pending))
        except Exception:  # no usable index: the read stood, its count waits
            pass
        finally:
            lock.release()  # type: ignore[attr-defined]
            with self._lock:
                self._pending = [*pending.elements(), *self._pending][-KEEP:]
