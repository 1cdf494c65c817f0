"""Where the last import of a Claude Code log stopped reading, so that the next one reads only
what was appended since.

A Claude Code hook imports the session's log at every Stop: two new records, after 2,400
others. Reading every record again to find the new ones (and to prove, by ``source_digest``,
that what was imported before is still the start of the conversation) cost ~85-115 ms a Stop.

After an import that read a log to its end, :func:`remember` keeps (in
``.mdmem/import-logs.json``) what a reader of its records knows at that point, keyed by the log's
name: the number of bytes read, the SHA-256 of those bytes, the number of lines, the reader's
state (ids seen, tools' names, the lines where its title's candidates are: no text of the log),
the bad records met, and the digest chain's state after the turns read
(:meth:`~mdmem.integrations.importers.common.Conversation.chain`). :func:`read` goes on from
there only when the log's first bytes still have exactly that SHA-256 (they are read and
hashed: ~1 ms for a MB, the parse of the records is what cost), else it reads the whole log as
always. So any change to what was read (a record rewritten, the log truncated or replaced)
makes the import read it all; what is kept is a function of those bytes alone, and the import
checks it against the session file's own ``source_messages`` and ``source_digest`` before using
it. Nothing is kept unless the log ends with a whole line (a record being written is read again
next time) and the reader's clock is the same (a turn's local time depends on the time zone).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdmem.integrations.importers import claude_code
from mdmem.integrations.importers.common import (
    CHUNK,
    RECORD_ERRORS,
    BadRecord,
    CheckedText,
    Conversation,
    Report,
    jsonl,
    reason,
)

STATE_FILE = "import-logs.json"
"""In the workspace's ``.mdmem/``."""
VERSION = 1
KEEP = 32
"""Logs remembered per workspace (the newest read; a workspace imports a few at a time)."""


@dataclass(frozen=True)
class Read:
    """One log read: its conversation (None when it holds no turn), whether the read went on
    from a remembered point, and what to remember of it (None: nothing may be)."""

    conversation: Conversation | None
    resumed: bool
    state: dict[str, Any] | None


def read(path: Path, state_dir: Path, report: Report, *, fresh: bool = False) -> Read:
    """The conversation of the Claude Code log ``path``, read from where the last import
    remembered stopping when the log's first bytes are still those (unless ``fresh``), else
    from its start; bad records go to ``report`` as a whole read reports them, in order."""
    name = str(path)
    entry = None if fresh else _entry(state_dir, name)
    with open(path, "rb") as raw:
        hasher = hashlib.sha256()
        reader = claude_code.reader()
        first, problems, resumed = 1, [], False
        if entry is not None:
            prefix = raw.read(entry["size"])
            if len(prefix) == entry["size"] and hashlib.sha256(prefix).hexdigest() == entry["sha"]:
                lines = prefix.splitlines(keepends=True)
                try:
                    if len(lines) != entry["lines"]:
                        raise ValueError("another count of lines")
                    reader = claude_code.resume(entry["reader"], lines)
                    reader.chain_before = bytes.fromhex(entry["chain"])
                    problems = [(int(n), str(why)) for n, why in entry["problems"]]
                except (ValueError, KeyError, TypeError, IndexError):
                    reader = claude_code.reader()
                else:
                    hasher.update(prefix)
                    first, resumed = len(lines) + 1, True
            if not resumed:
                raw.seek(0)
        for line, why in problems:
            report(BadRecord(name, line, why))
        tap = _Tap(raw, hasher, b"\n" if resumed else b"")
        encoding = "utf-8" if resumed else "utf-8-sig"  # (a mark only at the file's start)
        text = io.TextIOWrapper(
            io.BufferedReader(tap, buffer_size=CHUNK),
            encoding=encoding,
            errors="surrogateescape",
            newline="",
        )
        stream = CheckedText(text, first)

        def note(bad: BadRecord) -> None:
            problems.append((bad.line, bad.reason))
            report(bad)

        for number, record in jsonl(stream, name, note, first):  # type: ignore[arg-type]
            reader.line = number
            try:
                reader.add(record)
            except RECORD_ERRORS as exc:
                note(BadRecord(name, number, reason(exc)))
    count = reader.skipped + len(reader.turns)
    conv = reader.conversation(name) if count else None
    state = None
    if tap.last == b"\n" and conv is not None:
        read_bytes = b"".join(tap.chunks)
        state = {
            "size": (entry["size"] if resumed and entry is not None else 0) + len(read_bytes),
            "sha": hasher.hexdigest(),
            "lines": first - 1 + len(read_bytes.splitlines()),
            "reader": reader.state(),
            "problems": problems,
            "clock": _clock(),
        }
    return Read(conv, resumed, state)


def remember(state_dir: Path, path: Path, done: Read) -> None:
    """After an import that wrote (or found already written) the whole of ``done``'s
    conversation: keep where its read stopped, or forget the log when nothing may be kept.
    Never raises: a state that cannot be written costs only the next import its shortcut."""
    name = str(path)
    try:
        state_path = state_dir / STATE_FILE
        try:
            with open(state_path, encoding="utf-8") as handle:
                saved: dict[str, Any] = json.load(handle)
            if saved.get("version") != VERSION or not isinstance(saved.get("logs"), dict):
                raise ValueError
        except (OSError, ValueError):
            saved = {"version": VERSION, "logs": {}}
        logs = saved["logs"]
        known = logs.pop(name, None)
        conv = done.conversation
        if done.state is None or conv is None:
            if known is None:
                return
        else:
            chain = conv.chain(conv.count)
            if chain is None:
                return
            logs[name] = {**done.state, "chain": chain.hex()}
        while len(logs) > KEEP:
            logs.pop(next(iter(logs)))
        _replace_whole(state_path, json.dumps(saved))
    except Exception:  # (the next import reads the whole log, as it always did)
        return


def _entry(state_dir: Path, name: str) -> dict[str, Any] | None:
    try:
        with open(state_dir / STATE_FILE, encoding="utf-8") as handle:
            saved = json.load(handle)
        if saved.get("version") != VERSION:
            return None
        entry = saved["logs"][name]
        if entry["clock"] != _clock() or not isinstance(entry["size"], int) or entry["size"] < 1:
            return None
        return dict(entry)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _clock() -> list[object]:
    """What a turn's local time depends on besides the log: the time zone."""
    return [os.environ.get("TZ"), list(time.tzname), time.timezone, time.altzone]


class _Tap(io.RawIOBase):
    """A binary stream that hashes and keeps what is read through it (the bytes parsed are
    exactly the bytes remembered), and knows the last byte."""

    def __init__(self, raw: Any, hasher: Any, last: bytes) -> None:
        super().__init__()
        self._raw = raw
        self._hasher = hasher
        self.chunks: list[bytes] = []
        self.last = last
        """The last byte read (before any: the last of what was read before, if anything)."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._hasher.update(data)
            self.chunks.append(data)
            self.last = data[-1:]
        return n


def _replace_whole(path: Path, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
