"""Document → chunks: the units the index stores and search returns.

Every entry is a chunk; content that is not an entry (code blocks, tables, HTML) becomes block
chunks per section, so every line of a file is findable. Long units split at line boundaries
with a one-line overlap. Each chunk carries its file's context (title, headings, the date in
words, participants, tags), in its embedding text and in a keyword column of its own, so that a
bare "yes, on Tuesday" is still findable on any layout, with or without headings; in a session
file the embedding text also holds the turn before (what a reply answers). Secrets are
masked in what the index stores (text, heading, context, embedded text), never in the file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from mdmem.markdown.entries import Entry, default_type_for_file, type_from_heading
from mdmem.markdown.parse import Document, Heading
from mdmem.memory.task import STATE, TASK_FILE
from mdmem.redact import Redactor

CHUNKER_VERSION = 7
"""5: secrets masked in chunk text (an index built before holds them: it is rebuilt once).
6: file-level context (date in words, participants, tags) and the task's state lines typed
``state``. 7: a session's turn embedded with the turn before it."""
MAX_CHARS = 1500
PEOPLE_KEYS = ("participants", "speakers", "people", "attendees", "authors", "author")
"""Frontmatter keys that name the people of a file (a list, or names separated by commas)."""
TAG_KEYS = ("tags", "keywords")
MAX_NAMES = 6
"""At most this many participants and tags each: context stays short."""
PREVIOUS_CHARS = 400
"""At most this much of the turn before goes into a session turn's embedded text (cut at a
word): the model reads 256 word pieces, and the turn itself must not be cut."""
_SESSION_NAME = re.compile(r"^(\d{8})_(\d{6})_")
_NAME_DATE = re.compile(r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})(?:[_T -]?\d{4}(?:\d{2})?)?(?!\d)")
"""A date in a file name, ``20230508``, ``2023-05-08`` or ``20230508_135600``."""
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
    context: str = ""
    """The file-level context the keyword side indexes in its own column: title (unless it is
    the first heading), date in words, participants, tags."""


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _chunk_id(path: str, start: int, end: int, embed_text: str) -> str:
    return sha(f"{CHUNKER_VERSION}\0{path}\0{start}\0{end}\0{embed_text}")[:16]


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
    if context.session is not None:
        chunks = _with_previous(chunks)
    return chunks


def _with_previous(chunks: list[Chunk]) -> list[Chunk]:
    """In a session (an event stream) each chunk's embedded text also holds the chunk before
    it, between the header line and its own text: a reply ("Yes, I did!", "Thanks, it was
    great") means what the turn it answers asked, so the vector side finds it by that
    (docs/performance.md, LoCoMo: 0.918 → 0.930 rec@2000 on rendering a). The
    keyword side keeps the turn's own words only. Appending a turn changes no earlier chunk."""
    out = chunks[:1]
    for before, chunk in itertools.pairwise(chunks):
        header, _, body = chunk.embed_text.partition("\n")
        previous = before.text
        if len(previous) > PREVIOUS_CHARS:
            previous = previous[:PREVIOUS_CHARS].rsplit(" ", 1)[0]
        embed_text = f"{header}\n{previous}\n{body}"
        out.append(
            replace(
                chunk,
                id=_chunk_id(chunk.path, chunk.start_line, chunk.end_line, embed_text),
                embed_text=embed_text,
                text_hash=sha(embed_text),
            )
        )
    return out


