"""Keeping an index equal to the files, the parts every backend shares: which files changed,
reading and chunking them, and what a sync reports.

Per file: mtime + size, then a content hash, then re-parse. Per chunk: a content hash. Per
embedding: (model id, hash of the embedded text), so unchanged, moved or renamed text is never
embedded twice. An unreadable file keeps its last indexed chunks and is reported as stale: an
unreadable file is not a deleted file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mdmem.config import FilesConfig
from mdmem.errors import FileProblem
from mdmem.index.chunks import Chunk, chunk_document
from mdmem.markdown.parse import Problem, parse_document
from mdmem.memory.files import read_markdown
from mdmem.memory.scan import FileStat, scan
from mdmem.redact import Redactor

BATCH_FILES = 200
EMBED_BATCH = 64
"""Texts embedded (and committed) per step: a stopping watcher waits for one step at most."""
Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stage is "files" or "embedding"."""


@dataclass
class SyncReport:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    embedded: int = 0
    """Texts sent to the embedding model (cache misses)."""
    stale: list[str] = field(default_factory=list)
    """Files that could not be read: their last indexed version is still served."""
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0
    paths: list[str] = field(default_factory=list)
    """Files whose chunks were re-indexed or removed."""
    busy: bool = False
    """Another process held the index too long; nothing was synced (see ``stale``)."""
    readonly: str | None = None
    """Why the index could not be written (read-only mount, full disk), or None. Nothing was
    synced: the index is searched as it is and ``stale`` lists the files it lags behind."""
    generation: int | None = None
    """The index's generation when the sync ended (None: it did not run to the end). What a
    watcher vouches for: the index matched the files at this generation."""

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.removed


@dataclass(frozen=True)
class Vouch:
    """A live watcher's word that the index matched the files at ``generation`` (it has seen
    no change since); ``problems``: what its last sync found wrong in them.

    With ``pending`` (not None), a weaker word: the watcher has heard of changes since that
    sync and is indexing them (these files, plus ``unlisted`` more); the index lags the files
    by at most its debounce and one sync, whatever generation it is at now."""

    generation: int
    problems: tuple[Problem, ...] = ()
    pending: tuple[str, ...] | None = None
    unlisted: int = 0


@dataclass(frozen=True)
class Freshness:
    files: list[FileStat]
    changed: list[FileStat]
    """New or modified (mtime or size differ from the index)."""
    removed: list[str]
    problems: list[Problem]


@dataclass(frozen=True)
class ParsedFile:
    """A changed file, read and chunked, ready to be stored."""

    stat: FileStat
    digest: str
    chunks: list[Chunk]


def freshness(root: Path, files: FilesConfig, known: Mapping[str, tuple[int, int]]) -> Freshness:
    """The cheap check: every file's (size, mtime_ns) against ``known``, what the index holds."""
    result = scan(root, files)
    changed = [f for f in result.files if known.get(f.path) != (f.size, f.mtime_ns)]
    seen = {f.path for f in result.files}
    unreadable = [p.path for p in result.problems]
    removed = [path for path in known if path not in seen and not _under_any(path, unreadable)]
    return Freshness(list(result.files), changed, removed, list(result.problems))


def stale_report(report: SyncReport, fresh: Freshness) -> SyncReport:
    """What a search must say when it answers from the index as it is."""
    report.stale = [f.path for f in fresh.changed] + fresh.removed
    report.problems = list(fresh.problems)
    return report


def defer_big(
    changed: list[FileStat], defer_bytes: int, max_bytes: int, report: SyncReport
) -> list[FileStat]:
    """The changed files small enough to index now; the others are reported stale."""
    keep = []
    for stat in changed:
        if stat.size <= defer_bytes or stat.size > max_bytes:
            keep.append(stat)  # (a file over max_file_mb is reported as too large)
            continue
        report.stale.append(stat.path)
        report.problems.append(
            Problem(
                stat.path,
                f"changed ({stat.size / 1e6:.1f} MB): too big to re-index before a search; "
                "`mdmem index` or `mdmem watch` indexes it",
            )
        )
    return keep


def read_batch(
    root: Path,
    batch: list[FileStat],
    known: Mapping[str, str],
    *,
    full: bool,
    max_bytes: int,
    redactor: Redactor,
    report: SyncReport,
) -> tuple[list[FileStat], list[ParsedFile]]:
    """Read and chunk ``batch``. Returns (files whose bytes did not change, only their mtime,
    parsed files). ``known`` maps paths to the content hash the index holds; an unreadable
    file is reported stale and keeps what the index holds."""
    touched: list[FileStat] = []
    parsed: list[ParsedFile] = []
    for stat in batch:
        try:
            data, text = read_markdown(root / stat.path, stat.path, max_bytes)
        except FileProblem as exc:  # unreadable right now: keep what we had
            report.problems.append(Problem(exc.path, exc.reason, exc.line))
            report.stale.append(stat.path)
            continue
        digest = hashlib.sha256(data).hexdigest()
        if not full and known.get(stat.path) == digest:
            touched.append(stat)  # same bytes, new mtime
            continue
        doc = parse_document(stat.path, text)
        report.problems.extend(doc.problems)
        parsed.append(ParsedFile(stat, digest, chunk_document(doc, redactor)))
    return touched, parsed


def _under_any(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)
