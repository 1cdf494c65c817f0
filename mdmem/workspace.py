"""Workspace: the one composition root. Finds the folder, reads config, wires the parts."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from mdmem import edits
from mdmem.config import CONFIG_NAME, Config, Mode, RedactConfig, check_name, load_config
from mdmem.entries import (
    MEMORY_TYPES,
    SECTION_TITLES,
    Entry,
    check_importance,
    check_type,
    new_id,
)
from mdmem.errors import (
    ConflictError,
    EntryNotFoundError,
    FileProblem,
    ModeError,
    WorkspaceNotFoundError,
)
from mdmem.files import (
    MISSING_WAIT_S,
    EditNotApplicable,
    SafeWriter,
    Target,
    create_exclusive,
    decode_markdown,
    read_markdown,
)
from mdmem.layout import STATE_DIR, find_root, private_file
from mdmem.markdown import Document, Problem, parse_document
from mdmem.paths import workspace_path
from mdmem.redact import Redactor
from mdmem.scan import ScanResult, scan
from mdmem.text import same_text

if TYPE_CHECKING:
    from mdmem.compact import CompactMemory
    from mdmem.context import Context, Source
    from mdmem.forget import ForgetReport
    from mdmem.index.embed import Embedder
    from mdmem.index.sync import Index, IndexStatus, Progress, SyncReport
    from mdmem.journal import JournalEntry
    from mdmem.reports import CompactReport, ExtractReport
    from mdmem.search import Hit, SearchResults
    from mdmem.sessions import InterruptedSweep, Session, SessionRecord
    from mdmem.task import Task
    from mdmem.watch import Watcher
    from mdmem.world import World

log = logging.getLogger("mdmem")
Conversation = Any
"""Messages (OpenAI-style dicts), a transcript path, a session id, Session or SessionRecord."""
SEARCH_LOCK_WAIT_S = 5.0
SEARCH_SYNC_MAX_BYTES = 1_000_000
"""A changed file larger than this is not re-indexed by a search (that would take seconds):
the search lists it as stale, and ``mdmem index`` or the watcher indexes it."""
PARSE_CACHE_FILES = 64
MEMORY_FILE = "memory.md"
LEARNINGS_FILE = "learnings.md"
TASK_FILE = "task_process.md"
WORLD_FILE = "world_state.md"
COMPACT_FILE = ".compact_memory.md"
FULL_ONLY = {"task_process.md": TASK_FILE, "world_state.md": WORLD_FILE}

# template file → workspace file, in the order `init` writes them
TEMPLATES = {
    "mdmem.toml": CONFIG_NAME,
    "memory.md": MEMORY_FILE,
    "learnings.md": LEARNINGS_FILE,
    "task_process.md": TASK_FILE,
    "world_state.md": WORLD_FILE,
    "compact_memory.md": COMPACT_FILE,
    "gitignore": ".gitignore",
}


@dataclass(frozen=True)
class Snapshot:
    """Every readable document of the workspace, and what could not be read."""

    documents: tuple[Document, ...]
    problems: tuple[Problem, ...]

    def entries(self, include_archived: bool = False) -> Iterator[Entry]:
        for doc in self.documents:
            for entry in doc.entries:
                if include_archived or not entry.archived:
                    yield entry


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
        self.config = config if config is not None else load_config(self.root)
        self._embedder = embedder
        self._index: Index | None = None
        # parsed documents by path, with the bytes they came from (parsing is the slow part)
        self._parsed: OrderedDict[str, tuple[bytes, Document]] = OrderedDict()
        self._parsed_lock = threading.Lock()
        self._writer: SafeWriter | None = None
        self._sweep: InterruptedSweep | None = None
        self._redactor: tuple[RedactConfig, Redactor] | None = None

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, mode={self.mode!r})"

    # ---- finding and creating -------------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, *, embedder: Embedder | None = None
    ) -> Workspace:
        """Open ``path``; else ``$MDMEM_WORKSPACE``; else the nearest folder upwards holding
        ``mdmem.toml`` or ``memory.md`` (like git finds its repository)."""
        return cls(find_root(path), embedder=embedder)

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str] = ".",
        mode: Mode = "full",
        agent: str = "default",
    ) -> Workspace:
        """Create a workspace from the templates. Existing files are never overwritten."""
        if mode not in ("minimal", "full"):
            raise ValueError(f"mode must be 'minimal' or 'full', got {mode!r}")
        check_name(agent, "agent")
        root = Path(path).absolute()
        root.mkdir(parents=True, exist_ok=True)
        for template in TEMPLATES:
            if mode == "minimal" and template in FULL_ONLY:
                continue  # minimal mode writes no task or world files
            _from_template(root, template, mode=mode, agent=agent)
        if mode == "full":
            (root / ".sessions").mkdir(exist_ok=True)
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
        return scan(self.root, self.config.files)

    def resolve(self, name: str | os.PathLike[str], what: str = "file") -> tuple[str, Path]:
        """A name given by a user or agent → (relative path, absolute path), inside only."""
        return workspace_path(self.root, name, what)

    def indexes(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``files.include`` / ``files.exclude`` make this file part of the index."""
        from mdmem.scan import indexed_by

        return indexed_by(self.config.files, self.resolve(path)[0])

    def read(self, path: str | os.PathLike[str]) -> Document:
        """Parse one file. Raises FileProblem (naming the file and line) if it can't be read."""
        rel, absolute = self.resolve(path)
        if not rel.endswith(".md") and not self.indexes(rel):
            raise FileProblem(rel, "not a Markdown file (*.md)")
        try:
            data, text = read_markdown(absolute, rel, self.config.max_file_bytes)
        except FileProblem:
            if self._writer is None or self._writer.seen(rel) is None or absolute.exists():
                raise
            # a file a program write made, gone: an editor's save by rename, in its middle
            time.sleep(MISSING_WAIT_S)
            data, text = read_markdown(absolute, rel, self.config.max_file_bytes)
        with self._parsed_lock:
            cached = self._parsed.get(rel)
            if cached is not None and cached[0] == data:  # same bytes: the same document
                self._parsed.move_to_end(rel)
                return cached[1]
        doc = parse_document(rel, text)
        with self._parsed_lock:
            self._parsed[rel] = (data, doc)
            if len(self._parsed) > PARSE_CACHE_FILES:
                self._parsed.popitem(last=False)
        return doc

    def snapshot(self) -> Snapshot:
        """Parse every workspace file; unreadable ones become problems, not exceptions."""
        result = self.scan()
        documents: list[Document] = []
        problems = list(result.problems)
        for stat in result.files:
            try:
                doc = self.read(stat.path)
            except FileProblem as exc:
                problems.append(Problem(exc.path, exc.reason, exc.line))
                continue
            documents.append(doc)
            problems.extend(doc.problems)
        return Snapshot(tuple(documents), tuple(problems))

    def entries(
        self, path: str | os.PathLike[str] | None = None, *, include_archived: bool = False
    ) -> list[Entry]:
        """Entries of one file, or of the whole workspace (unreadable files are skipped)."""
        if path is not None:
            doc = self.read(path)
            return [e for e in doc.entries if include_archived or not e.archived]
        return list(self.snapshot().entries(include_archived))

    def get(self, entry_id: str) -> Entry:
        """The entry with this id, wherever it is (archived ones included).

        Not found at first, it is looked for twice more over a third of a second: an editor
        saving by rename (vim, JetBrains) takes the file away for a moment."""
        for pause in (0.0, 0.1, 0.25):
            time.sleep(pause)
            for entry in self.snapshot().entries(include_archived=True):
                if entry.id == entry_id:
                    return entry
        raise EntryNotFoundError(f"no entry with id {entry_id!r} in {self.root}")

    # ---- index and search -----------------------------------------------------------------

    @property
    def index(self) -> Index:
        if self._index is None:
            from mdmem.index.sync import Index

            with contextlib.suppress(OSError):  # (a read-only mount: searched as it is)
                private_file(self.state_dir / "index.lock")  # owner-only, like all of .mdmem/
            self._index = Index(
                self.root,
                self.state_dir / "index.db",
                self.config.files,
                self.embedder,
                on_message=log.warning,
                redactor=self.redactor,
            )
        return self._index

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
        track_access: bool = True,
    ) -> SearchResults:
        """The passages that answer ``query``, best first, each citing ``path:start-end``.

        Changed files are re-indexed first, so a hand edit is seen at once; if a file cannot be
        read, the results say so in ``.stale``.
        """
        from mdmem.search import Filters, SearchResults, check_k, search

        k = self.config.search.k if k is None else check_k(k)
        mode = mode or self.config.search.mode
        filters = Filters(type, path, agent, session, since, until, include_archived)
        # the index holds masked text, and a remote embedding model must not get a secret
        query = self.redactor.mask(query)

        def run() -> tuple[SyncReport, list[Hit]]:
            # readers never wait long for a writer: past a few seconds (or when the index
            # cannot be written) it is searched as it is, and the files not yet indexed are
            # reported as stale
            report = self.index.sync(
                embed=mode != "keyword",
                lock_timeout=SEARCH_LOCK_WAIT_S,
                defer_bytes=SEARCH_SYNC_MAX_BYTES,
            )
            hits = search(
                self.index,
                self.index.embedder() if mode != "keyword" else None,
                query,
                k=k,
                mode=mode,
                config=self.config.search,
                filters=filters,
                track_access=track_access,
            )
            return report, hits

        with self.index.searching():
            report, hits = self.index.recover(run)  # a damaged index is rebuilt, then run again
        problems = [str(p) for p in report.problems]
        if report.readonly:
            problems.insert(0, report.readonly)
        # the index holds masked text; a file it could not re-read may hold older text
        hits = [self._masked_hit(hit) for hit in hits]
        return SearchResults(hits, stale=report.stale, problems=problems, mode=mode)

    async def asearch(self, query: str, k: int | None = None, **filters: Any) -> SearchResults:
        """:meth:`search` for async agents: runs in a worker thread, never blocks the loop."""
        import asyncio

        from mdmem.search import check_k

        if k is not None:
            check_k(k)  # here, not in the worker thread
        return await asyncio.to_thread(self.search, query, k, **filters)

    def status(self) -> IndexStatus:
        """What the index holds and how fresh it is; never loads the embedding model."""
        from mdmem.index.sync import index_status

        self.mark_interrupted()
        model = None
        if self.config.embedding.model or self._embedder is not None:
            model = (self._embedder or _make_embedder(self.config)).model_id  # loads nothing
        from mdmem.watch import watcher_info

        status = self.index.recover(lambda: index_status(self.index, model))
        return replace(status, watcher=watcher_info(self.root))

    def watch(self, *, serve: bool = False) -> Watcher:
        """Start watching in a background thread; re-indexes hand edits as they happen.

        Use as ``with ws.watch():`` or keep the returned Watcher and call ``stop()``. With
        ``serve``, it also answers ``mdmem search`` over a local socket (warm model).
        """
        from mdmem.watch import Watcher

        cfg = self.config.watch
        return Watcher(
            self,
            debounce=cfg.debounce_ms / 1000,
            reconcile=cfg.reconcile_seconds,
            heartbeat=cfg.heartbeat_seconds,
            serve=serve,
        ).start()

    @property
    def writer(self) -> SafeWriter:
        """The safe writer every program write goes through (lock, swap, journal)."""
        if self._writer is None:
            cfg = self.config.write
            self._writer = SafeWriter(
                self.state_dir,
                late_save_s=cfg.late_save_ms / 1000,
                journal_versions=cfg.journal_versions,
                journal_bytes=int(cfg.journal_mb * 1_000_000),
            )
        return self._writer

    def edit_file(
        self, path: str | os.PathLike[str], edit: Callable[[str], str], *, create: bool = True
    ) -> str:
        """Apply ``edit`` (old text → new text) to any text file of the workspace through the
        safe writes (lock, compare-and-swap, journal, no new secrets); returns the text now on
        disk. For integrations that write whole files (Claude's memory tool)."""
        rel, absolute = self.resolve(path)
        return self._write(rel, absolute, edit, create=create)

    def versions(self, path: str | os.PathLike[str]) -> list[JournalEntry]:
        """Earlier versions of a file, newest first: the bytes each program write replaced
        (and saves merged after one), kept in ``.mdmem/journal/`` (``mdmem recover``)."""
        rel, _ = self.resolve(path)
        return self.writer.journal.entries(rel)

    def restore(self, path: str | os.PathLike[str], version: str) -> JournalEntry:
        """Put an earlier version back (by id, or 1 = newest), through the safe writes: the
        version it replaces is kept in the journal too."""
        rel, absolute = self.resolve(path)
        entry = self.writer.journal.find(rel, version)
        text = decode_markdown(rel, entry.read_bytes(), self.config.max_file_bytes)
        self._write(rel, absolute, lambda _current: text, exact=True)
        return entry

    def close(self) -> None:
        """Close the index; wait for the late-save windows of this workspace's writes."""
        if self._writer is not None:
            self._writer.guard.wait(timeout=self._writer.late_save_s + 5.0)
        if self._index is not None:
            self._index.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

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
        Remembering the exact text already in the file returns the existing entry. Secrets in
        ``text`` are masked before it is written; ``Entry.redacted`` says how many.
        """
        check_type(type)
        check_importance(importance)
        masked = self.redactor.redact(edits.check_text(text))
        text = masked.text
        if source is not None:
            check_name(source, "source session")
        rel, absolute = self.resolve(file or self._file_for(type))
        if not rel.endswith(".md"):
            raise FileProblem(rel, "memories are written to Markdown files (*.md)")
        entry_id = new_id()
        meta = {
            "id": entry_id,
            "type": type,
            "importance": importance,
            "created": _today(),
            "source": source,
        }
        found: list[Entry] = []

        def edit(current: str) -> str:
            found.clear()
            key = same_text(text)
            doc = parse_document(rel, current)
            for entry in doc.entries:
                if not entry.archived and same_text(entry.text) == key:
                    found.append(entry)
                    return current
            block = edits.render_item(text, meta, doc.newline)
            title = section or SECTION_TITLES.get(type, type.title())
            return edits.insert_entry(doc, type, title, block)

        result = self._write(rel, absolute, edit)
        if found:
            return replace(found[0], redacted=masked.count)
        return replace(_entry_by_id(parse_document(rel, result), entry_id), redacted=masked.count)

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
        entry = self._expected(entry)
        meta: dict[str, object] = {"id": entry.id, "updated": _today()}
        if importance is not None:
            meta["importance"] = check_importance(importance)
        if type is not None:
            meta["type"] = check_type(type)
        masked = 0
        if text is not None:
            redaction = self.redactor.redact(edits.check_text(text))
            text, masked = redaction.text, redaction.count
        rel, absolute = self.resolve(entry.path)

        def edit(current: str) -> str:
            _same_entry(parse_document(rel, current), entry)
            return edits.rewrite_entry(current, rel, entry.id, meta, text)

        result = self._write(rel, absolute, edit)
        return replace(_entry_by_id(parse_document(rel, result), entry.id), redacted=masked)

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
        if importance is not None:
            check_importance(importance)
        if source is not None:
            check_name(source, "source session")
        old = self._expected(entry)
        if old.archived:
            raise EditNotApplicable(f"{old.id} is already archived in {old.path}")
        rel, absolute = self.resolve(old.path)
        masked = 0
        try:
            new = self.get(by)
            new_id_ = new.id
            new_text = None
        except EntryNotFoundError:
            redaction = self.redactor.redact(edits.check_text(by))
            new_text, masked = redaction.text, redaction.count
            new_id_ = new_id()
        stamp = {"superseded_by": new_id_, "superseded": _today()}

        def edit(current: str) -> str:
            doc = parse_document(rel, current)
            _same_entry(doc, old)
            text = current
            if new_text is not None:
                type_ = old.type if old.type in MEMORY_TYPES else "fact"
                meta = {
                    "id": new_id_,
                    "type": type_,
                    "importance": old.importance if importance is None else importance,
                    "created": _today(),
                    "source": source,
                    "supersedes": old.id,
                }
                block = edits.render_item(new_text, meta, doc.newline)
                title = SECTION_TITLES.get(type_, type_.title())
                text = edits.insert_entry(doc, type_, title, block)
            return edits.archive_entry(text, rel, old.id, stamp)

        result = self._write(rel, absolute, edit)
        if new_text is None:
            return self.get(new_id_)
        return replace(_entry_by_id(parse_document(rel, result), new_id_), redacted=masked)

    def forget(self, entry: str | Entry) -> ForgetReport:
        """Delete an entry for good: the one true delete, for a leaked secret or a person's data.

        Removes its lines from its file and every archived copy of the same text (through the
        safe writes), its chunks from the index (deleted bytes zeroed, FTS5 segments merged,
        WAL truncated), its cached vectors, and any write-journal or ``.trash/`` file holding
        it. Git history, backups and synced copies are out of reach: ``warnings`` says so.
        """
        from mdmem import forget as fg

        target = self._expected(entry)
        doomed = fg.copies(target, self.snapshot().entries(include_archived=True))
        keys = {(e.path, e.id) for e in doomed}
        key = same_text(target.text)
        removed: list[tuple[Entry, str]] = []
        for rel in sorted({e.path for e in doomed}):

            def wanted(e: Entry, rel: str = rel) -> bool:
                return (rel, e.id) in keys or (e.archived and same_text(e.text) == key)

            removed += self._remove_entries(rel, wanted)
        texts = fg.needles([(target, target.text), *removed])
        journal = fg._scrub_journal(self.state_dir, texts)
        trash = fg._scrub_trash(self.root, texts)  # (before the index: it may index .trash/)
        chunks, vectors, truncated = self._forget_indexed({e.id for e in doomed}, removed)
        self.redactor.clear_memo()  # no copy left in this process's memory either
        warnings = [fg.GIT_WARNING]
        others = [  # (the files as they are now: what was removed is gone)
            f"{e.id} ({e.path}:{e.start_line})"
            for e in self.snapshot().entries(include_archived=True)
            if key in same_text(e.text)
        ]
        if others:
            listed = ", ".join(others)
            warnings.append(f"other entries hold the same text (forget them too): {listed}")
        if not truncated:
            warnings.append(
                "a reader in another process kept the index WAL open: its old pages leave when "
                "the last process using the index closes it"
            )
        return fg.ForgetReport(
            target.id,
            tuple(f"{e.path}:{e.start_line}-{e.end_line}" for e, _ in removed),
            chunks,
            vectors,
            tuple(p.relative_to(self.root).as_posix() for p in journal),
            tuple(p.relative_to(self.root).as_posix() for p in trash),
            truncated,
            tuple(warnings),
        )

    def _remove_entries(self, rel: str, wanted: Callable[[Entry], bool]) -> list[tuple[Entry, str]]:
        from mdmem.forget import remove_entries

        _, absolute = self.resolve(rel)
        cut: list[tuple[Entry, str]] = []

        def edit(current: str) -> str:
            text, found = remove_entries(current, rel, wanted)
            cut[:] = found
            return text

        self._write(rel, absolute, edit, create=False)
        with self._parsed_lock:
            self._parsed.pop(rel, None)
        return cut

    def _forget_indexed(
        self, ids: set[str], removed: list[tuple[Entry, str]]
    ) -> tuple[int, int, bool]:
        """Index rows, cached vectors, access counts and first-seen dates of the entries, gone
        with their bytes. Returns (rows, vectors, whether the WAL was truncated)."""
        from mdmem.index.chunks import sha
        from mdmem.index.purge import drop_unused_vectors, scrub

        index = self.index
        marks = ",".join("?" * len(ids))
        with index.searching():
            conn = index.conn
            rows = conn.execute(
                f"SELECT rowid, text, text_hash FROM chunks WHERE entry_id IN ({marks})",
                sorted(ids),
            ).fetchall()
            index.sync(embed=False)  # the files changed: their chunks are replaced
            plain = [sha(text) for _, text, _ in rows] + [sha(e.text) for e, _ in removed]
            conn.execute("BEGIN IMMEDIATE")
            try:
                for rowid, _, _ in rows:  # still there if a file could not be re-read
                    conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
                    conn.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
                vectors = drop_unused_vectors(conn, [h for _, _, h in rows])
                for access_key in [*ids, *plain]:
                    conn.execute("DELETE FROM access WHERE key = ?", (access_key,))
                for text_hash in plain:
                    conn.execute("DELETE FROM first_seen WHERE text_hash = ?", (text_hash,))
                index._bump_generation()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            truncated = scrub(conn)
        return len(rows), vectors, truncated

    # ---- modes ----------------------------------------------------------------------------

    def set_mode(self, mode: Mode) -> list[str]:
        """Switch to ``minimal`` or ``full`` in mdmem.toml (only the ``mode`` line changes).

        Never deletes a file; switching to full creates the task and world files (and
        ``.sessions/``) from the templates if they are missing. Returns the files created.
        """
        if mode not in ("minimal", "full"):
            raise ValueError(f"mode must be 'minimal' or 'full', got {mode!r}")
        rel, absolute = self.resolve(CONFIG_NAME)
        line = f'mode = "{mode}"'

        def edit(text: str) -> str:
            lines = text.splitlines(keepends=True)
            for n, current in enumerate(lines):
                if re.match(r"^\s*mode\s*=", current):
                    comment = re.search(r"\s+#.*$", current.rstrip("\r\n"))
                    ending = current[len(current.rstrip("\r\n")) :] or "\n"
                    lines[n] = line + (comment.group(0) if comment else "") + ending
                    return "".join(lines)
                if current.lstrip().startswith("["):  # top-level keys come before any table
                    lines.insert(n, line + "\n")
                    return "".join(lines)
            sep = "" if not text or text.endswith("\n") else "\n"
            return text + sep + line + "\n"

        self.writer.edit(Target(absolute, rel, 1_000_000), edit)
        self.config = load_config(self.root)
        created = []
        targets = [*FULL_ONLY] if mode == "full" else ["compact_memory.md"]
        for template in targets:
            if _from_template(self.root, template, mode=mode, agent=self.agent):
                created.append(TEMPLATES[template])
        if mode == "full":
            (self.root / ".sessions").mkdir(exist_ok=True)
        return created

    def _require_full(self, what: str) -> None:
        if self.mode != "full":
            raise ModeError(
                f"{what} is written in full mode only; this workspace is minimal "
                "(switch with `mdmem mode full`)"
            )

    def _file_writer(
        self, rel: str, what: str, *, create: bool = True
    ) -> Callable[[Callable[[str], str]], str]:
        def write(edit: Callable[[str], str]) -> str:
            self._require_full(what)
            _, absolute = self.resolve(rel)
            return self._write(rel, absolute, edit, create=create)

        return write

    def _reader(self, rel: str) -> Callable[[], Document | None]:
        def read() -> Document | None:
            if not (self.root / rel).exists():
                return None
            return self.read(rel)

        return read

    # ---- sessions, task, world -------------------------------------------------------------

    def session(self, title: str, agent: str | None = None) -> Session:
        """Record a session: ``with ws.session("fix login bug") as s: s.event(...)``.

        Full mode writes ``.sessions/YYYYMMDD_HHMMSS_<slug>.md`` as it goes (every event is
        on disk when the call returns); minimal mode keeps the session in memory only, ready
        to be compacted.
        """
        from mdmem.paths import slugify
        from mdmem.sessions import SESSIONS_DIR, Session, session_skeleton, writer_stamp

        agent = check_name(agent or self.agent, "agent")
        title = self.redactor(edits.check_text(title).split("\n", 1)[0])  # (and so the name)
        started = dt.datetime.now()
        base = f"{started.strftime('%Y%m%d_%H%M%S')}_{slugify(title)}"
        if self.mode != "full":
            return Session(
                base, title, agent, path=None, write=None, started=started, redactor=self.redactor
            )
        self.mark_interrupted()
        folder = self.root / SESSIONS_DIR
        folder.mkdir(exist_ok=True)
        data = session_skeleton(title, agent, started, writer=writer_stamp()).encode("utf-8")
        for n in range(1, 1000):
            stem = base if n == 1 else f"{base}-{n}"
            if create_exclusive(folder / f"{stem}.md", data):
                break
        else:
            raise ConflictError(f"{SESSIONS_DIR}/{base}.md: too many sessions with this name")
        rel = f"{SESSIONS_DIR}/{stem}.md"
        return Session(
            stem,
            title,
            agent,
            path=rel,
            write=self._file_writer(rel, "a session file", create=False),
            started=started,
            redactor=self.redactor,
        )

    def mark_interrupted(self) -> list[str]:
        """Mark sessions whose writer died (killed mid-run) ``interrupted`` and remove the temp
        files dead writers left in ``.sessions/``; returns the ids marked. Only sessions
        started on this host are looked at. Runs on its own when a session starts, on
        :meth:`status` and on :meth:`sync`; cheap when nothing changed."""
        from mdmem.sessions import SESSIONS_DIR, InterruptedSweep

        if self.mode != "full":
            return []
        if self._sweep is None:
            self._sweep = InterruptedSweep(
                self.root / SESSIONS_DIR,
                lambda name: self._file_writer(
                    f"{SESSIONS_DIR}/{name}", "a session file", create=False
                ),
            )
        return self._sweep.sweep()

    def sessions(
        self,
        agent: str | None = None,
        since: str | None = None,
        limit: int | None = None,
    ) -> list[SessionRecord]:
        """Recorded sessions, newest first: ``agent`` keeps one agent's own sessions,
        ``since`` (YYYY-MM-DD) the ones started on or after that day."""
        from mdmem.sessions import SESSIONS_DIR, is_stamped

        folder = self.root / SESSIONS_DIR
        names = sorted((p.name for p in folder.glob("*.md")), reverse=True)
        # Files named YYYYMMDD_HHMMSS_… are read newest first and only as far as needed;
        # files named otherwise (by hand) are always read, then everything is sorted.
        stamped = [n for n in names if is_stamped(n)]
        found = [r for n in names if not is_stamped(n) if (r := self._session_or_warn(n))]
        found = [r for r in found if _session_matches(r, agent, since)]
        taken = 0
        for name in stamped:
            if limit is not None and taken >= limit:
                break
            record = self._session_or_warn(name)
            if record is not None and _session_matches(record, agent, since):
                found.append(record)
                taken += 1
        found.sort(key=lambda r: (r.started or "", r.id), reverse=True)
        return found if limit is None else found[:limit]

    def _session_or_warn(self, name: str) -> SessionRecord | None:
        """A session file, or None with a warning naming it (one bad file spoils no listing)."""
        try:
            return self._load_session(name)
        except FileProblem as exc:
            log.warning("skipped %s", exc)
            return None

    def _load_session(self, name: str) -> SessionRecord:
        from mdmem.sessions import SESSIONS_DIR, parse_session

        rel = f"{SESSIONS_DIR}/{name}"
        try:
            return parse_session(self.read(rel))
        except (TypeError, ValueError, OverflowError) as exc:
            raise FileProblem(rel, f"cannot be read as a session: {exc}") from None

    def session_record(self, session_id: str) -> SessionRecord:
        """One session by id (file stem), path, or a unique part of its id."""
        from mdmem.sessions import SESSIONS_DIR

        name = session_id.removeprefix(f"{SESSIONS_DIR}/").removesuffix(".md")
        folder = self.root / SESSIONS_DIR
        stems = sorted(p.stem for p in folder.glob("*.md"))
        matches = [s for s in stems if s == name] or [s for s in stems if name in s]
        if len(matches) != 1:
            found = "no session" if not matches else f"{len(matches)} sessions"
            raise EntryNotFoundError(f"{found} matching {session_id!r} in {SESSIONS_DIR}/")
        return self._load_session(f"{matches[0]}.md")

    @property
    def task(self) -> Task:
        """task_process.md: ``ws.task.add(...)``, ``.complete(n)``, ``.current()`` …"""
        from mdmem.task import Task, archive_name

        def archive(title: str, text: str) -> None:
            rel, absolute = self.resolve(archive_name(title, dt.datetime.now()))
            absolute.parent.mkdir(parents=True, exist_ok=True)
            data = text.encode("utf-8")
            for n in range(1, 1000):  # never over an earlier archive
                target = absolute if n == 1 else absolute.with_name(f"{absolute.stem}-{n}.md")
                if create_exclusive(target, data):
                    return
            raise ConflictError(f"{rel}: too many archived tasks with this name")

        return Task(self._reader(TASK_FILE), self._file_writer(TASK_FILE, TASK_FILE), archive)

    @property
    def world(self) -> World:
        """world_state.md: ``ws.world.set(key, text)``, ``ws.world.get(key)``."""
        from mdmem.world import World

        return World(self._reader(WORLD_FILE), self._file_writer(WORLD_FILE, WORLD_FILE))

    # ---- context ----------------------------------------------------------------------------

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
        from mdmem import context as ctx
        from mdmem.sessions import SESSIONS_DIR
        from mdmem.tokens import token_counter

        cfg = self.config.context
        budget = cfg.budget_tokens if budget_tokens is None else int(budget_tokens)
        model = model or cfg.model or self.config.llm.model or None
        count = token_counter(model)
        knowledge_files = [f for f in (MEMORY_FILE, LEARNINGS_FILE) if (self.root / f).exists()]
        entries = [e for f in knowledge_files for e in self._entries_or_warn(f)]
        ranked: list[str] = []
        related: list[tuple[str, str]] = []
        if query and query.strip():
            known = {e.id for e in entries}
            shown = {*knowledge_files, TASK_FILE, WORLD_FILE, COMPACT_FILE}
            results = self.search(query, k=max(cfg.retrieved * 3, 10))
            for problem in results.problems:
                log.warning("context: %s", problem)
            for hit in results:
                if hit.id in known:
                    ranked.append(hit.id)
                elif hit.path not in shown and len(related) < cfg.retrieved:
                    related.append((hit.citation, hit.text))
        sources: list[ctx.Source] = []
        if self.mode == "full":
            sources.append(ctx.task_source(self.task.state(), TASK_FILE))
            own = self.sessions(agent=agent or self.agent, limit=cfg.sessions)
            sources.append(ctx.sessions_source(own, SESSIONS_DIR + "/"))
            sources.append(ctx.world_source(self.world.facts(), WORLD_FILE))
        sources.append(ctx.knowledge_source(entries, ranked, knowledge_files))
        if self.mode == "full":
            sources.append(ctx.retrieved_source(related))
        else:
            compact = (
                self._entries_or_warn(COMPACT_FILE) if (self.root / COMPACT_FILE).exists() else []
            )
            sources.append(ctx.compact_source(compact, COMPACT_FILE))
        # a person's file is never rewritten, but its secrets never reach a prompt
        sources = [self._masked_source(source) for source in sources]
        text, usage = ctx.pack(sources, cfg.shares, budget, count)
        return ctx.Context(text, count(text), budget, model, self.mode, query, usage)

    # ---- compaction and extraction -----------------------------------------------------------

    def should_compact(self, messages: Conversation) -> bool:
        """True when ``messages`` are past ``compact.threshold_tokens`` (default 70,000),
        counted with the configured model's tokenizer (or the estimate)."""
        from mdmem.compact import should_compact

        loaded, _ = self._conversation(messages)
        model = self.config.context.model or self.config.llm.model or None
        return should_compact(loaded, self.config.compact.threshold_tokens, model)

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
        from mdmem.compact import compact, merge
        from mdmem.compact_file import read_memory, write_memory
        from mdmem.reports import CompactReport
        from mdmem.sessions import SUMMARY_SECTION, section_text, set_section
        from mdmem.tokens import token_counter

        messages, record = self._conversation(source)
        session_id = record.id if record is not None and record.path else None
        llm_kwargs = {"redactor": self.redactor, **llm_kwargs}  # nothing leaves unmasked
        extraction = None
        with self._dry_run(dry_run) as changes:
            if flush:
                extraction = self._extract(messages, session_id, offline, llm_kwargs)
                extraction = replace(extraction, dry_run=dry_run)
            if into is not None:
                record = self.session_record(into)
            target = COMPACT_FILE
            in_file = record is not None and record.path and (self.root / record.path).exists()
            if self.mode == "full" and in_file:  # (a deleted session file is not brought back)
                target = record.path
            previous = None
            if target == COMPACT_FILE and (self.root / COMPACT_FILE).exists():
                previous = read_memory(self.read(COMPACT_FILE).text)
            elif target != COMPACT_FILE and record is not None and record.summary:
                previous = read_memory(record.summary, level=3)
            model = self.config.context.model or self.config.llm.model or None
            count = token_counter(model)
            result = compact(
                messages,
                llm=self.config.llm,
                offline=offline,
                previous=previous,
                count=count,
                **llm_kwargs,
            )
            result = replace(result, memory=self._masked_memory(result.memory))
            if previous:  # what the memory held before counts as input, not as growth
                before = result.tokens_before + count(previous.render())
                result = replace(
                    result,
                    tokens_before=before,
                    ratio=round(result.tokens_after / before, 4) if before else 0.0,
                )
            rel, absolute = self.resolve(target)
            stamp = (
                f"<!-- mdmem compacted: engine={result.engine} date={_today()} "
                f"tokens={result.tokens_before}->{result.tokens_after} -->"
            )

            limit = self.config.compact.max_events

            def edit(current: str) -> str:
                # the file as it is now (a person's edits included) is merged, never replaced
                if rel == COMPACT_FILE:
                    merged = merge(read_memory(current), result.memory)
                    return write_memory(current, merged, max_events=limit, today=_today())
                body = section_text(current, rel, SUMMARY_SECTION)  # (\n line ends)
                body = _STAMP.sub("", body)
                merged = merge(read_memory(body, level=3), result.memory)
                body = write_memory(
                    body.strip("\n"), merged, max_events=limit, today=_today(), level=3
                )
                return set_section(current, rel, SUMMARY_SECTION, stamp + "\n\n" + body)

            text = self._write(rel, absolute, edit)
        return CompactReport(
            result.engine,
            result.tokens_before,
            result.tokens_after,
            result.ratio,
            rel,
            text,
            result.cost,
            dry_run,
            changes.diff(),
            extraction,
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
        messages, record = self._conversation(source)
        session_id = record.id if record is not None and record.path else None
        llm_kwargs = {"redactor": self.redactor, **llm_kwargs}  # nothing leaves unmasked
        with self._dry_run(dry_run) as changes:
            report = self._extract(messages, session_id, offline, llm_kwargs)
        return replace(report, dry_run=dry_run, diff=changes.diff())

    def _extract(
        self,
        messages: list[dict[str, str]],
        session_id: str | None,
        offline: bool,
        llm_kwargs: dict[str, Any],
    ) -> ExtractReport:
        from mdmem.extract import choose_section, extract_llm, extract_offline, plan
        from mdmem.reports import ExtractReport, MemoryChange

        llm = self.config.llm
        use_llm = bool(llm.model) and not offline
        problems: tuple[str, ...] = ()
        cost = None
        if use_llm:
            found = extract_llm(messages, llm, source=session_id, **llm_kwargs)
            candidates, problems = list(found.candidates), found.problems
            cost = found.reply.cost if found.reply else None
        else:
            candidates = extract_offline(messages, source=session_id)
        existing = [
            e
            for f in (MEMORY_FILE, LEARNINGS_FILE)
            if (self.root / f).exists()
            for e in self._entries_or_warn(f)
            if e.type in MEMORY_TYPES
        ]
        embedder = self.embedder() if candidates else None
        decisions = plan(
            candidates,
            existing,
            embed=embedder.embed if embedder is not None else None,
            threshold=self.config.compact.dedupe_similarity,
            llm=llm if use_llm else None,
            **llm_kwargs,
        )
        changes = []
        mask = self.redactor.mask
        for d in decisions:
            c = d.candidate
            d = replace(d, text=mask(d.text))
            written: Entry | None = None
            if d.action in ("add", "keep_both"):
                rel = self._file_for(c.type)
                run = self._dry()
                current = run.texts.get(rel) if run is not None else None
                doc = (
                    parse_document(rel, current) if current is not None else self._doc_or_none(rel)
                )
                topic = choose_section(doc, d.text, c.type) if doc is not None else None
                written = self.remember(
                    d.text, c.type, c.importance, source=session_id, section=topic
                )
            elif d.action in ("replace", "merge") and d.existing is not None:
                written = self.supersede(
                    d.existing, d.text, importance=c.importance, source=session_id
                )
            changes.append(
                MemoryChange(
                    d.action,
                    c.type,
                    d.text,
                    c.importance,
                    d.reason,
                    mask(c.evidence),
                    written.id if written else None,
                    written.path if written else None,
                    d.existing.id if d.existing is not None else None,
                )
            )
        engine = "llm" if use_llm else "offline"
        return ExtractReport(session_id, engine, tuple(changes), problems, cost)

    def _conversation(
        self, source: Conversation
    ) -> tuple[list[dict[str, str]], SessionRecord | None]:
        """Messages from whatever the caller has, and the session they come from (if any)."""
        from mdmem.sessions import Session, SessionRecord, is_session_path
        from mdmem.transcript import load_messages

        record: SessionRecord | None = None
        if source is None:
            own = self.sessions(agent=self.agent, limit=1)
            if not own:
                hint = (
                    "minimal mode records no session files: give messages or a transcript"
                    if self.mode == "minimal"
                    else f"no session of agent {self.agent!r} in .sessions/ yet: give "
                    "messages, a transcript file or a session id"
                )
                raise EntryNotFoundError(f"nothing to compact: {hint}")
            record = own[0]
        elif isinstance(source, Session):
            # a session whose file is gone (or never was: minimal mode) is read from memory
            record = self.session_record(source.id) if source.written else source.record()
        elif isinstance(source, SessionRecord):
            record = source
        elif isinstance(source, str | os.PathLike):
            path = Path(source)
            inside = self.root / path if not path.is_absolute() else path
            found = path if path.is_file() else inside if inside.is_file() else None
            if found is None:
                record = self.session_record(str(source))
            else:
                try:
                    rel = found.resolve().relative_to(self.root.resolve()).as_posix()
                except ValueError:
                    rel = None
                if rel is not None and is_session_path(rel):
                    record = self.session_record(Path(rel).stem)
                else:
                    return load_messages(found), None
        else:
            return load_messages(source), None
        return load_messages(record), record

    @contextlib.contextmanager
    def _dry_run(self, dry: bool) -> Iterator[DryRun]:
        """Inside, with ``dry``, this call's writes go to memory; ``.diff()`` tells what changed.

        The dry run lives in a context variable: other threads and tasks writing through the
        same Workspace at the same time write to disk as usual.
        """
        current = self._dry()
        if current is not None or not dry:
            yield current or DryRun(0)
            return
        run = DryRun(id(self))
        token = _DRY_RUN.set(run)
        try:
            yield run
        finally:
            _DRY_RUN.reset(token)

    def _dry(self) -> DryRun | None:
        run = _DRY_RUN.get()
        return run if run is not None and run.owner == id(self) else None

    async def abuild_context(self, query: str | None = None, **kwargs: Any) -> Context:
        """:meth:`build_context` for async agents (a query may load the model and search)."""
        import asyncio

        return await asyncio.to_thread(self.build_context, query, **kwargs)

    async def acompact(self, source: Conversation = None, **kwargs: Any) -> CompactReport:
        """:meth:`compact` for async agents: the model call runs in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.compact, source, **kwargs)

    async def aextract(self, source: Conversation = None, **kwargs: Any) -> ExtractReport:
        """:meth:`extract` for async agents: the model call runs in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.extract, source, **kwargs)

    def _doc_or_none(self, rel: str) -> Document | None:
        try:
            return self.read(rel) if (self.root / rel).exists() else None
        except FileProblem:
            return None

    def _entries_or_warn(self, path: str) -> list[Entry]:
        try:
            return self.entries(path)
        except FileProblem as exc:
            log.warning("context: skipped %s", exc)
            return []

    def _expected(self, entry: str | Entry) -> Entry:
        return entry if isinstance(entry, Entry) else self.get(entry)

    def _write(
        self,
        rel: str,
        absolute: Path,
        edit: Callable[[str], str],
        *,
        create: bool = True,
        exact: bool = False,
    ) -> str:
        """``exact``: write what the edit returns as it is (a restored version), secrets and all."""
        if not exact:
            edit = self._no_new_secrets(edit)
        run = self._dry()
        if run is not None:  # a dry run: edits apply to copies in memory
            if rel not in run.texts:
                run.originals[rel] = "" if not absolute.exists() else self.read(rel).text
            current = run.texts.get(rel, run.originals[rel])
            run.texts[rel] = edit(current)
            return run.texts[rel]
        absolute.parent.mkdir(parents=True, exist_ok=True)  # inside: resolve() checked it
        # a symlink (inside the workspace) is written through, never replaced by a file
        real = absolute.resolve() if absolute.is_symlink() else absolute
        target = Target(real, rel, self.config.max_file_bytes)
        return self.writer.edit(target, edit, create=create).text

    def _no_new_secrets(self, edit: Callable[[str], str]) -> Callable[[str], str]:
        """Every program write, whatever made it (task, world, compaction, anything added
        later), never adds a secret the file did not already hold; a person's own text,
        secrets included, is never rewritten for this."""
        redactor = self.redactor
        if not redactor.enabled:
            return edit

        def guarded(current: str) -> str:
            new = edit(current)
            return redactor.redact_added(current, new).text

        return guarded

    def _masked_hit(self, hit: Hit) -> Hit:
        mask = self.redactor.mask
        text, heading = mask(hit.text), mask(hit.heading)
        if text is hit.text and heading is hit.heading:
            return hit
        return replace(hit, text=text, heading=heading)

    def _masked_source(self, source: Source) -> Source:
        mask = self.redactor.mask
        units = tuple(replace(u, text=mask(u.text), group=mask(u.group)) for u in source.units)
        return replace(source, units=units, groups=tuple(mask(g) for g in source.groups))

    def _masked_memory(self, memory: CompactMemory) -> CompactMemory:
        """Compaction output (a model's or the offline engine's) with its secrets masked."""
        mask = self.redactor.mask
        return replace(
            memory,
            state=tuple(mask(s) for s in memory.state),
            events=tuple(replace(e, text=mask(e.text)) for e in memory.events),
        )

    def _file_for(self, type_: str) -> str:
        if type_ == "skill" and (self.root / LEARNINGS_FILE).exists():
            return LEARNINGS_FILE
        return MEMORY_FILE


