"""Document → chunks: the units the index stores and search returns.

Every entry is a chunk; content that is not an entry (code blocks, tables, HTML) becomes block
chunks per section, so every line of a file is findable. Long units split at line boundaries
with a one-line overlap. Each chunk's embedding text carries its context (file, headings, date)
so that a bare "yes, on Tuesday" is still findable. Secrets are masked in what the index stores
(text, heading, embedded text), never in the file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from mdmem.markdown.entries import Entry, default_type_for_file, type_from_heading
from mdmem.markdown.parse import Document, Heading
from mdmem.redact import Redactor

CHUNKER_VERSION = 5
"""5: secrets masked in chunk text (an index built before holds them: it is rebuilt once)."""
MAX_CHARS = 1500
_SESSION_NAME = re.compile(r"^(\d{8})_(\d{6})_")
_ONLY_COMMENTS = re.compile(r"(?:\s*<!--.*?-->)+\s*", re.S)


@dataclass(frozen=True)
class Chunk:
    id: str
    """Hash of (chunker version, path, lines, embedded text): unchanged chunks keep their id."""
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    embed_text: str
    text_hash: str
    """Hash of ``embed_text``: the embedding cache key, the same wherever the text moves."""
    kind: str
    type: str
    importance: float
    created: str | None
    entry_id: str | None
    agent: str | None
    session: str | None
    archived: bool


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_document(doc: Document, redactor: Redactor | None = None) -> list[Chunk]:
    """``redactor`` masks secrets in what the index keeps (a person's file stays as it is)."""
    context = _FileContext.of(doc, redactor if redactor is not None else _same)
    chunks: list[Chunk] = []
    for entry in doc.entries:
        for start, end, text in _split(entry.start_line, entry.end_line, entry.text):
            chunks.append(context.chunk(entry.heading_path, start, end, text, entry))
    for heading_path, start, end, text in _blocks(doc):
        for s, e, part in _split(start, end, text):
            chunks.append(context.chunk(heading_path, s, e, part, None))
    chunks.sort(key=lambda c: (c.start_line, c.end_line))
    return chunks


@dataclass(frozen=True)
class _FileContext:
    path: str
    title: str
    date: str | None
    agent: str | None
    session: str | None
    mask: Callable[[str], str]

    @classmethod
    def of(cls, doc: Document, mask: Callable[[str], str]) -> _FileContext:
        fm = doc.frontmatter
        stem = doc.path.rsplit("/", 1)[-1].removesuffix(".md")
        # The file's own title, not its name, so renaming a file re-embeds nothing.
        h1 = next((h.title for h in doc.headings if h.level == 1), None)
        title = str(fm.get("title") or h1 or stem.lstrip("."))
        session = stem if doc.path.startswith(".sessions/") else None
        date = _date(fm.get("started") or fm.get("date") or fm.get("created"))
        if date is None and session and (m := _SESSION_NAME.match(stem)):
            date = f"{m.group(1)[:4]}-{m.group(1)[4:6]}-{m.group(1)[6:]}"
        agent = fm.get("agent")
        if agent is None and doc.path.startswith(".notes/") and doc.path.count("/") >= 2:
            agent = doc.path.split("/")[1]
        return cls(doc.path, mask(title), date, str(agent) if agent else None, session, mask)

    def chunk(
        self,
        heading_path: tuple[str, ...],
        start: int,
        end: int,
        text: str,
        entry: Entry | None,
    ) -> Chunk:
        heading_path = tuple(self.mask(h) for h in heading_path)
        heading = " > ".join(heading_path)
        text = self.mask(text)
        created = (entry.created if entry else None) or self.date
        header = " > ".join([self.title, *heading_path[1:]] if heading_path else [self.title])
        if heading_path and heading_path[0].lower() != self.title.lower():
            header = " > ".join([self.title, *heading_path])
        if created and created[:4] not in header:  # the date, unless a heading already has it
            header += f" ({created[:10]})"
        embed_text = f"{header}\n{text}"
        return Chunk(
            id=sha(f"{CHUNKER_VERSION}\0{self.path}\0{start}\0{end}\0{embed_text}")[:16],
            path=self.path,
            start_line=start,
            end_line=end,
            heading=heading,
            text=text,
            embed_text=embed_text,
            text_hash=sha(embed_text),
            kind=entry.kind if entry else "block",
            type=entry.type if entry else self.block_type(heading_path),
            importance=entry.importance if entry else 0.5,
            created=created,
            entry_id=entry.id if entry else None,
            agent=self.agent,
            session=self.session if entry is None or not entry.source else entry.source,
            archived=entry.archived if entry else False,
        )

    def block_type(self, heading_path: tuple[str, ...]) -> str:
        for title in reversed(heading_path):
            if found := type_from_heading(title):
                return found
        return default_type_for_file(self.path)


def _same(text: str) -> str:
    return text


def _date(value: object) -> str | None:
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}", value):
        return value[:10]
    return None


def _split(start: int, end: int, text: str) -> list[tuple[int, int, str]]:
    """Split a long unit at line boundaries (one line of overlap), keeping line numbers."""
    if len(text) <= MAX_CHARS:
        return [(start, end, text)]
    lines = text.split("\n")
    line_no = [min(start + i, end) for i in range(len(lines))]
    out: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        j, size = i, 0
        while j < len(lines) and (j == i or size + len(lines[j]) + 1 <= MAX_CHARS):
            size += len(lines[j]) + 1
            j += 1
        out.append((line_no[i], line_no[j - 1], "\n".join(lines[i:j])))
        if j >= len(lines):
            break
        i = j - 1 if j - 1 > i else j  # one line of overlap
    return out


def _blocks(doc: Document) -> list[tuple[tuple[str, ...], int, int, str]]:
    """Runs of non-entry content (code, tables, HTML) per section, with their heading path."""
    lines = doc.lines
    covered = [False] * (len(lines) + 2)
    for entry in doc.entries:
        for n in range(entry.start_line, entry.end_line + 1):
            covered[n] = True
    for n in range(1, doc.body_start):
        covered[n] = True
    heading_at: dict[int, Heading] = {h.line: h for h in doc.headings}
    out: list[tuple[tuple[str, ...], int, int, str]] = []
    stack: list[Heading] = []
    run: list[int] = []

    def flush() -> None:
        while run and not lines[run[-1] - 1].strip():
            run.pop()
        if run:
            text = "".join(lines[n - 1] for n in run).strip("\r\n")
            # HTML comments are invisible in the rendered file (template notes): not memory
            if text.strip() and not _ONLY_COMMENTS.fullmatch(text):
                out.append((tuple(h.title for h in stack), run[0], run[-1], text))
        run.clear()

    for n in range(1, len(lines) + 1):
        if n in heading_at:
            flush()
            heading = heading_at[n]
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            continue
        if covered[n]:
            flush()
            continue
        if run or lines[n - 1].strip():
            run.append(n)
    flush()
    return out
