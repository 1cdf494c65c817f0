"""Searching a workspace's index on PostgreSQL from a machine without its files: a URL and the
workspace's name are the whole configuration (no ``.mdmem``, no ``mdmem.toml``).

A remote reader searches only: building a context, remembering and every other write need
the files, and say so in one line. It reads the index as the indexer (the machine with the
files) last wrote it: every hit carries that index generation and last sync time, and
:meth:`RemoteIndex.status` shows them. Connections come from a pool (psycopg_pool), so the
threads of one process (an MCP server's requests, an agent's workers) search at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

from mdmem.config import SearchConfig
from mdmem.errors import MdmemError
from mdmem.index.postgres import db, postgres_writes, read
from mdmem.index.postgres.view import ChunkLayouts, Stamp, View, settle

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from mdmem.index.embed import Embedder
    from mdmem.index.request import SearchRequest
    from mdmem.index.search import SearchResults

URL_ENV = "MDMEM_INDEX_URL"
WORKSPACE_ENV = "MDMEM_INDEX_WORKSPACE"
POOL_SIZE = 4
NEEDS_FILES = frozenset(
    {
        "context", "acontext", "remember", "update", "supersede", "forget", "sync", "watch",
        "compact", "extract", "session", "task", "world", "read", "entries", "get", "edit_file",
        "pool", "restore", "versions", "consolidate", "copy_index_to_postgres",
    }
)  # fmt: skip
"""Workspace methods a remote reader has no files for (each says so in one line)."""


@dataclass(frozen=True)
class RemoteStatus:
    """What a remote reader sees of the index: how big, which model, and how fresh."""

    workspace: str
    where: str
    files: int
    chunks: int
    embedded: int
    model: str | None
    index_bytes: int
    generation: int
    last_sync: str | None
    indexed_from: str | None
    """``HOST:PATH`` of the machine whose files (and watcher) write this index."""

    def to_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class _Pooled(View):
    """A view over one pooled connection, for the length of one search."""

    def __init__(self, conn: psycopg.Connection[Any], owner: RemoteIndex) -> None:
        self._pooled = conn
        self.candidates = owner.candidates
        self.layouts = owner.layouts
        self._owner = owner
        self._lock = threading.RLock()

    @property
    def conn(self) -> psycopg.Connection[Any]:
        return self._pooled

    @property
    def where(self) -> str:
        return self._owner.where

    def searching(self) -> threading.RLock:
        return self._lock

    def embedder(self) -> Embedder | None:
        return self._owner.embedder()


class RemoteIndex:
    """A workspace's index on PostgreSQL, searched without its files::

        index = RemoteIndex("postgresql://reader@db.internal/memory", "invoices")
        for hit in index.search("which port does staging use", k=5):
            print(hit.citation, hit.text, hit.generation, hit.synced)

    ``url`` defaults to ``$MDMEM_INDEX_URL``, ``workspace`` to ``$MDMEM_INDEX_WORKSPACE`` (the
    name ``mdmem status`` shows where the files are). The embedding model is the one the
    index was built with, unless ``embedder`` is given. Safe to share between threads.
    """

    def __init__(
        self,
        url: str | None = None,
        workspace: str | None = None,
        *,
        embedder: Embedder | None = None,
        search: SearchConfig | None = None,
        candidates: int = 400,
        pool_size: int = POOL_SIZE,
    ) -> None:
        self.url = url or os.environ.get(URL_ENV, "")
        self.workspace = workspace or os.environ.get(WORKSPACE_ENV, "")
        if not self.url:
            raise db.IndexServerError(
                f"a remote reader needs the server: pass its URL (--url) or set ${URL_ENV}"
            )
        if not self.workspace:
            raise db.IndexServerError(
                "a remote reader needs the workspace's name on the server (--index-workspace "
                f"or ${WORKSPACE_ENV}; `mdmem status` where the files are shows it)"
            )
        self.schema = db.schema_name(self.workspace)
        self.where = f"{db.where(self.url)} schema {self.schema}"
        self.config = search or SearchConfig()
        self.candidates = candidates
        self.layouts = ChunkLayouts()
        self._embedder = embedder
        self._pool_size = pool_size
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteIndex({self.where!r})"

    def __getattr__(self, name: str) -> NoReturn:
        if name in NEEDS_FILES:
            raise MdmemError(
                f"{name} needs the workspace's files; this remote reader of {self.where} "
                "only searches: run it where the files are"
            )
        raise AttributeError(name)

    def __enter__(self) -> RemoteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- connections -----------------------------------------------------------------------

    @property
    def pool(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = self._open()
            return self._pool

    def _open(self) -> ConnectionPool[Any]:
        """Check the server and the workspace with one connection (its errors are the clear
        ones), then open the pool."""
        from pgvector.psycopg import register_vector
        from psycopg_pool import ConnectionPool

        with db.open_connection(self.url) as conn:
            extension = db.ensure_vector(conn, self.url)
            version = db.schema_version(conn, self.schema)
            if version == 0:
                raise db.IndexServerError(
                    f"{db.where(self.url)} has no workspace {self.workspace!r} (no schema "
                    f"{self.schema}): check the name; `mdmem status` where the files are "
                    "shows it"
                )
            if version != db.SCHEMA_VERSION:
                db.migrate(conn, self.schema)  # (a reader allowed to; else one clear line)
        search_path = f"SET search_path = {db.ident(self.schema)}, {db.ident(extension)}"

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(search_path)
            register_vector(conn)
            settle(conn, self.candidates)

        return ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            kwargs=db.CONNECT_KWARGS,
            configure=configure,
            check=ConnectionPool.check_connection,
            name="mdmem-reader",
            open=True,
        )

    @contextlib.contextmanager
    def _view(self) -> Iterator[_Pooled]:
        import psycopg

        try:
            with self.pool.connection() as conn:
                yield _Pooled(conn, self)
            return
        except psycopg.OperationalError as exc:
            message = db.connect_error(exc, self.url)
        raise db.IndexServerError(message)  # (psycopg's error is not carried along)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        self.layouts.clear()

    def embedder(self) -> Embedder | None:
        """The model the index was built with (loaded on first use), or the one given."""
        if self._embedder is None:
            with self._view() as view:
                model = view.meta("embed_model")
            self._embedder = embedder_for(model) if model else None
        return self._embedder

    # ---- searching -------------------------------------------------------------------------

    def search(
        self, query: str | SearchRequest, k: int | None = None, **options: Any
    ) -> SearchResults:
        """:meth:`mdmem.Workspace.search` (the same options), from the index as the indexer
        last wrote it: each hit carries that ``generation`` and ``synced`` time, and its scope
        (LOCAL or SHARED: a remote reader reads one workspace, no parents and no GLOBAL) with
        the workspace's name."""
        from mdmem.index.federated import WIDEN
        from mdmem.index.request import SearchRequest
        from mdmem.index.search import SearchResults, check_k, search
        from mdmem.redact import DEFAULT
        from mdmem.sharing.scopes import check_scopes, scope_of

        request = SearchRequest.of(query, k, **options)
        k = self.config.k if request.k is None else check_k(request.k)
        mode = request.mode or self.config.mode
        wanted = check_scopes(request.scopes)
        filters = request.filters
        track_access = request.track_access
        embedder = self.embedder() if mode != "keyword" else None
        with self._view() as view:
            hits = search(
                view,
                embedder,
                DEFAULT.mask(request.query),
                k=k if wanted is None else max(k * WIDEN, k + 10),
                mode=mode,
                config=self.config,
                filters=filters,
                track_access=track_access,
            )
        labelled = [replace(h, scope=scope_of(h.path), workspace=self.workspace) for h in hits]
        kept = [h for h in labelled if wanted is None or h.scope in wanted][:k]
        return SearchResults(kept, mode=mode)

    async def asearch(
        self, query: str | SearchRequest, k: int | None = None, **filters: Any
    ) -> SearchResults:
        """:meth:`search` for async agents, in a worker thread."""
        return await asyncio.to_thread(self.search, query, k, **filters)

    def stamp(self) -> Stamp:
        """The generation and last sync time of the index now."""
        with self._view() as view:
            return view.stamp()

    def status(self) -> RemoteStatus:
        """What the index holds and how fresh it is (never loads the embedding model)."""
        with self._view() as view, view.reading():
            model = view.meta("embed_model")
            table = view.meta("embed_table") if model else None
            files, chunks, embedded = read.counts(view.conn, table)
            return RemoteStatus(
                workspace=self.workspace,
                where=self.where,
                files=files,
                chunks=chunks,
                embedded=embedded,
                model=model,
                index_bytes=read.size_bytes(view.conn, self.schema),
                generation=postgres_writes.generation(view.conn),
                last_sync=view.meta("last_sync"),
                indexed_from=view.meta("origin"),
            )


def embedder_for(model_id: str) -> Embedder:
    """The embedding model an index names (``sentence-transformers/NAME``, ``litellm/NAME``);
    constructing it loads nothing."""
    from mdmem.index.embed import LiteLLMEmbedder, SentenceTransformerEmbedder

    provider, _, name = model_id.partition("/")
    if provider == "litellm":
        return LiteLLMEmbedder(name)
    if provider == "sentence-transformers":
        return SentenceTransformerEmbedder(name)
    raise db.IndexServerError(
        f"the index was embedded with {model_id}, which a remote reader cannot load by name: "
        "pass embedder= to RemoteIndex"
    )
