"""Workspace: the one composition root. Finds the folder, reads config, and hands each call to
the part that owns the work: the daily calls here, the rest in named parts (``ws.index``,
``ws.files``, ``ws.sessions``, ``ws.sharing``, ``ws.lifecycle``, ``ws.task``, ``ws.world``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.config import CONFIG_NAME, Config, Mode, check_name
from mdmem.layout import find_root
from mdmem.workspace.wiring import Wiring

# Everything else is imported where it is used: a Claude Code hook opens a workspace and makes
# one call, and must not pay for the parser of every file format, asyncio or the parts it never
# touches (tests/integration/test_hook_modules.py lists what it may not import).
if TYPE_CHECKING:
    from typing import Unpack

    from mdmem.context.pack import Context
    from mdmem.distill.workflow import Conversation
    from mdmem.index.embed import Embedder
    from mdmem.index.request import SearchOptions, SearchRequest
    from mdmem.index.search import SearchResults
    from mdmem.live.watch import Watcher
    from mdmem.markdown.entries import Entry
    from mdmem.memory.documents import Documents
    from mdmem.memory.forget import ForgetReport
    from mdmem.memory.session_files import SessionFiles
    from mdmem.memory.session_format import SessionRecord
    from mdmem.memory.session_writer import Session
    from mdmem.memory.task import Task
    from mdmem.memory.world import World
    from mdmem.redact import Redactor
    from mdmem.reports import CompactReport, ExtractReport
    from mdmem.sharing.pool import Pool
    from mdmem.workspace.parts import Files, Index, Lifecycle, Sharing


class Workspace:
    """A folder of Markdown memory. Construct with :meth:`open` or :meth:`init`.

    The calls an agent makes every day are methods here; the rest are grouped in parts:
    ``ws.index`` (keep the index up to date, its status), ``ws.files`` (read, edit and recover
    files), ``ws.sessions`` (recorded sessions), ``ws.sharing`` (pools, parents, git),
    ``ws.lifecycle`` (consolidation, relations, tiers, stats), ``ws.task`` and ``ws.world``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        config: Config | None = None,
        *,
        embedder: Embedder | None = None,
    ) -> None:
        """``embedder`` replaces the configured embedding model (e.g. one shared, loaded model)."""
        self._w = Wiring(root, config, embedder)
        self.root: Path = self._w.root
        """The workspace folder, absolute."""
        """The workspace's folder."""

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, mode={self.config.mode!r})"

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, *, embedder: Embedder | None = None
    ) -> Workspace:
        """Open ``path``; else ``$MDMEM_WORKSPACE``; else the nearest folder upwards holding
        ``mdmem.toml`` or ``memory.md`` (like git finds its repository)."""
        return cls(find_root(path), embedder=embedder)

    @classmethod
    def init(
        cls, path: str | os.PathLike[str] = ".", mode: Mode = "full", agent: str = "default"
    ) -> Workspace:
        """Create a workspace from the templates. Existing files are never overwritten."""
        from mdmem.memory.templates import check_mode, init_files

        root = Path(path).absolute()
        init_files(root, check_mode(mode), check_name(agent, "agent"))
        return cls(root)

    @classmethod
    def open_global(cls, *, embedder: Embedder | None = None) -> Workspace:
        """The user's GLOBAL workspace (``$MDMEM_GLOBAL``, default under the user's data
        folder), created (minimal mode) on first use; every workspace of the user reads it."""
        from mdmem.memory.templates import init_files
        from mdmem.sharing.scopes import global_root

        root = global_root()
        if not (root / CONFIG_NAME).exists():
            init_files(root, "minimal", "default")
        return cls(root, embedder=embedder)

    @property
    def config(self) -> Config:
        """mdmem.toml as read (``config.mode``, ``config.agent``, …)."""
        return self._w.config

    @config.setter
    def config(self, config: Config) -> None:
        """Replace the settings this object uses (e.g. another agent name); the file stays."""
        self._w.config = config

    # ---- the parts ------------------------------------------------------------------------

    @cached_property
    def index(self) -> Index:
        """The index: ``.update()`` (``mdmem index``), ``.status()``, ``.copy_to_postgres()``."""
        from mdmem.workspace.parts import Index

        return Index(self._w)

    @cached_property
    def files(self) -> Files:
        """The files: ``.read()``, ``.edit()``, ``.versions()``, ``.recover()`` …"""
        from mdmem.workspace.parts import Files

        return Files(self._w)

    @property
    def sessions(self) -> SessionFiles:
        """The recorded sessions (``.sessions/``): ``.list()``, ``.record(id)``."""
        return self._w.sessions

    @cached_property
    def sharing(self) -> Sharing[Workspace]:
        """Pools, the parent and GLOBAL, git: ``.pool(name)``, ``.publish()``, ``.sync()`` …"""
        from mdmem.workspace.parts import Sharing

        return Sharing(
            self._w,
            lambda root, model: Workspace(root, embedder=model),
            lambda model: Workspace.open_global(embedder=model),
        )

    @cached_property
    def lifecycle(self) -> Lifecycle:
        """Memories over time: ``.consolidate()``, ``.restore()``, ``.related()``, ``.stats()`` …"""
        from mdmem.workspace.parts import Lifecycle

        return Lifecycle(self._w)

    @property
    def task(self) -> Task:
        """task_process.md: ``ws.task.add(...)``, ``.complete(n)``, ``.current()`` …"""
        return self._w.task

    @property
    def world(self) -> World:
        """world_state.md: ``ws.world.set(key, text)``, ``ws.world.get(key)``."""
        return self._w.world

    # ---- reading --------------------------------------------------------------------------

    def entries(
        self, path: str | os.PathLike[str] | None = None, *, include_archived: bool = False
    ) -> list[Entry]:
        """Entries of one file, or of the whole workspace (unreadable files are skipped)."""
        return self._w.documents.entries(path, include_archived)

    def get(self, entry_id: str) -> Entry:
        """The entry with this id, wherever it is (archived ones included). A read counts as an
        access of it (as a search hit does), toward consolidation's ``max_access``."""
        entry = self._w.documents.get(entry_id)
        self._w.count_reads([entry.id])
        return entry

    def search(
        self, query: str | SearchRequest, k: int | None = None, **options: Unpack[SearchOptions]
    ) -> SearchResults:
        """The passages that answer ``query``, best first, each citing ``path:start-end``.

        ``options`` are :class:`~mdmem.index.request.SearchOptions` (typed: an IDE or mypy
        sees each): ``mode``, the filters ``type``, ``path``, ``agent``, ``session``,
        ``since``, ``until``, ``include_archived``, and ``scopes``, ``track_access``; or pass
        a SearchRequest.

        Changed files are re-indexed first, so a hand edit is seen at once; if a file cannot be
        read, the results say so in ``.stale``. While a live watcher runs, the files are not
        checked and its sync is not waited for: the index is searched as it is, and the files
        the watcher is still indexing (within its debounce and one sync) are listed in
        ``.stale``; this workspace's own writes are indexed first, and ``ws.index.update()``
        before a search waits for everything. The parents' SHARED and the GLOBAL workspace's
        knowledge are searched too, their indexes as they are, all ranked on one scale; each
        hit says its ``scope`` and ``workspace``. ``scopes`` keeps some of LOCAL, SHARED,
        INHERITED, GLOBAL.
        """
        from mdmem.index.request import SearchRequest

        return self._w.search(SearchRequest.of(query, k, **options))

    async def asearch(
        self, query: str | SearchRequest, k: int | None = None, **options: Unpack[SearchOptions]
    ) -> SearchResults:
        """:meth:`search` for async agents: runs in a worker thread, never blocks the loop."""
        import asyncio

        from mdmem.index.request import SearchRequest

        request = SearchRequest.of(query, k, **options)
        if request.k is not None:
            from mdmem.index.search import check_k

            check_k(request.k)  # here, not in the worker thread
        return await asyncio.to_thread(self._w.search, request)

    def build_context(
        self,
        query: str | None = None,
        budget_tokens: int | None = None,
        model: str | None = None,
        *,
        agent: str | None = None,
    ) -> Context:
        """The memory section of a system prompt, at most ``budget_tokens`` long.

        Full mode: the task, this agent's recent sessions, the world state, lasting memories
        (grouped by type; those matching ``query`` first) and other passages found for
        ``query``. Minimal mode: lasting memories and the compact memory. Tokens are counted
        with ``model``'s tokenizer (litellm, offline) or a fast estimate; what did not fit is
        marked in the text and reported in ``Context.sources``.
        """
        from mdmem.context.build import build_context

        return build_context(_ContextView(self), query, budget_tokens, model, agent)

    async def abuild_context(self, query: str | None = None, **kwargs: Any) -> Context:
        """:meth:`build_context` for async agents (a query may load the model and search)."""
        import asyncio

        return await asyncio.to_thread(self.build_context, query, **kwargs)

    # ---- writing --------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        type: str = "fact",
        importance: float = 0.5,
        source: str | None = None,
        file: str | os.PathLike[str] | None = None,
        section: str | None = None,
    ) -> Entry:
        """Append a memory under the heading for its type (created if missing), or under
        ``section`` when given.

        Skills go to ``learnings.md`` when it exists, everything else to ``memory.md``.
        Remembering text already in the file (ignoring case, spacing and a final full stop)
        returns the existing entry. Secrets in ``text`` are masked before it is written;
        ``Entry.redacted`` says how many.
        """
        where = None if file is None else os.fspath(file)
        return self._w.store.remember(text, type, importance, source, where, section)

    def update(
        self,
        entry: str | Entry,
        text: str | None = None,
        *,
        importance: float | None = None,
        type: str | None = None,
    ) -> Entry:
        """Change an entry's text, importance or type in place. Other lines stay untouched.

        Pass the Entry you read (not just its id) to make the write conditional on it: if a
        person changed that entry since, ConflictError, and their text stays.
        """
        return self._w.store.update(entry, text, importance=importance, type=type)

    def supersede(
        self,
        entry: str | Entry,
        by: str,
        *,
        importance: float | None = None,
        source: str | None = None,
    ) -> Entry:
        """Replace an entry with a newer one, moving the old one to the file's ``## Archive``.

        ``by`` is the id of an existing entry, or the text of a new one (same type and file;
        ``importance`` and ``source`` set on it). Nothing is deleted: the archived entry records
        what superseded it and when.
        """
        return self._w.store.supersede(entry, by, importance=importance, source=source)

    def forget(self, entry: str | Entry) -> ForgetReport:
        """Delete an entry for good: the one true delete, for a leaked secret or a person's data.

        Removes its lines from its file and every archived copy of the same text (through the
        safe writes), its chunks from the index (deleted bytes zeroed, FTS5 segments merged,
        WAL truncated), its cached vectors, and any write-journal or ``.trash/`` file holding
        it. Git history, backups and synced copies are out of reach: ``warnings`` says so.
        """
        from mdmem.memory.forget import forget

        w = self._w
        target = w.store.expected(entry)
        return forget(target, w.documents, w.files, w.state_dir, self._forget_indexed)

    def _forget_indexed(
        self, ids: set[str], removed: list[tuple[Entry, str]]
    ) -> tuple[int, int, bool]:
        """Index rows, cached vectors, access counts and first-seen dates of the entries, gone
        with their bytes. Returns (rows, vectors, whether the WAL was truncated)."""
        gone = self._w.backend.forget(ids, [entry.text for entry, _ in removed])
        return gone.rows, gone.vectors, gone.truncated

    def set_mode(self, mode: Mode) -> list[str]:
        """Switch to ``minimal`` or ``full`` in mdmem.toml (only the ``mode`` line changes).

        Never deletes a file; switching to full creates the task and world files (and
        ``.sessions/``) from the templates if they are missing. Returns the files created.
        """
        from mdmem.memory.templates import switch_mode

        w = self._w
        created = switch_mode(w.root, mode, w.config.agent, w.files.one(CONFIG_NAME))
        w.reload_config()
        return created

    # ---- sessions, compaction, extraction ---------------------------------------------------

    def session(self, title: str, agent: str | None = None) -> Session:
        """Record a session: ``with ws.session("fix login bug") as s: s.event(...)``.

        Full mode writes ``.sessions/YYYYMMDD_HHMMSS_<agent>-<id>_<slug>.md`` as it goes
        (every event is on disk when the call returns); minimal mode keeps the session in
        memory only, ready to be compacted.
        """
        on_disk = self.config.mode == "full"
        return self._w.sessions._start(title, agent or self.config.agent, on_disk=on_disk)

    def should_compact(self, messages: Conversation) -> bool:
        """True when ``messages`` are past ``compact.threshold_tokens`` (default 70,000),
        counted with the configured model's tokenizer (or the estimate)."""
        return self._w.distiller.should_compact(messages)

    def compact(
        self,
        source: Conversation = None,
        *,
        offline: bool = False,
        dry_run: bool = False,
        flush: bool = True,
        into: str | None = None,
        **llm_kwargs: Any,
    ) -> CompactReport:
        """Compact a conversation into the current state and its key events.

        ``source``: chat messages (OpenAI-style dicts), a JSONL/JSON transcript path, a session
        (id, path, Session or SessionRecord); default: this agent's latest session. The LLM
        engine runs when ``llm.model`` is set and ``offline`` is false, else the offline one.
        First a memory flush extracts lasting memories (``flush=False`` skips it). Minimal
        mode writes ``.compact_memory.md`` (merged with what it held); full mode writes a
        ``## Summary`` section in the session's file (``into`` names another session; a
        transcript that is no session goes to ``.compact_memory.md``). ``dry_run`` writes
        nothing and reports the diff.
        """
        return self._w.distiller.compact(
            source, offline=offline, dry_run=dry_run, flush=flush, into=into, **llm_kwargs
        )

    def extract(
        self,
        source: Conversation = None,
        *,
        offline: bool = False,
        dry_run: bool = False,
        **llm_kwargs: Any,
    ) -> ExtractReport:
        """Turn a conversation into lasting memories in ``memory.md`` / ``learnings.md``.

        Each candidate (preference, fact, pattern, skill) is checked against the existing
        memories: the same text is skipped; one at least ``compact.dedupe_similarity`` similar
        (embedding cosine) is resolved as replace, merge or skip (by the model when one is
        configured, else by rules). Replace and merge supersede the old entry (archived with
        a pointer). New entries carry importance and the source session. ``dry_run`` writes
        nothing and reports the diff.
        """
        return self._w.distiller.extract(source, offline=offline, dry_run=dry_run, **llm_kwargs)

    async def acompact(self, source: Conversation = None, **kwargs: Any) -> CompactReport:
        """:meth:`compact` for async agents: the model call runs in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.compact, source, **kwargs)

    async def aextract(self, source: Conversation = None, **kwargs: Any) -> ExtractReport:
        """:meth:`extract` for async agents: the model call runs in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.extract, source, **kwargs)

    # ---- watching, closing ------------------------------------------------------------------

    def watch(self, *, serve: bool = False) -> Watcher:
        """Start watching in a background thread; re-indexes hand edits as they happen.

        Use as ``with ws.watch():`` or keep the returned Watcher and call ``stop()``. With
        ``serve``, it also answers ``mdmem search`` over a local socket (warm model).
        """
        from mdmem.live.promotion import after_sync
        from mdmem.live.watch import Watcher
        from mdmem.memory.scan import include_spec, included

        w = self._w
        cfg = self.config.watch
        spec = include_spec(self.config.files)
        return Watcher(
            w,
            debounce=cfg.debounce_ms / 1000,
            reconcile=cfg.reconcile_seconds,
            heartbeat=cfg.heartbeat_seconds,
            serve=serve,
            watched=lambda rel: included(rel, spec),
            on_synced=after_sync(
                w.auto_promote if w.sessions is not None else None, lambda: w.promoter
            ),
            sync=w.watcher_sync,
        ).start()

    def close(self) -> None:
        """Close the index; wait for automatic promotion and the late-save windows of this
        workspace's writes."""
        self._w.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass(frozen=True)
class _ContextView:
    """What context assembly reads from a workspace (:class:`mdmem.context.build.Memory`)."""

    ws: Workspace

    @property
    def config(self) -> Config:
        return self.ws.config

    @property
    def documents(self) -> Documents:
        return self.ws._w.documents

    @property
    def redactor(self) -> Redactor:
        return self.ws._w.redactor

    @property
    def task(self) -> Task:
        return self.ws.task

    @property
    def world(self) -> World:
        return self.ws.world

    def sessions(
        self, agent: str | None = None, since: str | None = None, limit: int | None = None
    ) -> list[SessionRecord]:
        return self.ws.sessions.list(agent, since, limit)

    def search(self, query: str, k: int | None = None) -> SearchResults:
        return self.ws.search(query, k)

    def pool(self, name: str = "default") -> Pool:
        return self.ws._w.pool(name)  # (ws.sharing's, without importing the parts)

    def pools(self) -> list[str]:
        return self.ws._w.pool_names()
