"""What the long-running parts need from a workspace, and no more: the watcher re-indexes, the
query server searches. A :class:`~mdmem.workspace.Workspace` is one; so is anything else that
can do these few things (the live layer never imports the facade above it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from mdmem.index.embed import Embedder
from mdmem.index.search import SearchResults
from mdmem.index.sync import Progress, SyncReport


class Indexed(Protocol):
    @property
    def root(self) -> Path: ...
    @property
    def state_dir(self) -> Path: ...
    def sync(
        self, *, full: bool = False, embed: bool = True, progress: Progress | None = None
    ) -> SyncReport: ...
    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        mode: str | None = None,
        type: str | None = None,
        path: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        since: str | None = None,
        until: str | None = None,
        include_archived: bool = False,
        scopes: str | Sequence[str] | None = None,
        track_access: bool = True,
    ) -> SearchResults: ...
    def embedder(self) -> Embedder | None: ...
