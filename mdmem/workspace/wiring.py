"""What a workspace is built of, made on first use: its config, files, safe writes, index,
model, sessions and parents. Internal: the facade and its parts take what they need from it,
so none of it is part of ``Workspace``'s public surface."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.config import Config, RedactConfig, load_config
from mdmem.errors import ModeError, WorkspaceNotFoundError
from mdmem.index.access_counting import ReadCounts
from mdmem.layout import STATE_DIR, TASK_FILE, WORLD_FILE
from mdmem.memory.documents import Documents
from mdmem.paths import check_state_dir
from mdmem.writes.own_writes import OwnWrites

# The rest is imported by the part that uses it, when first used: a short-lived process (a
# Claude Code hook) makes one call and pays only for what that call needs.
if TYPE_CHECKING:
    from mdmem.distill.consolidate import Consolidator
    from mdmem.distill.promote import AutoPromote, Promoter
    from mdmem.distill.workflow import Distiller
    from mdmem.index.backend import IndexBackend
    from mdmem.index.embed import Embedder
    from mdmem.index.federated import Federation
    from mdmem.index.request import SearchRequest
    from mdmem.index.search import SearchResults
    from mdmem.index.sync import Progress, SyncReport
    from mdmem.memory.knowledge_store import KnowledgeStore
    from mdmem.memory.relations import Relation
    from mdmem.memory.session_files import SessionFiles
    from mdmem.memory.task import Task
    from mdmem.memory.world import World
    from mdmem.memory.writers import FileWriter
    from mdmem.redact import Redactor
    from mdmem.sharing.pool import Pool
    from mdmem.writes.safe_writer import EditFile, SafeWriter

log = logging.getLogger("mdmem")
SEARCH_LOCK_WAIT_S = 5.0
SEARCH_SYNC_MAX_BYTES = 1_000_000
"""A changed file larger than this is not re-indexed by a search (that would take seconds):
the search lists it as stale, and ``mdmem index`` or the watcher indexes it."""


class Wiring:
    """One workspace's parts, each opened or built when first asked for."""

    def __init__(
        self, root: str | os.PathLike[str], config: Config | None, embedder: Embedder | None
    ) -> None:
        self.root = Path(root).absolute()
        if not self.root.is_dir():
            raise WorkspaceNotFoundError(f"{self.root} is not a folder")
        check_state_dir(self.root, STATE_DIR)
        self.config = config if config is not None else load_config(self.root)
        self.state_dir = self.root / STATE_DIR
        self._embedder = embedder
        self._backend: IndexBackend | None = None
        self._watcher_backend: IndexBackend | None = None
        self._writer: SafeWriter | None = None
        self.own_writes = OwnWrites()
        self._sessions: SessionFiles | None = None
        self._auto_promote: AutoPromote | None = None
        self._promotes = False
        self._redactor: tuple[RedactConfig, Redactor] | None = None
        self._pools: dict[str, Pool] = {}
        self._federation: Federation | None = None
        self.reads = ReadCounts()
        self.documents = Documents(
            self.root, self.config.files, self.config.max_file_bytes, self.written_before
        )

    def reload_config(self) -> None:
        self.config = load_config(self.root)

    # ---- files and writes ------------------------------------------------------------------

    @property
    def redactor(self) -> Redactor:
        """Masks secrets as ``[REDACTED:kind]``; built from ``[redact]`` in mdmem.toml."""
        from mdmem.redact import Redactor

        cfg = self.config.redact
        if self._redactor is None or self._redactor[0] is not cfg:
            built = Redactor.from_config(cfg.enabled, cfg.patterns, cfg.allow, cfg.allow_patterns)
            self._redactor = (cfg, built)
        return self._redactor[1]

    @property
    def writer(self) -> SafeWriter:
        """The safe writer every program write goes through (lock, swap, journal)."""
        if self._writer is None:
            from mdmem.writes.own_writes import CountingWriter

            cfg = self.config.write
            self._writer = CountingWriter(
                self.state_dir,
                own=self.own_writes,
                late_save_s=cfg.late_save_ms / 1000,
                journal_versions=cfg.journal_versions,
                journal_bytes=int(cfg.journal_mb * 1_000_000),
            )
            journal = self._writer.journal
            journal.total_bytes = int(cfg.journal_total_mb * 1_000_000)
            # a version a late-save window may still be open on is never dropped for bytes
            journal.protect_s = 4 * cfg.late_save_ms / 1000
        return self._writer

    @property
    def files(self) -> FileWriter:
        """Program writes to workspace files: safe, never adding a secret, never into another
        agent's private notes (``.notes/<agent>/``, the LOCAL scope)."""
        from mdmem.memory.writers import FileWriter

        return FileWriter(self.documents, self.writer, self.redactor, self.config.agent)

    @property
    def store(self) -> KnowledgeStore:
        """Lasting memories in memory.md / learnings.md (what remember/update/supersede use)."""
        from mdmem.memory.knowledge_store import KnowledgeStore

        return KnowledgeStore(self.documents, self.files, self.redactor)

    def written_before(self, rel: str) -> bool:
        return self._writer is not None and self._writer.seen(rel) is not None

    def require_full(self, what: str) -> None:
        if self.config.mode != "full":
            raise ModeError(
                f"{what} is written in full mode only; this workspace is minimal "
                "(switch with `mdmem mode full`)"
            )

    def full(self, rel: str) -> EditFile:
        def write(edit: Any) -> str:
            self.require_full(rel)
            return self.files.write(rel, edit)

        return write

    @property
    def task(self) -> Task:
        from mdmem.memory.task import Task, archiver

        read = lambda: self.documents.if_exists(TASK_FILE)  # noqa: E731
        return Task(read, self.full(TASK_FILE), archiver(self.root))

    @property
    def world(self) -> World:
        from mdmem.memory.world import World

        return World(lambda: self.documents.if_exists(WORLD_FILE), self.full(WORLD_FILE))

    def pool(self, name: str) -> Pool:
        """One object per name, so its callbacks see every write this workspace makes."""
        from mdmem.sharing.pool import Pool

        if name not in self._pools:
            self._pools[name] = Pool(
                name,
                self.documents,
                lambda: self.files,
                lambda: self.redactor,
                lambda: self.config.agent,
            )
        return self._pools[name]

    def pool_names(self) -> list[str]:
        from mdmem.sharing.pool import pool_names

        return pool_names(self.root)

    # ---- sessions --------------------------------------------------------------------------

    @property
    def sessions(self) -> SessionFiles:
        """The ``.sessions/`` folder; the first use starts the automatic promotion
        (``tiers.auto``)."""
        from mdmem.memory.session_files import SessionFiles

        if self._sessions is None:
            self._sessions = SessionFiles(self.documents, self.files, self.require_full)
            if self.config.tiers.auto:
                self._promotes = True
                self._sessions._on_written = self._after_session_write
        return self._sessions

    @property
    def auto_promote(self) -> AutoPromote | None:
        """Promotion as sessions are written (``tiers.auto``), once session files are used;
        made when first asked for (a process that only reads sessions never imports it)."""
        if self._auto_promote is None and self._promotes:
            from mdmem.distill.promote import AutoPromote

            self._auto_promote = AutoPromote(
                self.config, lambda: self.promoter, state_dir=self.state_dir
            )
        return self._auto_promote

    def _after_session_write(self, rel: str, text: str) -> None:
        promote = self.auto_promote
        if promote is not None:
            promote.after_write(rel, text)

    def mark_interrupted(self) -> list[str]:
        return self.sessions.mark_interrupted() if self.config.mode == "full" else []

    # ---- index and search ------------------------------------------------------------------

    @property
    def backend(self) -> IndexBackend:
        if self._backend is None:
            self._backend = self.open_backend()
        return self._backend

    def open_backend(self) -> IndexBackend:
        from mdmem.index import open_index

        return open_index(
            self.root,
            self.state_dir,
            self.config.files,
            self.embedder,
            redactor=self.redactor,
            on_message=log.warning,
            config=self.config.index,
        )

    def embedder(self) -> Embedder | None:
        """The embedding model (loaded on first use), or None when embeddings are off."""
        if self._embedder is None and self.config.embedding.model:
            self._embedder = make_embedder(self.config)
        return self._embedder

    def model_id(self) -> str | None:
        """The model's id without loading it."""
        if self.config.embedding.model or self._embedder is not None:
            return (self._embedder or make_embedder(self.config)).model_id
        return None

    def sync(
        self, *, full: bool = False, embed: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        self.mark_interrupted()
        return self.backend.sync(full=full, embed=embed, progress=progress)

    def watcher_sync(self, *, progress: Progress | None = None) -> SyncReport:
        """A sync on a connection of the watcher's own: a search in this process (the query
        server's) answers from the last committed index instead of waiting for it."""
        self.mark_interrupted()
        if self._watcher_backend is None:
            self._watcher_backend = self.open_backend()
        return self._watcher_backend.sync(progress=progress)

    @property
    def federation(self) -> Federation:
        """The workspaces this one reads besides itself: its parents and GLOBAL, their indexes
        opened read-only."""
        from mdmem.index.federated import Federation
        from mdmem.live.watch import watcher_caught_up

        if self._federation is None or self._federation.config is not self.config:
            self._federation = Federation(
                self.root, self.config, self.embedder, self.redactor, watcher_caught_up
            )
        return self._federation

    def search(self, request: SearchRequest) -> SearchResults:
        """``Workspace.search`` (its docstring says what a search guarantees)."""
        from mdmem.index.federated import search_all
        from mdmem.index.latency import timed
        from mdmem.index.search import check_k, fresh_search
        from mdmem.live.watch import watcher_caught_up
        from mdmem.sharing.scopes import check_scopes

        cfg = self.config.search
        k = cfg.k if request.k is None else check_k(request.k)
        mode = request.mode or cfg.mode
        filters = request.filters
        own = lambda n, track, model: fresh_search(  # noqa: E731
            self.backend,
            request.query,
            k=n,
            mode=mode,
            config=cfg,
            filters=filters,
            track_access=track,
            lock_timeout=SEARCH_LOCK_WAIT_S,
            defer_bytes=SEARCH_SYNC_MAX_BYTES,
            mask=self.redactor.mask,
            caught_up=lambda: watcher_caught_up(self.root),
            embedder=model,
            own_writes=self.own_writes,
        )
        with timed(self.state_dir):
            return search_all(
                own,
                self.federation,
                request.query,
                k=k,
                mode=mode,
                config=cfg,
                filters=filters,
                scopes=check_scopes(request.scopes),
                track_access=request.track_access,
                mask=self.redactor.mask,
                bump=self.backend.bump_access,
            )

    def count_reads(self, ids: Sequence[str]) -> None:
        """Count reads of ``ids`` as accesses (:mod:`mdmem.index.access_counting`). On a server
        index, only through a connection this process already has."""
        self.reads.add(ids)
        if self._backend is None and self.config.index.backend != "sqlite":
            return
        try:
            backend = self.backend
        except Exception:  # no usable index: the read stands, its count waits
            return
        self.reads.flush(backend)

    def indexed_relations(
        self, entry_id: str | None = None, kind: str | None = None
    ) -> list[Relation] | None:
        """The index's relations table, or None (an index that cannot be opened, or one out of
        step with the files): the caller reads the files."""
        from mdmem.errors import MdmemError

        try:
            lookup = getattr(self.backend, "relations", None)
            return None if lookup is None else lookup(entry_id, kind)
        except (MdmemError, OSError):  # (the index says None for its own errors)
            return None

    # ---- distilling ------------------------------------------------------------------------

    def _embed(self) -> Any:
        e = self.embedder()
        return e.embed if e is not None else None

    @property
    def distiller(self) -> Distiller:
        """Compaction and extraction over this workspace's files."""
        from mdmem.distill.workflow import Distiller

        sessions = self.sessions  # (which starts the automatic promotion: tiers.auto)
        auto = self.auto_promote.after_compact if self.auto_promote is not None else None
        return Distiller(self.config, self.documents, self.files, sessions, self._embed, auto)

    def consolidator(self) -> Consolidator:
        from mdmem.distill.consolidate import Consolidator
        from mdmem.tokens import token_counter

        return Consolidator(
            self.config,
            self.documents,
            self.files,
            self.redactor,
            self._embed,
            self.access_counts,
            self.state_dir,
            token_counter(self.config.context.model or self.config.llm.model or None),
        )

    def access_counts(self, keys: Sequence[str]) -> dict[str, int]:
        """The index's access counts of ``keys`` for consolidation: a key it has no row for
        counts 0 once the index has counted for ``consolidate.min_age_days``, else it is left
        out (recently used)."""
        import datetime as dt

        from mdmem.distill.consolidate import counted

        days = self.config.consolidate.min_age_days
        counts = self.backend.access_counts(keys)
        return counted(counts, keys, self.backend.access_since(), dt.date.today(), days)

    @property
    def promoter(self) -> Promoter:
        """Promotion between the memory tiers L1-L4 over this workspace's files."""
        from mdmem.distill.promote import Promoter
        from mdmem.tokens import token_counter

        return Promoter(
            self.config,
            self.documents,
            self.files,
            self.writer,
            lambda: self.distiller,
            lambda dry_writer: self.consolidator().run(offline=True, writer=dry_writer),
            lambda keys: self.backend.access_counts(keys),
            token_counter(self.config.context.model or self.config.llm.model or None),
            self.config.agent,
            self.redactor,
        )

    # ---- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the index; wait for automatic promotion and the late-save windows of this
        workspace's writes."""
        if self._auto_promote is not None:
            self._auto_promote.wait()
        if self._writer is not None:
            self._writer.guard.wait(timeout=self._writer.late_save_s + 5.0)
        if self.reads.pending and self._backend is not None:
            self.count_reads([])  # reads the index was too busy to count (one more try)
        for backend in (self._backend, self._watcher_backend):
            if backend is not None:
                backend.close()
        if self._federation is not None:
            self._federation.close()

    def settle(self) -> None:
        """Wait for the late-save windows of this workspace's writes (before a git commit)."""
        if self._writer is not None:
            self._writer.guard.wait()


def make_embedder(config: Config) -> Embedder:
    """The configured model; constructing it loads nothing (that happens on first use)."""
    cfg = config.embedding
    if cfg.provider == "litellm":
        from mdmem.index.embed import LiteLLMEmbedder

        return LiteLLMEmbedder(cfg.model, cfg.batch_size, cfg.api_base, cfg.api_key_env)
    from mdmem.index.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, cfg.device, cfg.threads)
