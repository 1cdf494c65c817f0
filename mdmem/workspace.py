"""Workspace: the one composition root. Finds the folder, reads config, wires the parts; each
method is a short delegation to the part that owns the work."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.config import CONFIG_NAME, Config, Mode, RedactConfig, check_name, load_config
from mdmem.errors import ConfigError, ModeError, WorkspaceNotFoundError
from mdmem.index.access_counting import ReadCounts
from mdmem.layout import STATE_DIR, TASK_FILE, WORLD_FILE, find_root
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import Document
from mdmem.memory.documents import Documents, DocumentSet
from mdmem.memory.files import EditFile, SafeWriter, decode_markdown
from mdmem.memory.own_writes import CountingWriter, OwnWrites
from mdmem.memory.scan import ScanResult, include_spec, included
from mdmem.memory.store import KnowledgeStore
from mdmem.memory.templates import check_mode, init_files, switch_mode
from mdmem.memory.writers import FileWriter
from mdmem.paths import check_state_dir
from mdmem.redact import Redactor

if TYPE_CHECKING:
    from mdmem.context.pack import Context
    from mdmem.distill.consolidate import ConsolidateReport, Consolidator
    from mdmem.distill.promote import AutoPromote, Promoter, PromoteReport
    from mdmem.distill.stats import Stats
    from mdmem.distill.workflow import Conversation, Distiller
    from mdmem.index.backend import IndexBackend, IndexStatus
    from mdmem.index.embed import Embedder
    from mdmem.index.federated import Federation
    from mdmem.index.postgres.copy import Copied
    from mdmem.index.search import SearchResults
    from mdmem.index.sync import Progress, SyncReport
    from mdmem.live.watch import Watcher
    from mdmem.memory.forget import ForgetReport
    from mdmem.memory.git_sync import SyncReport as GitSyncReport
    from mdmem.memory.journal import JournalEntry
    from mdmem.memory.pool import Pool, PoolEntry
    from mdmem.memory.relations import Relation
    from mdmem.memory.resolvers import ParentSync
    from mdmem.memory.session_files import SessionFiles
    from mdmem.memory.sessions import Session, SessionRecord
    from mdmem.memory.task import Task
    from mdmem.memory.tiers import Tier
    from mdmem.memory.unarchive import RestoreReport
    from mdmem.memory.world import World
    from mdmem.reports import CompactReport, ExtractReport

log = logging.getLogger("mdmem")
SEARCH_LOCK_WAIT_S = 5.0
SEARCH_SYNC_MAX_BYTES = 1_000_000
"""A changed file larger than this is not re-indexed by a search (that would take seconds):
the search lists it as stale, and ``mdmem index`` or the watcher indexes it."""
READ_MAX_ENTRIES = 5
"""A line range over more memories than this is a page of the file, not a read of each."""


class Workspace:
    """A folder of Markdown memory. Construct with :meth:`open` or :meth:`init`."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        config: Config | None = None,
        *,
        embedder: Embedder | None = None,
    ) -> None:
        """``embedder`` replaces the configured embedding model (e.g. one shared, loaded model)."""
        self.root = Path(root).absolute()
        if not self.root.is_dir():
            raise WorkspaceNotFoundError(f"{self.root} is not a folder")
        check_state_dir(self.root, STATE_DIR)
        self.config = config if config is not None else load_config(self.root)
        self._embedder = embedder
        self._index: IndexBackend | None = None
        self._watcher_index: IndexBackend | None = None
        self._writer: SafeWriter | None = None
        self._own_writes = OwnWrites()
        self._sessions: SessionFiles | None = None
        self.auto_promote: AutoPromote | None = None
        """Promotion as sessions are written (``tiers.auto``), once session files are used."""
        self._redactor: tuple[RedactConfig, Redactor] | None = None
        self._pools: dict[str, Pool] = {}
        self._federation: Federation | None = None
        self._reads = ReadCounts()
        self.documents = Documents(
            self.root, self.config.files, self.config.max_file_bytes, self._written_before
        )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, mode={self.mode!r})"

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
        root = Path(path).absolute()
        init_files(root, check_mode(mode), check_name(agent, "agent"))
        return cls(root)

    # ---- reading --------------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self.config.mode

    @property
    def agent(self) -> str:
        return self.config.agent

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def redactor(self) -> Redactor:
        """Masks secrets as ``[REDACTED:kind]``; built from ``[redact]`` in mdmem.toml."""
        cfg = self.config.redact
        if self._redactor is None or self._redactor[0] is not cfg:
            built = Redactor.from_config(cfg.enabled, cfg.patterns, cfg.allow, cfg.allow_patterns)
            self._redactor = (cfg, built)
        return self._redactor[1]

    def scan(self) -> ScanResult:
        return self.documents.scan()

    def resolve(self, name: str | os.PathLike[str], what: str = "file") -> tuple[str, Path]:
        """A name given by a user or agent → (relative path, absolute path), inside only."""
        return self.documents.resolve(name, what)

    def indexes(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``files.include`` / ``files.exclude`` make this file part of the index."""
        from mdmem.memory.scan import indexed_by

        return indexed_by(self.config.files, self.resolve(path)[0])

    def read(self, path: str | os.PathLike[str]) -> Document:
        """Parse one file. Raises FileProblem (naming the file and line) if it can't be read."""
        return self.documents.read(path)

    def all_documents(self) -> DocumentSet:
        """Parse every workspace file; unreadable ones become problems, not exceptions."""
        return self.documents.all()

    def entries(
        self, path: str | os.PathLike[str] | None = None, *, include_archived: bool = False
    ) -> list[Entry]:
        """Entries of one file, or of the whole workspace (unreadable files are skipped)."""
        return self.documents.entries(path, include_archived)

    def get(self, entry_id: str) -> Entry:
        """The entry with this id, wherever it is (archived ones included). A read counts as an
        access of it (as a search hit does), toward consolidation's ``max_access``."""
        entry = self.documents.get(entry_id)
        self._count_reads([entry.id])
        return entry

    def note_read(self, path: str | os.PathLike[str], start_line: int, end_line: int) -> None:
        """Count a read of these lines of a file (an interface showing a citation's lines) as
        an access of each memory in them; a range over more than ``READ_MAX_ENTRIES`` memories
        is a page of the file and counts none. Never raises."""
        try:
            entries = self.documents.read(path).entries
        except Exception:  # the read itself says what is wrong with the file
            return
        ids = [e.id for e in entries if e.start_line <= end_line and e.end_line >= start_line]
        if 0 < len(ids) <= READ_MAX_ENTRIES:
            self._count_reads(ids)

    def _count_reads(self, ids: Sequence[str]) -> None:
        """Count reads of ``ids`` as accesses (:mod:`mdmem.index.reads`). On a server index,
        only through a connection this process already has."""
        self._reads.add(ids)
        if self._index is None and self.config.index.backend != "sqlite":
            return
        try:
            index = self.index
        except Exception:  # no usable index: the read stands, its count waits
            return
        self._reads.flush(index)

    # ---- index and search -----------------------------------------------------------------

    @property
    def index(self) -> IndexBackend:
        if self._index is None:
            self._index = self._open_index()
        return self._index

    def _open_index(self) -> IndexBackend:
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

    def copy_index_to_postgres(self, url: str | None = None) -> Copied:
        """Copy this workspace's SQLite index (synced first) into PostgreSQL, embedding
        nothing again; ``url`` defaults to index.url, then ``$MDMEM_INDEX_URL``."""
        from mdmem.index.postgres.copy import copy_workspace

        return copy_workspace(
            self.root,
            self.state_dir,
            self.config.files,
            self.embedder,
            redactor=self.redactor,
            config=self.config.index,
            url=url,
        )

    def embedder(self) -> Embedder | None:
        """The embedding model (loaded on first use), or None when embeddings are off."""
        if self._embedder is None and self.config.embedding.model:
            self._embedder = _make_embedder(self.config)
        return self._embedder

    def sync(
        self, *, full: bool = False, embed: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        """Bring the index up to date with the files (incremental unless ``full``)."""
        self.mark_interrupted()
        return self.index.sync(full=full, embed=embed, progress=progress)

    def _watcher_sync(self, *, progress: Progress | None = None) -> SyncReport:
        """:meth:`sync` on a connection of the watcher's own: a search in this process (the
        query server's) answers from the last committed index instead of waiting for it."""
        self.mark_interrupted()
        if self._watcher_index is None:
            self._watcher_index = self._open_index()
        return self._watcher_index.sync(progress=progress)

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
    ) -> SearchResults:
        """The passages that answer ``query``, best first, each citing ``path:start-end``.

        Changed files are re-indexed first, so a hand edit is seen at once; if a file cannot be
        read, the results say so in ``.stale``. While a live watcher runs, the files are not
        checked and its sync is not waited for: the index is searched as it is, and the files
        the watcher is still indexing (within its debounce and one sync) are listed in
        ``.stale``; this workspace's own writes are indexed first, and :meth:`sync` before
        a search waits for everything. The parents' SHARED and the GLOBAL workspace's knowledge
        are searched too, their indexes as they are, all ranked on one scale; each hit says its
        ``scope`` and ``workspace``. ``scopes`` keeps some of LOCAL, SHARED, INHERITED, GLOBAL.
        """
        from mdmem.index.federated import search_all
        from mdmem.index.filters import Filters
        from mdmem.index.latency import timed
        from mdmem.index.search import check_k, fresh_search
        from mdmem.live.watch import watcher_word
        from mdmem.memory.scopes import check_scopes

        k = self.config.search.k if k is None else check_k(k)
        mode = mode or self.config.search.mode
        filters = Filters(type, path, agent, session, since, until, include_archived)
        own = lambda n, track, model: fresh_search(  # noqa: E731
            self.index,
            query,
            k=n,
            mode=mode,
            config=self.config.search,
            filters=filters,
            track_access=track,
            lock_timeout=SEARCH_LOCK_WAIT_S,
            defer_bytes=SEARCH_SYNC_MAX_BYTES,
            mask=self.redactor.mask,
            vouched=lambda: watcher_word(self.root),
            embedder=model,
            own_writes=self._own_writes,
        )
        with timed(self.state_dir):
            return search_all(
                own,
                self.federation,
                query,
                k=k,
                mode=mode,
                config=self.config.search,
                filters=filters,
                scopes=check_scopes(scopes),
                track_access=track_access,
                mask=self.redactor.mask,
                bump=self.index.bump_access,
            )

    @property
    def federation(self) -> Federation:
        """The workspaces this one reads besides itself: its parents and GLOBAL (docs/sharing.md:
        Scopes), their indexes opened read-only."""
        from mdmem.index.federated import Federation
        from mdmem.live.watch import current_vouch

        if self._federation is None or self._federation.config is not self.config:
            self._federation = Federation(
                self.root, self.config, self.embedder, self.redactor, current_vouch
            )
        return self._federation

    async def asearch(self, query: str, k: int | None = None, **filters: Any) -> SearchResults:
        """:meth:`search` for async agents: runs in a worker thread, never blocks the loop."""
        import asyncio

        from mdmem.index.search import check_k

        if k is not None:
            check_k(k)  # here, not in the worker thread
        return await asyncio.to_thread(self.search, query, k, **filters)

    def status(self) -> IndexStatus:
        """What the index holds and how fresh it is; never loads the embedding model."""
        self.mark_interrupted()
        model = None
        if self.config.embedding.model or self._embedder is not None:
            model = (self._embedder or _make_embedder(self.config)).model_id  # loads nothing
        from mdmem.live.watch import watcher_info

        return replace(self.index.status(model), watcher=watcher_info(self.root))

    def watch(self, *, serve: bool = False) -> Watcher:
        """Start watching in a background thread; re-indexes hand edits as they happen.

        Use as ``with ws.watch():`` or keep the returned Watcher and call ``stop()``. With
        ``serve``, it also answers ``mdmem search`` over a local socket (warm model).
        """
        from mdmem.live.promotion import after_sync
        from mdmem.live.watch import Watcher

        cfg = self.config.watch
        spec = include_spec(self.config.files)
        return Watcher(
            self,
            debounce=cfg.debounce_ms / 1000,
            reconcile=cfg.reconcile_seconds,
            heartbeat=cfg.heartbeat_seconds,
            serve=serve,
            watched=lambda rel: included(rel, spec),
            on_synced=after_sync(
                self.auto_promote if self.session_files is not None else None,
                lambda: self.promoter,
            ),
            sync=self._watcher_sync,
        ).start()

    # ---- writing --------------------------------------------------------------------------

    @property
    def writer(self) -> SafeWriter:
        """The safe writer every program write goes through (lock, swap, journal)."""
        if self._writer is None:
            cfg = self.config.write
            self._writer = CountingWriter(
                self.state_dir,
                own=self._own_writes,
                late_save_s=cfg.late_save_ms / 1000,
                journal_versions=cfg.journal_versions,
                journal_bytes=int(cfg.journal_mb * 1_000_000),
            )
        return self._writer

    @property
    def files(self) -> FileWriter:
        """Program writes to workspace files: safe, never adding a secret, never into another
        agent's private notes (``.notes/<agent>/``, the LOCAL scope)."""
        return FileWriter(self.documents, self.writer, self.redactor, self.agent)

    @property
    def store(self) -> KnowledgeStore:
        """Lasting memories in memory.md / learnings.md (what remember/update/supersede use)."""
        return KnowledgeStore(self.documents, self.files, self.redactor)

    def edit_file(
        self, path: str | os.PathLike[str], edit: Callable[[str], str], *, create: bool = True
    ) -> str:
        """Apply ``edit`` (old text → new text) to any text file of the workspace through the
        safe writes (lock, compare-and-swap, journal, no new secrets); returns the text now on
        disk. For integrations that keep files of their own (Claude's memory tool, imports)."""
        return self.files.write(self.resolve(path)[0], edit, create=create)

    def versions(self, path: str | os.PathLike[str]) -> list[JournalEntry]:
        """Earlier versions of a file, newest first: the bytes each program write replaced
        (and saves merged after one), kept in ``.mdmem/journal/`` (``mdmem recover``)."""
        rel, _ = self.resolve(path)
        return self.writer.journal.entries(rel)

    def restore(self, path: str | os.PathLike[str], version: str) -> JournalEntry:
        """Put an earlier version back (by id, or 1 = newest), through the safe writes: the
        version it replaces is kept in the journal too."""
        rel, _ = self.resolve(path)
        entry = self.writer.journal.find(rel, version)
        text = decode_markdown(rel, entry.read_bytes(), self.config.max_file_bytes)
        self.files.write(rel, lambda _current: text, exact=True)
        return entry

    def close(self) -> None:
        """Close the index; wait for automatic promotion and the late-save windows of this
        workspace's writes."""
        if self.auto_promote is not None:
            self.auto_promote.wait()
        if self._writer is not None:
            self._writer.guard.wait(timeout=self._writer.late_save_s + 5.0)
        if self._reads.pending and self._index is not None:
            self._count_reads([])  # reads the index was too busy to count (one more try)
        for index in (self._index, self._watcher_index):
            if index is not None:
                index.close()
        if self._federation is not None:
            self._federation.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

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
        return self.store.remember(text, type, importance, source, where, section)

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
        return self.store.update(entry, text, importance=importance, type=type)

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
        return self.store.supersede(entry, by, importance=importance, source=source)

    def forget(self, entry: str | Entry) -> ForgetReport:
        """Delete an entry for good: the one true delete, for a leaked secret or a person's data.

        Removes its lines from its file and every archived copy of the same text (through the
        safe writes), its chunks from the index (deleted bytes zeroed, FTS5 segments merged,
        WAL truncated), its cached vectors, and any write-journal or ``.trash/`` file holding
        it. Git history, backups and synced copies are out of reach: ``warnings`` says so.
        """
        from mdmem.memory.forget import forget

        target = self.store.expected(entry)
        return forget(target, self.documents, self.files, self.state_dir, self._forget_indexed)

    def _forget_indexed(
        self, ids: set[str], removed: list[tuple[Entry, str]]
    ) -> tuple[int, int, bool]:
        """Index rows, cached vectors, access counts and first-seen dates of the entries, gone
        with their bytes. Returns (rows, vectors, whether the WAL was truncated)."""
        gone = self.index.forget(ids, [entry.text for entry, _ in removed])
        return gone.rows, gone.vectors, gone.truncated

    # ---- modes, sessions, task, world -------------------------------------------------------

    def set_mode(self, mode: Mode) -> list[str]:
        """Switch to ``minimal`` or ``full`` in mdmem.toml (only the ``mode`` line changes).

        Never deletes a file; switching to full creates the task and world files (and
        ``.sessions/``) from the templates if they are missing. Returns the files created.
        """
        created = switch_mode(self.root, mode, self.agent, self.files.one(CONFIG_NAME))
        self.config = load_config(self.root)
        return created

    @property
    def session_files(self) -> SessionFiles:
        """The ``.sessions/`` folder: start, list and find sessions."""
        from mdmem.memory.session_files import SessionFiles

        if self._sessions is None:
            self._sessions = SessionFiles(self.documents, self.files, self._require_full)
            if self.config.tiers.auto:
                from mdmem.distill.promote import AutoPromote

                self.auto_promote = AutoPromote(
                    self.config, lambda: self.promoter, state_dir=self.state_dir
                )
                self._sessions.on_written = self.auto_promote.after_write
        return self._sessions

    def session(self, title: str, agent: str | None = None) -> Session:
        """Record a session: ``with ws.session("fix login bug") as s: s.event(...)``.

        Full mode writes ``.sessions/YYYYMMDD_HHMMSS_<agent>-<id>_<slug>.md`` as it goes
        (every event is on disk when the call returns); minimal mode keeps the session in
        memory only, ready to be compacted.
        """
        on_disk = self.mode == "full"
        return self.session_files.start(title, agent or self.agent, on_disk=on_disk)

    def mark_interrupted(self) -> list[str]:
        """Mark sessions whose writer died (killed mid-run) ``interrupted`` and remove the temp
        files dead writers left in ``.sessions/``; returns the ids marked. Only sessions
        started on this host are looked at. Runs on its own when a session starts, on
        :meth:`status` and on :meth:`sync`; cheap when nothing changed."""
        return self.session_files.mark_interrupted() if self.mode == "full" else []

    def sessions(
        self, agent: str | None = None, since: str | None = None, limit: int | None = None
    ) -> list[SessionRecord]:
        """Recorded sessions, newest first: ``agent`` keeps one agent's own sessions,
        ``since`` (YYYY-MM-DD) the ones started on or after that day."""
        return self.session_files.list(agent, since, limit)

    def session_record(self, session_id: str) -> SessionRecord:
        """One session by id (file stem), path, or a unique part of its id."""
        return self.session_files.record(session_id)

    @property
    def task(self) -> Task:
        """task_process.md: ``ws.task.add(...)``, ``.complete(n)``, ``.current()`` …"""
        from mdmem.memory.task import Task, archiver

        read = lambda: self.documents.if_exists(TASK_FILE)  # noqa: E731
        return Task(read, self._full(TASK_FILE), archiver(self.root))

    @property
    def world(self) -> World:
        """world_state.md: ``ws.world.set(key, text)``, ``ws.world.get(key)``."""
        from mdmem.memory.world import World

        return World(lambda: self.documents.if_exists(WORLD_FILE), self._full(WORLD_FILE))

    def pool(self, name: str = "default") -> Pool:
        """The shared pool ``shared/<name>.md``: versioned keys every agent reads and writes
        (``.write``, ``.read``, ``.list``, ``.delete``, callbacks, ``.watch()``). One object
        per name, so its callbacks see every write this workspace makes."""
        from mdmem.memory.pool import Pool

        if name not in self._pools:
            self._pools[name] = Pool(
                name, self.documents, lambda: self.files, lambda: self.redactor, lambda: self.agent
            )
        return self._pools[name]

    def pools(self) -> list[str]:
        """The names of the workspace's shared pools (``shared/*.md``)."""
        from mdmem.memory.pool import pool_names

        return pool_names(self.root)

    def git_sync(
        self, *, dry_run: bool = False, rebase: bool = True, message: str | None = None
    ) -> GitSyncReport:
        """Share the workspace through its git repository: commit its files (only them),
        pull (rebase, or merge), re-index, push; never forced (``mdmem sync``)."""
        from mdmem.memory.git_sync import sync

        settle = self._writer.guard.wait if self._writer is not None else lambda: None
        return sync(
            self.root, self.sync, dry_run=dry_run, rebase=rebase, message=message, settle=settle
        )

    # ---- scopes: parents and GLOBAL ---------------------------------------------------------

    @classmethod
    def open_global(cls, *, embedder: Embedder | None = None) -> Workspace:
        """The user's GLOBAL workspace (``$MDMEM_GLOBAL``, default under the user's data
        folder), created (minimal mode) on first use; every workspace of the user reads it."""
        from mdmem.memory.scopes import global_root

        root = global_root()
        if not (root / CONFIG_NAME).exists():
            init_files(root, "minimal", "default")
        return cls(root, embedder=embedder)

    def parent(self) -> Workspace | None:
        """The parent workspace (``parent = "..."`` in mdmem.toml), or None. ConfigError for
        a missing folder; ParentCycleError, naming it, for a chain that loops."""
        from mdmem.memory.scopes import parent_chain

        chain = parent_chain(self.root, self.config)
        return Workspace(chain[0].root, chain[0].config, embedder=self._embedder) if chain else None

    def publish(
        self,
        key: str,
        content: Any,
        to: str = "parent",
        *,
        pool: str = "default",
        writer: str | None = None,
    ) -> PoolEntry:
        """Hand a result up: write ``key`` in the parent's (``to="parent"``) or the GLOBAL
        (``to="global"``) pool through that workspace's own safe writes, then bring its index
        up to date. ScopeError when the write policy refuses it (docs/sharing.md)."""
        from mdmem.memory.scopes import publish_target

        who = check_name(writer or self.agent, "writer")
        root = publish_target(to, who, self.root, self.config)
        model = self.embedder()
        target = (
            self.open_global(embedder=model) if to == "global" else Workspace(root, embedder=model)
        )
        with target:
            entry = target.pool(pool).write(key, content, who, metadata={"from": str(self.root)})
            target.sync()
        return entry

    def sync_from_parent(self) -> ParentSync:
        """Pull the parent's pool entries that are newer than those this workspace took, each
        through the resolver mdmem.toml names for its pool (``[scopes] resolvers``); reports
        what changed, key by key."""
        from mdmem.memory.resolvers import sync_pools

        parent = self.parent()
        if parent is None:
            raise ConfigError(f"{self.root / CONFIG_NAME}: no parent to sync from")
        resolvers = self.config.scopes.resolvers
        origin = str(parent.root)
        return sync_pools(parent.pools(), parent.pool, self.pool, resolvers, self.agent, origin)

    def _require_full(self, what: str) -> None:
        if self.mode != "full":
            raise ModeError(
                f"{what} is written in full mode only; this workspace is minimal "
                "(switch with `mdmem mode full`)"
            )

    def _full(self, rel: str) -> EditFile:
        def write(edit: Any) -> str:
            self._require_full(rel)
            return self.files.write(rel, edit)

        return write

    def _written_before(self, rel: str) -> bool:
        return self._writer is not None and self._writer.seen(rel) is not None

    # ---- context, compaction, extraction ----------------------------------------------------

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

        return build_context(self, query, budget_tokens, model, agent)

    @property
    def distiller(self) -> Distiller:
        """Compaction and extraction over this workspace's files."""
        from mdmem.distill.workflow import Distiller

        embed = lambda: e.embed if (e := self.embedder()) is not None else None  # noqa: E731
        sessions = self.session_files  # (which starts the automatic promotion: tiers.auto)
        auto = self.auto_promote.after_compact if self.auto_promote is not None else None
        return Distiller(self.config, self.documents, self.files, sessions, embed, auto)

    def should_compact(self, messages: Conversation) -> bool:
        """True when ``messages`` are past ``compact.threshold_tokens`` (default 70,000),
        counted with the configured model's tokenizer (or the estimate)."""
        return self.distiller.should_compact(messages)

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
        return self.distiller.compact(
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
        return self.distiller.extract(source, offline=offline, dry_run=dry_run, **llm_kwargs)

    def consolidate(
        self,
        *,
        dry_run: bool = False,
        offline: bool = False,
        by_importance: bool = False,
        **llm_kwargs: Any,
    ) -> ConsolidateReport:
        """Merge old, rarely used memories that say the same thing, each merge checked for
        fidelity first; the originals go to ``## Archive`` with ``consolidated_into=``.

        The model merges when ``llm.model`` is set and ``offline`` is false, else an
        extractive merge. Without embeddings nothing is done unless ``by_importance`` (keep the
        ``consolidate.threshold`` most important memories, archive the rest). Hand-written and
        hand-edited entries are only suggested. The report goes to ``.mdmem/consolidation/``;
        ``dry_run`` writes nothing and reports the diff.
        """
        run = self._consolidator().run
        return run(offline=offline, dry_run=dry_run, by_importance=by_importance, **llm_kwargs)

    def _consolidator(self) -> Consolidator:
        from mdmem.distill.consolidate import Consolidator
        from mdmem.tokens import token_counter

        embed = lambda: e.embed if (e := self.embedder()) is not None else None  # noqa: E731
        return Consolidator(
            self.config,
            self.documents,
            self.files,
            self.redactor,
            embed,
            self._access_counts,
            self.state_dir,
            token_counter(self.config.context.model or self.config.llm.model or None),
        )

    def _access_counts(self, keys: Sequence[str]) -> dict[str, int]:
        """The index's access counts of ``keys`` for consolidation: a key it has no row for
        counts 0 once the index has counted for ``consolidate.min_age_days``, else it is left
        out (recently used)."""
        import datetime as dt

        from mdmem.distill.consolidate import counted

        days = self.config.consolidate.min_age_days
        counts = self.index.access_counts(keys)
        return counted(counts, keys, self.index.access_since(), dt.date.today(), days)

    def restore_archived(self, entry: str | Entry) -> RestoreReport:
        """Undo a consolidation: an archived original comes back alone; a merged memory's
        originals all come back and the merged memory goes to the archive (a merged memory a
        person deleted still brings its originals back). Nothing is deleted."""
        from mdmem.memory.unarchive import restore

        return restore(self.documents, self.files, entry if isinstance(entry, str) else entry.id)

    def relate(self, entry: str | Entry, other: str, kind: str) -> Entry:
        """Record that ``entry`` supports, contradicts or refines ``other`` (an id): written in
        ``entry``'s metadata (``contradicts=m-…``), where a person can see and edit it."""
        from mdmem.memory.relations import relate

        return relate(self.documents, self.files, self.store.expected(entry), other, kind)

    def related(self, entry_id: str) -> list[Relation]:
        """Relations from and to ``entry_id`` across the workspace; one whose other end is
        nowhere has ``target_found=False``. From the index's relations table when it is in
        step with the files, else read from the files."""
        from mdmem.memory.relations import involving

        indexed = self._indexed_relations(entry_id)
        return indexed if indexed is not None else involving(self.documents, entry_id)

    def contradicted(self) -> dict[str, list[str]]:
        """Open contradictions: id → the active memories that contradict it (what
        ``search --explain`` shows as "contradicted by m-…")."""
        from mdmem.memory.relations import contradicted, open_contradictions

        indexed = self._indexed_relations(kind="contradicts")
        if indexed is not None:
            return open_contradictions(indexed)
        return contradicted(self.all_documents().entries(include_archived=True))

    def _indexed_relations(
        self, entry_id: str | None = None, kind: str | None = None
    ) -> list[Relation] | None:
        """The index's relations table, or None (an index that cannot be opened, or one out of
        step with the files): the caller reads the files."""
        from mdmem.errors import MdmemError

        try:
            lookup = getattr(self.index, "relations", None)
            return None if lookup is None else lookup(entry_id, kind)
        except (MdmemError, OSError):  # (the index says None for its own errors)
            return None

    def stats(self) -> Stats:
        """Memories by type and file, average importance, tokens per tier, archived counts, the
        most and least returned memories, search latency p50/p99 over recent searches, the last
        consolidation's report. Changes nothing; never loads the embedding model."""
        from mdmem.distill.stats import collect

        tiers = [t.to_dict() for t in self.tiers()]
        return collect(
            self.documents, lambda keys: self.index.access_counts(keys), self.state_dir, tiers
        )

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
            lambda dry_writer: self._consolidator().run(offline=True, writer=dry_writer),
            lambda keys: self.index.access_counts(keys),
            token_counter(self.config.context.model or self.config.llm.model or None),
            self.agent,
            self.redactor,
        )

    def tiers(self) -> list[Tier]:
        """The memory tiers L1-L4: tokens, budget, items, and what the next promotion from
        each would do. Changes nothing."""
        return self.promoter.tiers()

    def promote(self, *, dry_run: bool = False) -> PromoteReport:
        """Run the tier promotions that are due (L2 → session summary, L3 → lasting memories,
        L4 → consolidation) and archive old compacted sessions; ``dry_run`` writes nothing
        and reports the diff."""
        return self.promoter.run(dry_run=dry_run)

    async def abuild_context(self, query: str | None = None, **kwargs: Any) -> Context:
        """:meth:`build_context` for async agents (a query may load the model and search)."""
        return await asyncio.to_thread(self.build_context, query, **kwargs)

    async def acompact(self, source: Conversation = None, **kwargs: Any) -> CompactReport:
        """:meth:`compact` for async agents: the model call runs in a worker thread."""
        return await asyncio.to_thread(self.compact, source, **kwargs)

    async def aextract(self, source: Conversation = None, **kwargs: Any) -> ExtractReport:
        """:meth:`extract` for async agents: the model call runs in a worker thread."""
        return await asyncio.to_thread(self.extract, source, **kwargs)


def _make_embedder(config: Config) -> Embedder:
    """The configured model; constructing it loads nothing (that happens on first use)."""
    cfg = config.embedding
    if cfg.provider == "litellm":
        from mdmem.index.embed import LiteLLMEmbedder

        return LiteLLMEmbedder(cfg.model, cfg.batch_size, cfg.api_base, cfg.api_key_env)
    from mdmem.index.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, cfg.device, cfg.threads)
