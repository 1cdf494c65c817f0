"""The named parts of a workspace past the daily calls: ``ws.index``, ``ws.files``,
``ws.sharing`` and ``ws.lifecycle`` (``ws.task``, ``ws.world`` and ``ws.sessions`` are the
memory files' own classes). Each is a thin view over the workspace's :class:`Wiring`."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from mdmem.config import CONFIG_NAME, check_name
from mdmem.errors import ConfigError
from mdmem.workspace.wiring import Wiring

if TYPE_CHECKING:
    from mdmem.distill.consolidate import ConsolidateReport
    from mdmem.distill.promote import AutoPromote, PromoteReport
    from mdmem.distill.stats import Stats
    from mdmem.index.backend import IndexBackend, IndexStatus
    from mdmem.index.embed import Embedder
    from mdmem.index.postgres.copy import Copied
    from mdmem.index.sync import Progress, SyncReport
    from mdmem.markdown.entries import Entry
    from mdmem.markdown.parse import Document
    from mdmem.memory.documents import DocumentSet
    from mdmem.memory.relations import Relation
    from mdmem.memory.restore import RestoreReport
    from mdmem.memory.scan import ScanResult
    from mdmem.memory.tiers import Tier
    from mdmem.redact import Redactor
    from mdmem.sharing.git_sync import SyncReport as GitSyncReport
    from mdmem.sharing.pool import Pool, PoolEntry
    from mdmem.sharing.resolvers import ParentSync
    from mdmem.writes.journal import Journal, JournalEntry

READ_MAX_ENTRIES = 5
"""A line range over more memories than this is a page of the file, not a read of each."""


class Index:
    """``ws.index``: the index beside the files (``mdmem index``, ``mdmem status``)."""

    def __init__(self, wiring: Wiring) -> None:
        self._w = wiring

    @property
    def _backend(self) -> IndexBackend:
        """The index itself (SQLite or PostgreSQL), for tools that need its own calls."""
        return self._w.backend

    def update(
        self, *, full: bool = False, embed: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        """Bring the index up to date with the files (incremental unless ``full``)
        (``mdmem index``)."""
        return self._w.sync(full=full, embed=embed, progress=progress)

    def status(self) -> IndexStatus:
        """What the index holds and how fresh it is, and the watcher's state; never loads the
        embedding model (``mdmem status``)."""
        from mdmem.live.watch import watcher_info

        self._w.mark_interrupted()
        status = self._w.backend.status(self._w.model_id())
        return replace(status, watcher=watcher_info(self._w.root))

    def copy_to_postgres(self, url: str | None = None) -> Copied:
        """Copy this workspace's SQLite index (brought up to date first) into PostgreSQL,
        embedding nothing again; ``url`` defaults to index.url, then ``$MDMEM_INDEX_URL``
        (``mdmem index --to-postgres``)."""
        from mdmem.index.postgres.copy import copy_workspace

        w = self._w
        return copy_workspace(
            w.root,
            w.state_dir,
            w.config.files,
            w.embedder,
            redactor=w.redactor,
            config=w.config.index,
            url=url,
        )

    def embedder(self) -> Embedder | None:
        """The embedding model (loaded on first use), or None when embeddings are off."""
        return self._w.embedder()

    def _includes(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``files.include`` / ``files.exclude`` make this file part of the index."""
        from mdmem.memory.scan import indexed_by

        return indexed_by(self._w.config.files, self._w.documents.resolve(path, "file")[0])

    def _note_read(self, path: str | os.PathLike[str], start_line: int, end_line: int) -> None:
        """Count a read of these lines of a file (an interface showing a citation's lines) as
        an access of each memory in them; a range over more than ``READ_MAX_ENTRIES`` memories
        is a page of the file and counts none. Never raises."""
        try:
            entries = self._w.documents.read(path).entries
        except Exception:  # the read itself says what is wrong with the file
            return
        ids = [e.id for e in entries if e.start_line <= end_line and e.end_line >= start_line]
        if 0 < len(ids) <= READ_MAX_ENTRIES:
            self._w.count_reads(ids)