@dataclass
class DryRun:
    """The files one dry run would change: their texts before and after, as a diff."""

    owner: int
    texts: dict[str, str] = field(default_factory=dict)
    originals: dict[str, str] = field(default_factory=dict)

    def diff(self) -> str:
        from mdmem.reports import unified_diff

        return unified_diff(self.originals, self.texts) if self.texts else ""


_STAMP = re.compile(r"(?m)^<!-- mdmem compacted: .*?-->[ \t]*\n?")
"""The line compaction writes atop a session's summary (replaced on each compaction)."""

_DRY_RUN: contextvars.ContextVar[DryRun | None] = contextvars.ContextVar(
    "mdmem_dry_run", default=None
)


def _make_embedder(config: Config) -> Embedder:
    """The configured model; constructing it loads nothing (that happens on first use)."""
    cfg = config.embedding
    if cfg.provider == "litellm":
        from mdmem.index.embed import LiteLLMEmbedder

        return LiteLLMEmbedder(cfg.model, cfg.batch_size, cfg.api_base, cfg.api_key_env)
    from mdmem.index.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, cfg.device)


def _from_template(root: Path, template: str, *, mode: str, agent: str) -> bool:
    """Write one template file into the workspace unless it exists; True if written."""
    text = (templates_dir() / template).read_text(encoding="utf-8")
    if template == "mdmem.toml":
        text = Template(text).substitute(mode=mode, agent=agent)
    try:
        with open(root / TEMPLATES[template], "x", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except FileExistsError:
        return False
    return True


def templates_dir() -> Path:
    """Templates ship inside the wheel as ``mdmem/templates``; a checkout has ``templates/``."""
    packaged = Path(__file__).parent / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).parent.parent / "templates"


def _session_matches(record: SessionRecord, agent: str | None, since: str | None) -> bool:
    if agent is not None and record.agent != agent:
        return False
    return since is None or (record.started or "")[:10] >= since


def _today() -> str:
    return dt.date.today().isoformat()


def _entry_by_id(doc: Document, entry_id: str) -> Entry:
    for entry in doc.entries:
        if entry.id == entry_id:
            return entry
    raise EntryNotFoundError(f"entry {entry_id} not found in {doc.path} after writing it")


def _same_entry(doc: Document, entry: Entry) -> None:
    """The entry as it was read must still be there, with the same text, to be edited."""
    for current in doc.entries:
        if current.id == entry.id:
            if current.text != entry.text:
                raise ConflictError(
                    f"{doc.path}:{current.start_line}: entry {entry.id} was changed by someone "
                    f"else since it was read (now {current.text[:60]!r}); nothing was written"
                )
            return
    raise ConflictError(
        f"{doc.path}: entry {entry.id} was removed or rewritten by someone else since it was "
        "read; nothing was written"
    )
