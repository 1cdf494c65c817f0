"""Reading the workspace's Markdown: one file, or all of them, parsed once per version."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mdmem.config import FilesConfig
from mdmem.errors import EntryNotFoundError, FileProblem
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import Document, Problem, parse_document
from mdmem.memory.scan import ScanResult, indexed_by, scan
from mdmem.paths import workspace_path
from mdmem.writes.safe_writer import MISSING_WAIT_S, read_markdown

log = logging.getLogger("mdmem")
PARSE_CACHE_FILES = 64


@dataclass(frozen=True)
class DocumentSet:
    """Every readable document of the workspace, and what could not be read."""

    documents: tuple[Document, ...]
    problems: tuple[Problem, ...]

    def entries(self, include_archived: bool = False) -> Iterator[Entry]:
        for doc in self.documents:
            for entry in doc.entries:
                if include_archived or not entry.archived:
                    yield entry


class Documents:
    """The workspace's files as parsed documents. Parsing is the slow part, so the last
    :data:`PARSE_CACHE_FILES` are kept, keyed by the exact bytes they came from."""

    def __init__(
        self,
        root: Path,
        files: FilesConfig,
        max_file_bytes: int,
        written_before: Callable[[str], bool] = lambda _rel: False,
    ) -> None:
        """``written_before(rel)``: whether this process wrote the file (a missing one may be
        an editor's save by rename, in its middle)."""
        self.root = root
        self.files = files
        self.max_file_bytes = max_file_bytes
        self._written_before = written_before
        self._parsed: OrderedDict[str, tuple[bytes, Document]] = OrderedDict()
        self._lock = threading.Lock()

    def resolve(self, name: str | os.PathLike[str], what: str = "file") -> tuple[str, Path]:
        return workspace_path(self.root, name, what)

    def scan(self) -> ScanResult:
        return scan(self.root, self.files)

    def read(self, path: str | os.PathLike[str]) -> Document:
        """Parse one file. Raises FileProblem (naming the file and line) if it can't be read."""
        rel, absolute = self.resolve(path)
        if not rel.endswith(".md") and not indexed_by(self.files, rel):
            raise FileProblem(rel, "not a Markdown file (*.md)")
        try:
            data, text = read_markdown(absolute, rel, self.max_file_bytes)
        except FileProblem:
            if not self._written_before(rel) or absolute.exists():
                raise
            time.sleep(MISSING_WAIT_S)
            data, text = read_markdown(absolute, rel, self.max_file_bytes)
        with self._lock:
            cached = self._parsed.get(rel)
            if cached is not None and cached[0] == data:  # same bytes: the same document
                self._parsed.move_to_end(rel)
                return cached[1]
        doc = parse_document(rel, text)
        with self._lock:
            self._parsed[rel] = (data, doc)
            if len(self._parsed) > PARSE_CACHE_FILES:
                self._parsed.popitem(last=False)
        return doc

    def forget(self, rel: str) -> None:
        """Drop a file's cached parse (its bytes are gone for good: ``forget``)."""
        with self._lock:
            self._parsed.pop(rel, None)

    def all(self) -> DocumentSet:
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
        return DocumentSet(tuple(documents), tuple(problems))

    def entries(
        self, path: str | os.PathLike[str] | None = None, include_archived: bool = False
    ) -> list[Entry]:
        if path is not None:
            doc = self.read(path)
            return [e for e in doc.entries if include_archived or not e.archived]
        return list(self.all().entries(include_archived))

    def get(self, entry_id: str) -> Entry:
        """The entry with this id, wherever it is (archived ones included).

        Not found at first, it is looked for twice more over a third of a second: an editor
        saving by rename (vim, JetBrains) takes the file away for a moment."""
        for pause in (0.0, 0.1, 0.25):
            time.sleep(pause)
            for entry in self.all().entries(include_archived=True):
                if entry.id == entry_id:
                    return entry
        raise EntryNotFoundError(f"no entry with id {entry_id!r} in {self.root}")

    def if_exists(self, rel: str) -> Document | None:
        """The file's document; None when it is missing (unreadable: FileProblem)."""
        return self.read(rel) if (self.root / rel).exists() else None

    def or_none(self, rel: str) -> Document | None:
        """The file's document; None when it is missing or unreadable."""
        try:
            return self.read(rel) if (self.root / rel).exists() else None
        except FileProblem:
            return None

    def entries_or_warn(self, rel: str, what: str) -> list[Entry]:
        """A file's entries; none (and a warning naming it) when it is missing or unreadable."""
        if not (self.root / rel).exists():
            return []
        try:
            return self.entries(rel)
        except FileProblem as exc:
            log.warning("%s: skipped %s", what, exc)
            return []