@dataclass(frozen=True)
class _FileContext:
    path: str
    title: str
    date: str | None
    """The file's date (frontmatter, else a session's name): chunks' ``created`` default."""
    name_date: str | None
    """The file's date, else a date in its name: context only, never ``created``."""
    people: tuple[str, ...]
    tags: tuple[str, ...]
    agent: str | None
    session: str | None
    mask: Callable[[str], str]

    @classmethod
    def of(cls, doc: Document, mask: Callable[[str], str]) -> _FileContext:
        fm = doc.frontmatter
        stem = doc.path.rsplit("/", 1)[-1].removesuffix(".md")
        # The file's own title, not its name, so renaming a file re-embeds nothing.
        h1 = next((h.title for h in doc.headings if h.level == 1), None)
        title = str(fm.get("title") or h1 or _readable_stem(stem))
        session = stem if doc.path.startswith(".sessions/") else None
        date = _date(fm.get("started") or fm.get("date") or fm.get("created"))
        if date is None and session and (m := _SESSION_NAME.match(stem)):
            date = f"{m.group(1)[:4]}-{m.group(1)[4:6]}-{m.group(1)[6:]}"
        agent = fm.get("agent")
        if agent is None and doc.path.startswith(".notes/") and doc.path.count("/") >= 2:
            agent = doc.path.split("/")[1]
        return cls(
            path=doc.path,
            title=mask(title or _date_words(_name_date(stem)) or stem),
            date=date,
            name_date=date or _name_date(stem),
            people=tuple(mask(n) for n in _names(fm, PEOPLE_KEYS)),
            tags=tuple(mask(n) for n in _names(fm, TAG_KEYS)),
            agent=str(agent) if agent else None,
            session=session,
            mask=mask,
        )

    def chunk(
        self,
        heading_path: tuple[str, ...],
        start: int,
        end: int,
        text: str,
        entry: Entry | None,
    ) -> Chunk:
        heading_path = tuple(self.mask(h) for h in heading_path)
        # the task's bookkeeping (Phase, Pointer), not knowledge: no importance of its own
        state = self.path == TASK_FILE and heading_path[-1:] == (STATE,)
        heading = " > ".join(heading_path)
        text = self.mask(text)
        created = (entry.created if entry else None) or self.date
        header = " > ".join([self.title, *heading_path[1:]] if heading_path else [self.title])
        if heading_path and heading_path[0].lower() != self.title.lower():
            header = " > ".join([self.title, *heading_path])
        extra = self.extra(header, created)
        embed_text = "\n".join([" · ".join([header, *extra]), text])
        first_heading = heading_path[0] if heading_path else ""
        in_heading = self.title.lower() == first_heading.lower()
        context = " · ".join([*([] if in_heading else [self.title]), *extra])
        return Chunk(
            id=_chunk_id(self.path, start, end, embed_text),
            path=self.path,
            start_line=start,
            end_line=end,
            heading=heading,
            text=text,
            embed_text=embed_text,
            text_hash=sha(embed_text),
            kind=entry.kind if entry else "block",
            type=STATE_TYPE if state else entry.type if entry else self.block_type(heading_path),
            importance=0.0 if state else entry.importance if entry else 0.5,
            created=created,
            entry_id=entry.id if entry else None,
            agent=self.agent,
            session=self.session if entry is None or not entry.source else entry.source,
            archived=entry.archived if entry else False,
            context=context,
        )

    def extra(self, header: str, created: str | None) -> list[str]:
        """What the header lacks of the file's context: the date in words (unless a heading
        has its year), participants (unless the header names them all), tags."""
        out = []
        day = (created or self.name_date or "")[:10]
        if day and day[:4] not in header:
            out.append(_date_words(day) or day)
        if self.people and not all(p.lower() in header.lower() for p in self.people):
            out.append(", ".join(self.people))
        if self.tags:
            out.append(", ".join(self.tags))
        return out

    def block_type(self, heading_path: tuple[str, ...]) -> str:
        for title in reversed(heading_path):
            if found := type_from_heading(title):
                return found
        return default_type_for_file(self.path)


def _same(text: str) -> str:
    return text


STATE_TYPE = "state"
"""The type of the task file's ``## State`` lines."""


def _readable_stem(stem: str) -> str:
    """A file name as words, without the date in it: ``20230508_135600_locomo-conv-26-s1``
    reads ``locomo conv 26 s1`` (the date goes into the context as words)."""
    words = _NAME_DATE.sub(lambda m: " " if _valid(m) else m.group(0), stem.lstrip("."))
    return " ".join(re.split(r"[\s_\-.]+", words)).strip()


def _name_date(stem: str) -> str | None:
    return next((day for m in _NAME_DATE.finditer(stem) if (day := _valid(m))), None)


def _valid(match: re.Match[str]) -> str | None:
    """The ISO date a file-name match stands for, or None (``20241340`` is no date)."""
    try:
        return dt.date(*(int(g) for g in match.groups())).isoformat()
    except ValueError:
        return None


def _date_words(day: str | None) -> str | None:
    """``2023-05-08`` → ``8 May 2023``: the words a question uses."""
    try:
        date = dt.date.fromisoformat(day[:10]) if day else None
    except ValueError:
        return None
    return f"{date.day} {date:%B} {date.year}" if date else None


def _names(frontmatter: object, keys: tuple[str, ...]) -> list[str]:
    """Names under the first of ``keys`` in the frontmatter: a list, or a comma-separated
    string; at most :data:`MAX_NAMES`, each one line."""
    if not hasattr(frontmatter, "get"):
        return []
    for key in keys:
        value = frontmatter.get(key)
        if not value:
            continue
        items = value if isinstance(value, list | tuple) else str(value).split(",")
        names = [" ".join(str(v).split()) for v in items if str(v).strip()]
        return list(dict.fromkeys(names))[:MAX_NAMES]
    return []


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
