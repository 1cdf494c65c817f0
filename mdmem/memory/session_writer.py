"""The :class:`Session` writer: one session recorded as it happens, in its file.

Every call appends to the file through the safe writes (lock, compare-and-swap, atomic
replace), so a crash loses at most the event being written and a person may edit the file
while the session runs. Secrets are masked before anything is written. The file's format (and
how it reads back): :mod:`mdmem.memory.session_format`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any

from mdmem.errors import EditNotApplicable, FileProblem
from mdmem.markdown import edits
from mdmem.markdown.frontmatter import set_frontmatter
from mdmem.markdown.parse import Document, newline_of, parse_document
from mdmem.markdown.sections import append_to_section
from mdmem.memory.session_format import (
    MAX_EVENT_CHARS,
    Event,
    SessionRecord,
    infer_importance,
    inline_text,
    iso_seconds,
    normal_action,
    render_event,
    render_paragraph,
)
from mdmem.redact import DEFAULT, Redactor
from mdmem.text import printable
from mdmem.writes.safe_writer import EditFile

log = logging.getLogger("mdmem")


class Session:
    """Records one session as it happens. Get one from ``Workspace.session(...)``.

    ``with ws.session("fix login bug") as s:`` — an exception inside the block is recorded
    as an ``error`` event, the session is marked ``failed``, and the exception propagates.
    Without a writer (minimal mode) the session is kept in memory only.
    """

    def __init__(
        self,
        session_id: str,
        title: str,
        agent: str,
        *,
        path: str | None,
        write: EditFile | None,
        started: dt.datetime,
        clock: Callable[[], dt.datetime] = dt.datetime.now,
        redactor: Redactor = DEFAULT,
    ) -> None:
        """``redactor`` masks secrets in everything recorded (the built-in rules by default)."""
        self.id = session_id
        self.title = title
        self.agent = agent
        self.path = path
        self.started = started
        self.status = "running"
        self.rounds = 0
        self.tools: dict[str, int] = {}
        self.events: list[Event] = []
        self.requests: list[str] = []
        self.responses: list[str] = []
        self.metadata: dict[str, str] = {}
        self._write = write
        self._clock = clock
        self._redactor = redactor
        self._front_broken = False
        self._tail: tuple[str, int] | None = None
        """The text this session last wrote, and the offset where its next event goes."""

    def __repr__(self) -> str:
        return f"Session({self.id!r}, status={self.status!r}, events={len(self.events)})"

    @property
    def written(self) -> bool:
        """Whether this session is recorded in a file (full mode)."""
        return self._write is not None

    def resume(self, doc: Document) -> None:
        """The file is ``doc`` (a parse its caller already has): the next events go straight
        to the end of its ``## Events`` when that is exactly where appending puts them, so
        appending to a long session costs no parse of it (an import adding two messages to a
        session of thousands). Otherwise nothing changes: the first event finds its place by
        parsing, as it always does. The file must still be ``doc.text`` when written (it is
        compared)."""
        at = edits.append_point(doc, "Events")
        self._tail = (doc.text, at) if at is not None else None

    def resume_at(self, text: str, offset: int) -> None:
        """As :meth:`resume`, for a caller that knows where the events go in ``text`` (an
        import that remembered it from its last write of the file, by the text's digest):
        ``offset`` must be what ``resume`` would find, and the file must still be ``text``."""
        self._tail = (text, offset)

    @property
    def append_point(self) -> tuple[str, int] | None:
        """The text this session last wrote and where its next event goes in it, when it
        knows (None after an edit elsewhere, or when the file's frontmatter is broken: the
        counts it holds are then not the file's)."""
        return None if self._front_broken else self._tail

    # ---- recording -------------------------------------------------------------------------

    def request(self, text: str) -> int:
        """What the user asked (each call adds one part). Returns how many secrets were masked
        (the part is kept exactly, but for ``[REDACTED:kind]`` in their place)."""
        masked = self._redactor.redact(_checked(text, "request"))
        self.requests.append(masked.text)
        self._edit(lambda t: self._append_part(t, "Request", masked.text))
        return masked.count

    def response(self, text: str) -> int:
        """What the agent answered (each call adds one part). Returns how many secrets were
        masked."""
        masked = self._redactor.redact(_checked(text, "response"))
        self.responses.append(masked.text)
        self._edit(lambda t: self._append_part(t, "Response", masked.text))
        return masked.count

    def event(self, action: str, text: str, importance: float | None = None) -> Event:
        """One step: ``planning``, ``thinking``, ``execute``, ``error``, ``complete``, ….

        Importance is inferred from the action unless given (error 0.9 … thinking 0.55).
        Secrets in ``text`` are masked before it is written; ``Event.redacted`` says how many.
        """
        return self._record([self._new_event(action, text, importance)])[0]

    def tool(
        self,
        name: str,
        args: Any = None,
        result: Any = None,
        *,
        ok: bool = True,
        importance: float | None = None,
    ) -> tuple[Event, Event | None]:
        """A tool call and (when given) its result, written together with the ``tools``
        counts of the frontmatter. A failed call (``ok=False``) records an ``error`` event."""
        label = inline_text(str(name)) or "tool"
        events = [self._new_event("tool_call", f"{label}({_render_args(args)})", importance)]
        if result is not None or not ok:
            text = _render_args(result) if result is not None else "failed"
            action = "tool_result" if ok else "error"
            events.append(self._new_event(action, f"{label} → {text}", importance))
        self.tools[label] = self.tools.get(label, 0) + 1
        written = self._record(events, front=self._front())
        return written[0], written[1] if len(written) > 1 else None

    def round(self) -> int:
        """Count one model round (one think → act cycle); returns the new count."""
        self.rounds += 1
        self._sync_front()
        return self.rounds

    def set_metadata(self, key: str, value: object) -> int:
        """A ``- key: value`` line in the Metadata section (files changed, ticket, cost…).
        Returns how many secrets were masked in it."""
        key = inline_text(key).replace(":", " ")
        if not key:
            raise ValueError("metadata key cannot be empty")
        # the value is checked with its key: `- api_key: ...` is an assignment
        masked = self._redactor.redact(f"{key}: {inline_text(str(value))}")
        key, _, text = masked.text.partition(": ")
        self.metadata[key] = text

        def edit(current: str) -> str:
            doc = parse_document(self.path or "", current)
            for entry in doc.entries:
                if entry.heading_path[-1:] == ("Metadata",) and entry.text.startswith(key + ":"):
                    lines = doc.lines
                    lines[entry.start_line - 1 : entry.end_line] = [f"- {key}: {text}{doc.newline}"]
                    return "".join(lines)
            return append_to_section(current, self.path or "", "Metadata", f"- {key}: {text}\n")

        self._edit(edit)
        return masked.count

    def close(self, status: str = "completed") -> None:
        """End the session: ``completed`` or ``failed`` (idempotent)."""
        if self.status != "running":
            return
        if status not in ("completed", "failed"):
            raise ValueError(f"status must be completed or failed, got {status!r}")
        self.status = status
        self._sync_front(final=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close("completed")
            return
        where = ""
        if tb is not None:
            frame = traceback.extract_tb(tb)[-1]
            where = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
        message = f"{type(exc).__name__}: {exc}{where}" if str(exc) else type(exc).__name__
        try:
            self.event("error", message)
        finally:
            self.close("failed")

    # ---- reading back ----------------------------------------------------------------------

    def record(self) -> SessionRecord:
        """This session as a SessionRecord (what ``Workspace.sessions`` would return)."""
        now = self._clock()
        return SessionRecord(
            id=self.id,
            path=self.path,
            title=self.title,
            agent=self.agent,
            started=iso_seconds(self.started),
            ended=None if self.status == "running" else iso_seconds(now),
            duration_s=round((now - self.started).total_seconds(), 1),
            rounds=self.rounds,
            tools=dict(self.tools),
            status=self.status,
            requests=tuple(self.requests),
            events=tuple(self.events),
            responses=tuple(self.responses),
            metadata=dict(self.metadata),
        )

    def to_messages(self) -> list[dict[str, str]]:
        return self.record().to_messages()

    # ---- internals -------------------------------------------------------------------------

    def _append_part(self, current: str, section: str, text: str) -> str:
        newline = newline_of(current)
        return _append_paragraph(current, self.path or "", section, text, newline)

    def _front(self, final: bool = False) -> dict[str, object]:
        values: dict[str, object] = {"status": self.status, "rounds": self.rounds}
        if self.tools:
            values["tools"] = dict(self.tools)
        if final:
            now = self._clock()
            values["ended"] = iso_seconds(now)
            values["duration_s"] = round((now - self.started).total_seconds(), 1)
        return values

    def _with_front(self, text: str, front: Mapping[str, object]) -> str:
        """Frontmatter keys set, unless a person broke the frontmatter: then the events still
        go in, the counts wait, and the log says why (once)."""
        try:
            return set_frontmatter(text, front)
        except EditNotApplicable as exc:
            if not self._front_broken:
                log.warning("%s: frontmatter not updated: %s", self.path, exc)
                self._front_broken = True
            return text

    def _sync_front(self, final: bool = False) -> None:
        self._record([], front=self._front(final))

    def _new_event(self, action: str, text: str, importance: float | None) -> Event:
        name = normal_action(action)
        value = infer_importance(name) if importance is None else _importance(importance)
        masked = self._redactor.redact(_checked(text, "event text"))  # before the cut
        body = _cap(masked.text)
        stamp = self._clock().strftime("%H:%M:%S")
        return Event(stamp, name, body, value, 0, redacted=masked.count)

    def _record(
        self, events: list[Event], front: Mapping[str, object] | None = None
    ) -> list[Event]:
        """Append events (and set frontmatter keys) in one safe write.

        The fast path: when the file is exactly what this session last wrote, the events go
        at the remembered end of ``## Events`` without parsing the file (appending stays cheap
        as the session grows). After a person's edit, the file is parsed once to find it.
        """
        if self._write is None:
            self.events += events
            return events
        path = self.path or ""
        pending: dict[str, Any] = {}

        def edit(current: str) -> str:
            newline = newline_of(current)
            blocks = [render_event(e.time, e.action, e.text, e.importance, newline) for e in events]
            if self._tail is not None and self._tail[0] == current:
                offset = self._tail[1]
                starts = [offset + sum(map(len, blocks[:n])) for n in range(len(blocks))]
                new = current[:offset] + "".join(blocks) + current[offset:]
                end = offset + sum(map(len, blocks))
            elif not blocks:  # frontmatter only: no need to find Events
                new, starts, end = current, [], -1
            else:
                new = current
                for block in blocks:
                    new = append_to_section(new, path, "Events", block)
                starts, end = _event_offsets(new, path, len(blocks))
            if front:
                shifted = self._with_front(new, front)
                shift = len(shifted) - len(new)
                new, starts = shifted, [x + shift for x in starts]
                end = end + shift if end >= 0 else -1
            pending.update(text=new, starts=starts, end=end)
            return new

        result = self._write_or_stop(edit)
        if result is None:
            self.events += events
            return events
        if result == pending.get("text"):
            self._tail = (result, pending["end"]) if pending["end"] >= 0 else None
            lines = [result.count("\n", 0, x) + 1 for x in pending["starts"]]
        else:
            self._tail, lines = None, [0] * len(events)
        written = [replace(e, line=line) for e, line in zip(events, lines, strict=True)]
        self.events += written
        return written

    def _edit(self, edit: Callable[[str], str]) -> str | None:
        self._tail = None  # an edit elsewhere: find the end of Events again next time
        return self._write_or_stop(edit)

    def _write_or_stop(self, edit: Callable[[str], str]) -> str | None:
        """Write, unless the file is gone: a person deleted it, so the session stops writing
        (it goes on in memory) rather than bring the file back."""
        if self._write is None:
            return None
        try:
            return self._write(edit)
        except FileProblem as exc:
            if (exc.reason or "").startswith("no such file"):
                log.warning("%s; session %s goes on in memory only", exc, self.id)
                self._write, self._tail = None, None
                return None
            raise


def _event_offsets(text: str, path: str, count: int) -> tuple[list[int], int]:
    """Character offsets where the last ``count`` events start, and where the next one goes."""
    doc = parse_document(path, text)
    events = [e for e in doc.entries if e.heading_path[-1:] == ("Events",)]
    lines = doc.lines
    starts_at = [0]
    for line in lines:
        starts_at.append(starts_at[-1] + len(line))
    if not events:  # nothing to anchor on: the slow path again next time
        return [], -1
    starts = [starts_at[e.start_line - 1] for e in events[len(events) - count :]] if count else []
    end = starts_at[events[-1].end_line]
    if not lines[events[-1].end_line - 1].endswith(("\n", "\r")):
        return starts, -1
    return starts, end


def _append_paragraph(current: str, path: str, section: str, text: str, newline: str) -> str:
    """Add a part at the end of ``## section``, a blank line from what is there."""
    doc = parse_document(path, current)
    heading = next((h for h in doc.headings if h.level == 2 and h.title.strip() == section), None)
    block = render_paragraph(text, newline)
    if heading is None:
        return edits.insert_entry(doc, "event", section, block)
    lines = doc.lines
    nxt = next((h.line for h in doc.headings if h.line > heading.line), len(lines) + 1)
    last = nxt - 2
    while last >= heading.line and not lines[last].strip():
        last -= 1
    at = last + 1
    lead = newline  # a blank line after the heading or the part before
    if not lines[at - 1].endswith(("\n", "\r")):
        lead = newline + lead
    trail = newline if at < len(lines) and lines[at].strip() else ""
    return "".join(lines[:at]) + lead + block + trail + "".join(lines[at:])


def _checked(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a string, got {type(text).__name__}")
    lines = printable(text.replace("\r\n", "\n").replace("\r", "\n")).split("\n")
    text = "\n".join(line.rstrip() for line in lines).strip()  # trailing blanks are not kept
    if not text:
        raise ValueError(f"{what} cannot be empty")
    return text


def _cap(text: str) -> str:
    if len(text) <= MAX_EVENT_CHARS:
        return text
    omitted = len(text) - MAX_EVENT_CHARS
    return text[:MAX_EVENT_CHARS] + f"\n[... {omitted:,} characters omitted]"


def _importance(value: float) -> float:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"importance must be between 0 and 1, got {value}")
    return float(value)


def _render_args(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
