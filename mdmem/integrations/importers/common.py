"""What every importer shares: the shape a conversation is read into, bad records, streaming
readers of JSON and JSONL that know line numbers, and times.

Each format module turns records into :class:`Conversation` values and reports what it cannot
read as :class:`BadRecord` (file and line); writing them into the workspace is ``write.py``'s job.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

# The few internal functions the integrations use, in one place (the package is being laid out
# anew: when they move, only these lines change).
from mdmem.markdown.frontmatter import head_frontmatter, set_frontmatter
from mdmem.markdown.parse import parse_document
from mdmem.markdown.sections import append_to_section
from mdmem.memory.session_format import (
    MAX_EVENT_CHARS,
    render_event,
    session_skeleton,
    session_stem,
)
from mdmem.paths import slugify
from mdmem.text import printable

__all__ = [
    "KINDS",
    "MAX_EVENT_CHARS",
    "SESSIONS_DIR",
    "BadInput",
    "BadRecord",
    "Conversation",
    "LogReader",
    "Report",
    "Turn",
    "append_to_section",
    "each_in_array",
    "head_frontmatter",
    "json_array",
    "jsonl",
    "local_time",
    "one_log",
    "parse_document",
    "printable",
    "reason",
    "render_event",
    "session_heads",
    "session_skeleton",
    "session_stem",
    "set_frontmatter",
    "slugify",
    "text_of",
]

KINDS = (
    "user",
    "assistant",
    "thinking",
    "tool_call",
    "tool_result",
    "error",
    "summary",
    "attachment",
)
"""What a turn of a conversation can be; each is written as the session event of that name."""
CHUNK = 1 << 20
"""Bytes read at a time from an export (a conversation larger than this is read in more)."""

Report = Callable[["BadRecord"], None]
"""Where a reader sends the records it skips."""


@dataclass(frozen=True)
class Turn:
    """One thing said or done in a conversation."""

    kind: str
    """One of :data:`KINDS`."""
    text: str
    time: dt.datetime | None = None
    """Local time (naive, as session files hold it), or None when the source has none."""
    name: str = ""
    """The tool's name (tool calls and results)."""
    sidechain: bool = False
    """Said in a side conversation (a Claude Code subagent), not the main one."""

    def fingerprint(self) -> bytes:
        """What identifies the turn at its source (its time aside): the idempotence digest."""
        return json.dumps([self.kind, self.name, self.sidechain, self.text]).encode("utf-8")


@dataclass(frozen=True)
class Conversation:
    """A conversation as read from an export, before it is written."""

    source: str
    """The format it came from: ``chatgpt``, ``claude``, ``claude-code``, ``codex``, ``jsonl``."""
    id: str
    """The source's own id for it: the idempotence key."""
    title: str
    turns: tuple[Turn, ...]
    started: dt.datetime | None
    where: str
    """``file:line`` where it starts, for messages."""
    skipped: int = 0
    """Turns of the conversation before ``turns`` that were not read again (an import that
    resumed a log where the last one stopped: :mod:`.log_resume`); ``turns`` are the rest."""
    chain_before: bytes = b""
    """The digest chain's state after the skipped turns (:meth:`chain`)."""

    @property
    def count(self) -> int:
        """Turns in the whole conversation, the skipped ones included."""
        return self.skipped + len(self.turns)

    def chain(self, count: int) -> bytes | None:
        """The digest chain's state after the first ``count`` turns (0 ≤ count ≤
        :attr:`count`): ``c(0) = b""``, ``c(n) = sha256(c(n-1) + fingerprint(n) + b"\0")``.
        A chain, not one hash of them all, so that a later import can go on from its last
        state without the turns before (a hash's own state cannot be kept); None for a
        count among the skipped turns, or out of range."""
        if count < self.skipped or count > self.count:
            return None
        # An import asks for two or three prefixes, each longer than the last (what was
        # imported, then all): one pass over the turns, the chain's state kept between them.
        cache = self.__dict__.get("_chain")
        if cache is None or cache[0] is not self.turns or cache[1] > count:
            cache = (self.turns, self.skipped, self.chain_before)
        turns, done, state = cache
        for turn in turns[done - self.skipped : count - self.skipped]:
            state = hashlib.sha256(state + turn.fingerprint() + b"\0").digest()
        object.__setattr__(self, "_chain", (turns, count, state))  # (no field: not compared)
        return state

    def digest(self, count: int) -> str | None:
        """A short hash of the first ``count`` turns (as ``turns[:count]`` counts them):
        re-imports compare it with a session's ``source_digest`` to see that what was imported
        before is still the start of the conversation. None when those turns were skipped."""
        if not self.skipped:
            count = len(range(len(self.turns))[:count])
        state = self.chain(min(count, self.count))
        if state is None:
            return None
        return hashlib.sha256(state).hexdigest()[:16]

    def legacy_digest(self, count: int) -> str | None:
        """The digest imports wrote before the chain (one SHA-256 of the first ``count`` turns'
        fingerprints): a session stamped so is still recognized, and stamped anew at its next
        append. None when turns were skipped."""
        if self.skipped:
            return None
        hasher = hashlib.sha256()
        for turn in self.turns[:count]:
            hasher.update(turn.fingerprint())
            hasher.update(b"\0")
        return hasher.hexdigest()[:16]

    @property
    def start(self) -> dt.datetime:
        """When it began: the source's date, else its first turn's time, else now."""
        first = next((t.time for t in self.turns if t.time is not None), None)
        return self.started or first or dt.datetime.now().replace(microsecond=0)


