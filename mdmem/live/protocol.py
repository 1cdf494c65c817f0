"""What the long-running parts need from a workspace, and no more: the watcher re-indexes, the
query server searches. A workspace hands its wiring (``mdmem.workspace.wiring``); anything
else that can do these few things would do (the live layer never imports the layer above it)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from mdmem.index.embed import Embedder
from mdmem.index.request import SearchRequest
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
    def search(self, request: SearchRequest) -> SearchResults: ...
    def embedder(self) -> Embedder | None: ...