class Files:
    """``ws.files``: the workspace's files as the program reads and writes them, and the
    versions its writes replaced (``mdmem recover``)."""

    def __init__(self, wiring: Wiring) -> None:
        self._w = wiring

    @property
    def _state_dir(self) -> Path:
        """``.mdmem/``: what mdmem derives and keeps beside the files."""
        return self._w.state_dir

    def _resolve(self, name: str | os.PathLike[str], what: str = "file") -> tuple[str, Path]:
        """A name given by a user or agent → (relative path, absolute path), inside only."""
        return self._w.documents.resolve(name, what)

    def read(self, path: str | os.PathLike[str]) -> Document:
        """Parse one file. Raises FileProblem (naming the file and line) if it can't be read."""
        return self._w.documents.read(path)

    def all(self) -> DocumentSet:
        """Parse every workspace file; unreadable ones become problems, not exceptions."""
        return self._w.documents.all()

    def _scan(self) -> ScanResult:
        """Which files belong to the workspace (``.gitignore``, ``files.include``, symlinks)."""
        return self._w.documents.scan()

    @property
    def _redactor(self) -> Redactor:
        """Masks secrets as ``[REDACTED:kind]`` (``[redact]`` in mdmem.toml): what every write
        and every text shown to an agent goes through."""
        return self._w.redactor

    def edit(
        self, path: str | os.PathLike[str], edit: Callable[[str], str], *, create: bool = True
    ) -> str:
        """Apply ``edit`` (old text → new text) to any text file of the workspace through the
        safe writes (lock, compare-and-swap, journal, no new secrets); returns the text now on
        disk. For integrations that keep files of their own (Claude's memory tool, imports)."""
        return self._w.files.write(self._resolve(path)[0], edit, create=create)

    def _locked(self, rel: str, display: str) -> AbstractContextManager[object]:
        """Hold the file's write lock (every program write takes it): for an integration that
        reads, decides and writes as one step."""
        return self._w.writer.locked(rel, display)

    @property
    def _journal(self) -> Journal:
        """``.mdmem/journal/``: every version a program write replaced."""
        return self._w.writer.journal

    def versions(self, path: str | os.PathLike[str]) -> list[JournalEntry]:
        """Earlier versions of a file, newest first: the bytes each program write replaced
        (and saves merged after one) (``mdmem recover``)."""
        rel, _ = self._resolve(path)
        return self._w.writer.journal.entries(rel)

    def recover(self, path: str | os.PathLike[str], version: str) -> JournalEntry:
        """Put an earlier version back (by id, or 1 = newest), through the safe writes: the
        version it replaces is kept in the journal too (``mdmem recover --put-back``)."""
        from mdmem.writes.safe_writer import decode_markdown

        rel, _ = self._resolve(path)
        entry = self._w.writer.journal.find(rel, version)
        text = decode_markdown(rel, entry.read_bytes(), self._w.config.max_file_bytes)
        self._w.files.write(rel, lambda _current: text, exact=True)
        return entry


W = TypeVar("W")


class Sharing(Generic[W]):
    """``ws.sharing``: pools, the parent workspace and GLOBAL, and git (docs/sharing.md)."""

    def __init__(
        self,
        wiring: Wiring,
        open_workspace: Callable[[Path, Embedder | None], W],
        open_global: Callable[[Embedder | None], W],
    ) -> None:
        self._w = wiring
        self._open = open_workspace
        self._open_global = open_global

    def pool(self, name: str = "default") -> Pool:
        """The shared pool ``shared/<name>.md``: versioned keys every agent reads and writes
        (``.write``, ``.read``, ``.list``, ``.delete``, callbacks, ``.watch()``). One object
        per name, so its callbacks see every write this workspace makes."""
        return self._w.pool(name)

    def pools(self) -> list[str]:
        """The names of the workspace's shared pools (``shared/*.md``)."""
        return self._w.pool_names()

    def parent(self) -> W | None:
        """The parent workspace (``parent = "..."`` in mdmem.toml), or None. ConfigError for
        a missing folder; ParentCycleError, naming it, for a chain that loops."""
        from mdmem.sharing.scopes import parent_chain

        chain = parent_chain(self._w.root, self._w.config)
        return self._open(chain[0].root, self._w.embedder()) if chain else None

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
        from mdmem.sharing.scopes import publish_target

        w = self._w
        who = check_name(writer or w.config.agent, "writer")
        root = publish_target(to, who, w.root, w.config)
        model = w.embedder()
        target: Any = self._open_global(model) if to == "global" else self._open(root, model)
        with target:
            entry: PoolEntry = target.sharing.pool(pool).write(
                key, content, who, metadata={"from": str(w.root)}
            )
            target.index.update()
        return entry

    def sync_from_parent(self) -> ParentSync:
        """Pull the parent's pool entries that are newer than those this workspace took, each
        through the resolver mdmem.toml names for its pool (``[scopes] resolvers``); reports
        what changed, key by key."""
        from mdmem.sharing.resolvers import sync_pools

        parent: Any = self.parent()
        if parent is None:
            raise ConfigError(f"{self._w.root / CONFIG_NAME}: no parent to sync from")
        w = self._w
        theirs = parent.sharing
        resolvers = w.config.scopes.resolvers
        origin = str(parent.root)
        return sync_pools(theirs.pools(), theirs.pool, w.pool, resolvers, w.config.agent, origin)

    def sync(
        self, *, dry_run: bool = False, rebase: bool = True, message: str | None = None
    ) -> GitSyncReport:
        """Share the workspace through its git repository: commit its files (only them),
        pull (rebase, or merge), re-index, push; never forced (``mdmem sync``)."""
        from mdmem.sharing.git_sync import sync

        w = self._w
        return sync(
            w.root, w.sync, dry_run=dry_run, rebase=rebase, message=message, settle=w.settle
        )