@dataclass(frozen=True)
class BadRecord:
    """A record that could not be read: skipped, and named so a person can look."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}; skipped"


class BadInput(Exception):
    """A file that cannot be read on (broken JSON syntax): the rest of it is skipped."""

    def __init__(self, record: BadRecord) -> None:
        super().__init__(str(record))
        self.record = record


SESSIONS_DIR = ".sessions"
_HEAD_BYTES = 16_384
"""How much of a session file is read for its frontmatter when looking for an import."""


def session_heads(root: Path, marker: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, frontmatter)`` of each session file whose head mentions ``marker``, oldest
    name first: finding an imported conversation reads a few KB of each file, never all."""
    folder = root / SESSIONS_DIR
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.md")):
        try:
            with open(path, "rb") as handle:
                head = handle.read(_HEAD_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        if marker in head:
            yield f"{SESSIONS_DIR}/{path.name}", head_frontmatter(head) or {}


# ---- streaming readers -----------------------------------------------------------------------


def jsonl(
    stream: IO[str], name: str, report: Report, first: int = 1
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each line that holds a JSON object; blank lines pass,
    anything else is reported and skipped. ``first``: the number of the stream's first line
    (a log read on from where an import stopped; its :class:`CheckedText` counts from it)."""
    for number, line in enumerate(stream, first):
        if not line.strip():
            continue
        if undecodable_line(stream, number, number) is not None:
            report(BadRecord(name, number, not_utf8(stream, number)))
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            report(BadRecord(name, number, f"not JSON ({_what(exc)} at column {exc.colno})"))
            continue
        if not isinstance(value, dict):
            report(BadRecord(name, number, f"a JSON {type(value).__name__}, not an object"))
            continue
        yield number, value


def json_array(stream: IO[str], name: str) -> Iterator[tuple[int, Any]]:
    """The items of a top-level JSON array, ``(line where each starts, item)``, read a chunk at
    a time so an export of any size needs only one item in memory.

    Broken syntax raises :class:`BadInput` naming the line (nothing after it can be trusted).
    """
    reader = _ArrayReader(stream, name)
    yield from reader.items()


RECORD_ERRORS = (KeyError, TypeError, ValueError, AttributeError)
"""What reading one malformed record raises: reported with its line and skipped."""


def each_in_array(
    stream: IO[str], name: str, report: Report, parse: Callable[[Any, str], Conversation]
) -> Iterator[Conversation]:
    """The conversations of an export that is one JSON array of them (ChatGPT's, Claude's): a
    conversation that cannot be read is reported by its line and the rest still come."""
    reader = _ArrayReader(stream, name)
    for n, (line, item) in enumerate(reader.items(), 1):
        bad = undecodable_line(stream, line, reader.end_line)
        if bad is not None:
            report(BadRecord(name, bad, f"conversation {n}: {not_utf8(stream, bad)}"))
            continue
        try:
            yield parse(item, f"{name}:{line}")
        except RECORD_ERRORS as exc:
            report(BadRecord(name, line, f"conversation {n}: {reason(exc)}"))


class LogReader(Protocol):
    """Gathers one conversation from a log's records, one at a time."""

    turns: list[Turn]

    def add(self, record: dict[str, Any]) -> None: ...

    def conversation(self, name: str) -> Conversation: ...


def one_log(
    stream: IO[str], name: str, report: Report, reader: LogReader
) -> Iterator[Conversation]:
    """The one conversation a JSONL log holds (Claude Code's, Codex's), none if it holds no
    message; a record that cannot be read is reported by its line."""
    for line, record in jsonl(stream, name, report):
        try:
            reader.add(record)
        except RECORD_ERRORS as exc:
            report(BadRecord(name, line, reason(exc)))
    if reader.turns:
        yield reader.conversation(name)


class _ArrayReader:
    def __init__(self, stream: IO[str], name: str) -> None:
        self.stream = stream
        self.name = name
        self.buffer = ""
        self.pos = 0
        self.lines_before = 0
        """Newlines in the text already dropped from the buffer."""
        self.eof = False
        self.decoder = json.JSONDecoder()
        self.end_line = 1
        """The line the last item read ends on."""
        self.dropped = False
        """Whether text before the buffer was let go (a column then may not be known)."""

    def items(self) -> Iterator[tuple[int, Any]]:
        if self._next_char() != "[":
            self._fail(self.pos, "not a JSON array (an export's conversations.json is one)")
        self.pos += 1
        if self._next_char() == "]":
            return
        while True:
            start = self.pos
            item = self._decode()
            self.end_line = self._line(max(start, self.pos - 1))
            yield self._line(start), item
            following = self._next_char()
            if following == "]":
                return
            if following != ",":
                self._fail(self.pos, "expected ',' or ']' after an item")
            self.pos += 1
            self._next_char()
            self._compact()

    def _decode(self) -> Any:
        while True:
            try:
                item, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    self._fail(exc.pos, exc.msg)
                self._read(max(CHUNK, len(self.buffer) - self.pos))
                continue
            if end == len(self.buffer) and not self.eof and not isinstance(item, dict | list):
                self._read(CHUNK)  # a number may go on in the next chunk
                continue
            self.pos = end
            return item

    def _next_char(self) -> str:
        """The next character that is not white space (``""`` at the end); reads as needed."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if self.eof:
                return ""
            self._read(CHUNK)

    def _read(self, size: int) -> None:
        chunk = self.stream.read(size)
        if not chunk:
            self.eof = True
        self.buffer += chunk

    def _compact(self) -> None:
        if self.pos > CHUNK:
            self.lines_before += self.buffer.count("\n", 0, self.pos)
            self.dropped = True
            self.buffer = self.buffer[self.pos :]
            self.pos = 0

    def _line(self, pos: int) -> int:
        return self.lines_before + self.buffer.count("\n", 0, pos) + 1

    def _fail(self, pos: int, reason: str) -> None:
        reason = reason.removesuffix(" at")  # json's "… starting at": the column follows
        start = self.buffer.rfind("\n", 0, pos)
        where = f" at column {pos - start}" if start >= 0 or not self.dropped else ""
        raise BadInput(BadRecord(self.name, self._line(pos), f"broken JSON: {reason}{where}"))


def _what(exc: json.JSONDecodeError) -> str:
    """json's message without its dangling "at" ("Unterminated string starting at"), which
    "at column N" follows."""
    return exc.msg.removesuffix(" at")


_ESCAPED = re.compile("[\udc80-\udcff]")
"""A byte that is not UTF-8, as the ``surrogateescape`` decoder leaves it."""


class CheckedText(io.TextIOBase):
    """UTF-8 text of a stream in which each byte that is not UTF-8 reads as U+FFFD and is noted
    by line (``bad``: line → where and which byte), so the record holding it is named and
    skipped instead of imported with the replacement character and no word. Lines count as
    the readers count them: by ``readline`` call, or by ``\\n`` in what ``read`` returned."""

    def __init__(self, inner: IO[str], first: int = 1) -> None:
        super().__init__()
        self._inner = inner
        self.bad: dict[int, str] = {}
        self._line = first
        self._column = 1

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        text = self._inner.read(-1 if size is None else size)
        if _ESCAPED.search(text) is not None:
            text = self._note(text)
        newlines = text.count("\n")
        self._line += newlines
        self._column = len(text) - text.rfind("\n") if newlines else self._column + len(text)
        return text

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        text = self._inner.readline(-1 if size is None else size)
        self._column = 1
        if _ESCAPED.search(text) is not None:
            text = self._note(text)
        self._line += 1
        return text

    def _note(self, text: str) -> str:
        for match in _ESCAPED.finditer(text):
            before = text.rfind("\n", 0, match.start())
            line = self._line + text.count("\n", 0, match.start())
            column = match.start() - before if before >= 0 else self._column + match.start()
            byte = ord(match.group()) - 0xDC00
            self.bad.setdefault(line, f"not UTF-8 text (byte 0x{byte:02x} at column {column})")
        return _ESCAPED.sub("\ufffd", text)


def undecodable_line(stream: IO[str], first: int, last: int) -> int | None:
    """The first line from ``first`` to ``last`` where a :class:`CheckedText` met a byte that
    is not UTF-8, or None."""
    bad = getattr(stream, "bad", None)
    found = [line for line in bad or () if first <= line <= last]
    return min(found) if found else None


def not_utf8(stream: IO[str], line: int) -> str:
    """What is wrong on ``line`` (one :func:`undecodable_line` found), and what to do."""
    return f"{stream.bad[line]}: save the file as UTF-8 and import it again"  # type: ignore[attr-defined]


class Meter(io.RawIOBase):
    """A binary stream that counts what is read through it (for the progress bar)."""

    def __init__(self, raw: IO[bytes], advance: Callable[[int], None]) -> None:
        super().__init__()
        self._raw = raw
        self._advance = advance

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        size = len(data)
        buffer[:size] = data
        if size:
            self._advance(size)
        return size


def text_stream(raw: IO[bytes], advance: Callable[[int], None]) -> IO[str]:
    """UTF-8 text (a byte-order mark dropped) of a binary stream; a byte that is not UTF-8 is
    noted by line (:class:`CheckedText`)."""
    buffered = io.BufferedReader(Meter(raw, advance), buffer_size=CHUNK)
    inner = io.TextIOWrapper(buffered, encoding="utf-8-sig", errors="surrogateescape", newline="")
    return CheckedText(inner)  # type: ignore[return-value]


# ---- values ----------------------------------------------------------------------------------


def local_time(value: object) -> dt.datetime | None:
    """A source's time (epoch seconds, or ISO 8601 with or without a zone) as local naive time,
    as native session files hold it; None when there is none or it is no time."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            if not math.isfinite(value):
                return None
            seconds = value / 1000 if value > 1e11 else value  # milliseconds
            return dt.datetime.fromtimestamp(seconds).replace(microsecond=0)
        if isinstance(value, str) and value.strip():
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            if moment.tzinfo is not None:
                moment = moment.astimezone().replace(tzinfo=None)
            return moment.replace(microsecond=0)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def text_of(value: object) -> str:
    """The text of a content value as sources write it: a string, a list of parts (strings or
    ``{"type": "text", "text": ...}``), or a part; images and other media as ``[image]``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for part in value if (t := text_of(part)))
    if isinstance(value, dict):
        for key in ("text", "content", "output", "result"):
            if key in value and isinstance(value[key], str | list | dict):
                return text_of(value[key])
        kind = str(value.get("type") or value.get("content_type") or "")
        if "image" in kind:
            return "[image]"
        return f"[{kind}]" if kind else ""
    return str(value)


def reason(exc: Exception) -> str:
    """Why a record could not be read, in a few words."""
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    return str(exc) or type(exc).__name__


def as_json(value: object) -> str:
    """Tool arguments as one line of JSON (a string stays as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
