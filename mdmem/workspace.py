"""Workspace: the one composition root. Finds the folder, reads config, wires the parts."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from mdmem import edits
from mdmem.config import CONFIG_NAME, Config, Mode, check_name, load_config
from mdmem.discovery import STATE_DIR, find_root
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
    WorkspaceNotFoundError,
)
from mdmem.files import EditNotApplicable, edit_file, read_markdown
from mdmem.markdown import Document, Problem, parse_document
from mdmem.paths import workspace_path
from mdmem.scan import ScanResult, scan

if TYPE_CHECKING:
    from mdmem.index.embed import Embedder
    from mdmem.index.sync import Index, IndexStatus, Progress, SyncReport
    from mdmem.search import SearchResults
    from mdmem.watch import Watcher

log = logging.getLogger("mdmem")
SEARCH_LOCK_WAIT_S = 5.0
MEMORY_FILE = "memory.md"
LEARNINGS_FILE = "learnings.md"

# template file → workspace file, in the order `init` writes them
TEMPLATES = {
    "mdmem.toml": CONFIG_NAME,
    "memory.md": MEMORY_FILE,
    "learnings.md": LEARNINGS_FILE,
    "task_process.md": "task_process.md",
    "world_state.md": "world_state.md",
    "compact_memory.md": ".compact_memory.md",
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
        for template, target in TEMPLATES.items():
            text = (templates_dir() / template).read_text(encoding="utf-8")
            if template == "mdmem.toml":
                text = Template(text).substitute(mode=mode, agent=agent)
            try:
                with open(root / target, "x", encoding="utf-8", newline="") as handle:
                    handle.write(text)
            except FileExistsError:
                continue
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

    def scan(self) -> ScanResult:
        return scan(self.root, self.config.files)

    def resolve(self, name: str | os.PathLike[str], what: str = "file") -> tuple[str, Path]:
        """A name given by a user or agent → (relative path, absolute path), inside only."""
        return workspace_path(self.root, name, what)

    def read(self, path: str | os.PathLike[str]) -> Document:
        """Parse one file. Raises FileProblem (naming the file and line) if it can't be read."""
        rel, absolute = self.resolve(path)
        if not rel.endswith(".md"):
            raise FileProblem(rel, "not a Markdown file (*.md)")
        _, text = read_markdown(absolute, rel, self.config.max_file_bytes)
        return parse_document(rel, text)

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
        for entry in self.snapshot().entries(include_archived=True):
            if entry.id == entry_id:
                return entry
        raise EntryNotFoundError(f"no entry with id {entry_id!r} in {self.root}")

    # ---- index and search -----------------------------------------------------------------

    @property
    def index(self) -> Index:
        if self._index is None:
            from mdmem.index.sync import Index

            self._index = Index(
                self.root,
                self.state_dir / "index.db",
                self.config.files,
                self.embedder,
                on_message=log.warning,
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
        from mdmem.search import Filters, SearchResults, search

        mode = mode or self.config.search.mode
        filters = Filters(type, path, agent, session, since, until, include_archived)
        with self.index.searching():
            # readers never wait long for a writer: past a few seconds the index is searched
            # as it is, and the files not yet indexed are reported as stale
            report = self.index.sync(embed=mode != "keyword", lock_timeout=SEARCH_LOCK_WAIT_S)
            hits = search(
                self.index,
                self.index.embedder() if mode != "keyword" else None,
                query,
                k=k or self.config.search.k,
                mode=mode,
                config=self.config.search,
                filters=filters,
                track_access=track_access,
            )
        return SearchResults(
            hits, stale=report.stale, problems=[str(p) for p in report.problems], mode=mode
        )

    async def asearch(self, query: str, k: int | None = None, **filters: Any) -> SearchResults:
        """:meth:`search` for async agents: runs in a worker thread, never blocks the loop."""
        import asyncio

        return await asyncio.to_thread(self.search, query, k, **filters)

    def status(self) -> IndexStatus:
        """What the index holds and how fresh it is; never loads the embedding model."""
        from mdmem.index.sync import index_status

        model = None
        if self.config.embedding.model or self._embedder is not None:
            model = (self._embedder or _make_embedder(self.config)).model_id  # loads nothing
        from mdmem.watch import watcher_info

        return replace(index_status(self.index, model), watcher=watcher_info(self.root))

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

    def close(self) -> None:
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
    ) -> Entry:
        """Append a memory under the heading for its type (created if missing).

        Skills go to ``learnings.md`` when it exists, everything else to ``memory.md``.
        Remembering the exact text already in the file returns the existing entry.
        """
        check_type(type)
        check_importance(importance)
        text = edits.check_text(text)
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
            key = _normal(text)
            doc = parse_document(rel, current)
            for entry in doc.entries:
                if not entry.archived and _normal(entry.text) == key:
                    found.append(entry)
                    return current
            block = edits.render_item(text, meta, doc.newline)
            title = SECTION_TITLES.get(type, type.title())
            return edits.insert_entry(doc, type, title, block)

        result = self._write(rel, absolute, edit)
        if found:
            return found[0]
        return _entry_by_id(parse_document(rel, result), entry_id)

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
        if text is not None:
            text = edits.check_text(text)
        rel, absolute = self.resolve(entry.path)

        def edit(current: str) -> str:
            _same_entry(parse_document(rel, current), entry)
            return edits.rewrite_entry(current, rel, entry.id, meta, text)

        result = self._write(rel, absolute, edit)
        return _entry_by_id(parse_document(rel, result), entry.id)

    def supersede(self, entry: str | Entry, by: str) -> Entry:
        """Replace an entry with a newer one, moving the old one to the file's ``## Archive``.

        ``by`` is the id of an existing entry, or the text of a new one (same type and file).
        Nothing is deleted: the archived entry records what superseded it and when.
        """
        old = self._expected(entry)
        if old.archived:
            raise EditNotApplicable(f"{old.id} is already archived in {old.path}")
        rel, absolute = self.resolve(old.path)
        try:
            new = self.get(by)
            new_id_ = new.id
            new_text = None
        except EntryNotFoundError:
            new_text = edits.check_text(by)
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
                    "importance": old.importance,
                    "created": _today(),
                    "supersedes": old.id,
                }
                block = edits.render_item(new_text, meta, doc.newline)
                title = SECTION_TITLES.get(type_, type_.title())
                text = edits.insert_entry(doc, type_, title, block)
            return edits.archive_entry(text, rel, old.id, stamp)

        result = self._write(rel, absolute, edit)
        if new_text is None:
            return self.get(new_id_)
        return _entry_by_id(parse_document(rel, result), new_id_)

    def _expected(self, entry: str | Entry) -> Entry:
        return entry if isinstance(entry, Entry) else self.get(entry)

    def _write(self, rel: str, absolute: Path, edit: Callable[[str], str]) -> str:
        absolute.parent.mkdir(parents=True, exist_ok=True)  # inside: resolve() checked it
        lock = self.state_dir / "locks" / (rel.replace("/", "__") + ".lock")
        result = edit_file(
            absolute,
            lock,
            edit,
            display=rel,
            max_bytes=self.config.max_file_bytes,
        )
        return result.text

    def _file_for(self, type_: str) -> str:
        if type_ == "skill" and (self.root / LEARNINGS_FILE).exists():
            return LEARNINGS_FILE
        return MEMORY_FILE


def _make_embedder(config: Config) -> Embedder:
    """The configured model; constructing it loads nothing (that happens on first use)."""
    cfg = config.embedding
    if cfg.provider == "litellm":
        from mdmem.index.embed import LiteLLMEmbedder

        return LiteLLMEmbedder(cfg.model, cfg.batch_size, cfg.api_base, cfg.api_key_env)
    from mdmem.index.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(cfg.model, cfg.batch_size, cfg.device)


def templates_dir() -> Path:
    """Templates ship inside the wheel as ``mdmem/templates``; a checkout has ``templates/``."""
    packaged = Path(__file__).parent / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).parent.parent / "templates"


def _today() -> str:
    return dt.date.today().isoformat()


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


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