class Lifecycle:
    """``ws.lifecycle``: memories over time: consolidation and its undo, the links between
    memories, the tiers and their promotion, the counts (docs/lifecycle.md)."""

    def __init__(self, wiring: Wiring) -> None:
        self._w = wiring

    @property
    def auto_promote(self) -> AutoPromote | None:
        """The promotion that runs as sessions are written (``tiers.auto``): ``.reports``,
        ``.wait()``; None until this workspace first uses its sessions."""
        return self._w.auto_promote

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
        run = self._w.consolidator().run
        return run(offline=offline, dry_run=dry_run, by_importance=by_importance, **llm_kwargs)

    def restore(self, entry: str | Entry) -> RestoreReport:
        """Undo a consolidation: an archived original comes back alone; a merged memory's
        originals all come back and the merged memory goes to the archive (a merged memory a
        person deleted still brings its originals back). Nothing is deleted."""
        from mdmem.memory.restore import restore

        w = self._w
        return restore(w.documents, w.files, entry if isinstance(entry, str) else entry.id)

    def relate(self, entry: str | Entry, other: str, kind: str) -> Entry:
        """Record that ``entry`` supports, contradicts or refines ``other`` (an id): written in
        ``entry``'s metadata (``contradicts=m-…``), where a person can see and edit it."""
        from mdmem.memory.relations import relate

        w = self._w
        return relate(w.documents, w.files, w.store.expected(entry), other, kind)

    def related(self, entry_id: str) -> list[Relation]:
        """Relations from and to ``entry_id`` across the workspace; one whose other end is
        nowhere has ``target_found=False``. From the index's relations table when it is in
        step with the files, else read from the files."""
        from mdmem.memory.relations import involving

        indexed = self._w.indexed_relations(entry_id)
        return indexed if indexed is not None else involving(self._w.documents, entry_id)

    def contradicted(self) -> dict[str, list[str]]:
        """Open contradictions: id → the active memories that contradict it (what
        ``search --explain`` shows as "contradicted by m-…")."""
        from mdmem.memory.relations import contradicted, open_contradictions

        indexed = self._w.indexed_relations(kind="contradicts")
        if indexed is not None:
            return open_contradictions(indexed)
        return contradicted(self._w.documents.all().entries(include_archived=True))

    def stats(self) -> Stats:
        """Memories by type and file, average importance, tokens per tier, archived counts, the
        most and least returned memories, search latency p50/p99 over recent searches, the last
        consolidation's report. Changes nothing; never loads the embedding model."""
        from mdmem.distill.stats import collect

        w = self._w
        tiers = [t.to_dict() for t in self.tiers()]
        return collect(w.documents, lambda keys: w.backend.access_counts(keys), w.state_dir, tiers)

    def tiers(self) -> list[Tier]:
        """The memory tiers L1-L4: tokens, budget, items, and what the next promotion from
        each would do. Changes nothing."""
        return self._w.promoter.tiers()

    def promote(self, *, dry_run: bool = False) -> PromoteReport:
        """Run the tier promotions that are due (L2 → session summary, L3 → lasting memories,
        L4 → consolidation) and archive old compacted sessions; ``dry_run`` writes nothing
        and reports the diff."""
        return self._w.promoter.run(dry_run=dry_run)
