"""Sessions: the event stream. One Markdown file per session, written as the session goes.

A session file is ``.sessions/YYYYMMDD_HHMMSS_<agent>-<random id>_<slug>.md``::

    ---
    agent: coder
    started: 2026-11-19T14:22:10
    status: running            # then completed, failed, or interrupted (its writer died)
    rounds: 3
    host: build-box            # the writer: machine, process id, process start
    pid: 41872
    pid_start: 1234567
    tools: {shell: 2, edit_file: 1}
    ---
    # Session: fix login bug

    ## Request
    ## Events
    - 14:22:48 [planning] Reproduce first, then fix <!-- mdmem importance=0.8 -->
    ## Response
    ## Metadata

Every call appends to the file through the safe writes (lock, compare-and-swap, atomic
replace), so a crash loses at most the event being written and a person may edit the file
while the session runs. What a session is given reads back exactly (up to line endings and
trailing whitespace): a Request/Response line that would read as a heading is escaped, and
text no escape keeps exact (or event text that is not one plain line) goes verbatim into a
fenced block.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import re
import secrets
import socket
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from mdmem.errors import EditNotApplicable, FileProblem, MdmemError
from mdmem.layout import SESSIONS_DIR
from mdmem.markdown import edits
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import Document, block_tokens, newline_of, parse_document, split_lines
from mdmem.paths import slugify
from mdmem.redact import DEFAULT, Redactor
from mdmem.text import one_line, printable
from mdmem.writes.safe_writer import TEMP_SUFFIX, EditFile, pid_alive

log = logging.getLogger("mdmem")
SECTIONS = ("Request", "Events", "Response", "Metadata")
SUMMARY_SECTION = "Summary"
MAX_EVENT_CHARS = 20_000
"""Longer event text (a huge tool output) is cut, and the cut is marked in the file."""

IMPORTANCE = {
    "error": 0.9,
    "planning": 0.8,
    "tool_result": 0.75,
    "tool_call": 0.7,
    "execute": 0.65,
    "complete": 0.6,
    "thinking": 0.55,
}
"""Importance of an event inferred from its action when the caller gives none."""
DEFAULT_EVENT_IMPORTANCE = 0.5
CHAT_ROLES = ("user", "assistant")
"""Event actions that are chat turns: read back as messages of that role."""
_ALIASES = {
    "plan": "planning",
    "think": "thinking",
    "thought": "thinking",
    "reasoning": "thinking",
    "tool": "tool_call",
    "call": "tool_call",
    "result": "tool_result",
    "observation": "tool_result",
    "exec": "execute",
    "execution": "execute",
    "action": "execute",
    "done": "complete",
    "completed": "complete",
    "finish": "complete",
    "failure": "error",
    "failed": "error",
    "exception": "error",
}
_ACTION_RE = re.compile(r"^(?=.{1,32}$)[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)*$")
"""A short lowercase word, or dotted words (``node.tool_result``) as agent frameworks name them."""
_EVENT_RE = re.compile(
    r"^(?P<time>\d{1,2}:\d{2}(?::\d{2})?)?\s*\[(?P<action>[^\]\n]+)\]\s*(?P<text>.*)$", re.S
)
_FENCE_RE = re.compile(r"^(`{3,})verbatim[ \t]*\n(?P<body>.*?)\n?\1[ \t]*$", re.S)
"""A block mdmem fenced to keep text verbatim (any other fence is the writer's own text)."""
_HEADING_LIKE = r"\\*(?:#|=+[ \t]*$|-+[ \t]*$)"
_ESCAPE_RE = re.compile(rf"^(?P<indent>[ ]{{0,3}})(?={_HEADING_LIKE})")
_UNESCAPE_RE = re.compile(rf"^(?P<indent>[ ]{{0,3}})\\(?={_HEADING_LIKE})")
_CODE_TOKENS = ("fence", "code_block", "html_block")
_NAME_RE = re.compile(r"^(?P<stamp>\d{8}_\d{6})_(?P<slug>[a-z0-9_-]+)$")
_SAFE_SCALAR = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+-]*$")


def normal_action(action: str) -> str:
    """``"Tool Call"`` → ``tool_call``; actions are short lowercase words, or dotted words
    (``node.error``) kept as written."""
    name = re.sub(r"[\s-]+", "_", action.strip().lower())
    if not _ACTION_RE.match(name):
        raise ValueError(
            f"invalid event action {action!r}: a short word such as planning, execute, error "
            "(or dotted words, such as node.error)"
        )
    return name


def infer_importance(action: str) -> float:
    """error 0.9, planning 0.8, tool result 0.75, tool call 0.7, execute 0.65, complete 0.6,
    thinking 0.55, anything else 0.5. A dotted name counts by its last part (``node.error``)."""
    return IMPORTANCE.get(_kind(normal_action(action)), DEFAULT_EVENT_IMPORTANCE)


def canonical_action(action: str) -> str:
    """The known kind an action names (``plan``, ``node.planning`` → ``planning``); an action
    that names none stays as it is (``node.custom``)."""
    name = normal_action(action)
    kind = _kind(name)
    return kind if kind in IMPORTANCE or "." not in name else name


def _kind(name: str) -> str:
    last = name.rsplit(".", 1)[-1]
    return _ALIASES.get(last, last)


# ---- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One line of a session's event stream."""

    time: str
    """``HH:MM:SS`` as written (local time of the session), or empty."""
    action: str
    text: str
    importance: float
    line: int = 0
    """1-based line in the session file when it was read or written (later writes above it,
    such as a longer frontmatter, move it down); 0 when not in a file."""
    redacted: int = field(default=0, compare=False)
    """Secrets masked (``[REDACTED:kind]``) in the text when it was recorded; 0 when read."""

    @property
    def canonical(self) -> str:
        """The action as one of the known kinds (``plan`` → ``planning``)."""
        try:
            return canonical_action(self.action)
        except ValueError:
            return self.action

    def to_dict(self) -> dict[str, object]:
        return {
            "time": self.time,
            "action": self.action,
            "text": self.text,
            "importance": self.importance,
            "line": self.line,
        }


@dataclass(frozen=True)
class SessionRecord:
    """A session as read back from its file (or as recorded in memory, in minimal mode)."""

    id: str
    """The file's stem, e.g. ``20261119_142210_invoice-status-enum-ci``."""
    path: str | None
    title: str
    agent: str
    started: str | None
    ended: str | None
    duration_s: float | None
    rounds: int
    tools: Mapping[str, int]
    status: str
    requests: tuple[str, ...]
    events: tuple[Event, ...]
    responses: tuple[str, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""
    """The ``## Summary`` section (compaction writes it in full mode)."""

    @property
    def request(self) -> str:
        return "\n\n".join(self.requests)

    @property
    def response(self) -> str:
        return "\n\n".join(self.responses)

    @property
    def date(self) -> str | None:
        return self.started[:10] if self.started else None

    def to_messages(self) -> list[dict[str, str]]:
        """The session as chat messages (user requests, assistant events, tool results).

        A ``[user]`` or ``[assistant]`` event (a chat turn, as imports write them) is a
        message of that role, its time in ``timestamp``."""
        out: list[dict[str, str]] = [{"role": "user", "content": r} for r in self.requests]
        day = f"{self.date} " if self.date else ""
        for event in self.events:
            if event.action in CHAT_ROLES:
                turn = {"role": event.action, "content": event.text}
                if self.date and event.time:
                    turn["timestamp"] = f"{self.date}T{event.time}"
                out.append(turn)
                continue
            role = "tool" if event.canonical == "tool_result" else "assistant"
            stamp = f"{day}{event.time} " if event.time else day
            out.append({"role": role, "content": f"{stamp}[{event.action}] {event.text}"})
        out += [{"role": "assistant", "content": r} for r in self.responses]
        return out

    def to_dict(self, events: bool = True) -> dict[str, object]:
        data: dict[str, object] = {
            "id": self.id,
            "path": self.path,
            "title": self.title,
            "agent": self.agent,
            "started": self.started,
            "ended": self.ended,
            "duration_s": self.duration_s,
            "rounds": self.rounds,
            "tools": dict(self.tools),
            "status": self.status,
            "request": self.request,
            "response": self.response,
            "metadata": dict(self.metadata),
            "summary": self.summary,
        }
        if events:
            data["events"] = [e.to_dict() for e in self.events]
        return data


def session_stem(started: dt.datetime, agent: str, title: str) -> str:
    """A new session's file name (no ``.md``): ``YYYYMMDD_HHMMSS_<agent>-<6 hex>_<slug>``.

    The agent and a random id make two machines writing sessions of one title in the same
    second (then merged by git or a sync tool) never pick the same name; files named before
    (``YYYYMMDD_HHMMSS_<slug>``) read as they always did."""
    return (
        f"{started.strftime('%Y%m%d_%H%M%S')}_{slugify(agent)}-{secrets.token_hex(3)}"
        f"_{slugify(title)}"
    )


def is_stamped(name: str) -> bool:
    """Whether a session file's name starts with its start time (YYYYMMDD_HHMMSS_)."""
    return bool(re.match(r"^\d{8}_\d{6}_", name))


def is_session_path(path: str) -> bool:
    return path.startswith(SESSIONS_DIR + "/") and path.endswith(".md")


def parse_session(doc: Document) -> SessionRecord:
    """Read a session file. Hand-written or hand-edited ones get sensible defaults."""
    fm = doc.frontmatter
    stem = doc.path.rsplit("/", 1)[-1].removesuffix(".md")
    h1 = next((h.title for h in doc.headings if h.level == 1), "")
    title = re.sub(r"^session:\s*", "", h1, flags=re.I).strip() or stem
    sections = _sections(doc)
    started = _iso(fm.get("started"))
    if started is None and (m := _NAME_RE.match(stem)):
        s = m.group("stamp")
        started = f"{s[:4]}-{s[4:6]}-{s[6:8]}T{s[9:11]}:{s[11:13]}:{s[13:15]}"
    listed = fm.get("tools")
    tools = listed if isinstance(listed, dict) else {}
    events = tuple(
        _event(e) for e in doc.entries if e.heading_path and e.heading_path[-1] == "Events"
    )
    metadata = {}
    for line in sections.get("Metadata", "").splitlines():
        if m := re.match(r"^[-*+]\s+([^:]+):\s*(.*)$", line.strip()):
            metadata[m.group(1).strip()] = m.group(2).strip()
    return SessionRecord(
        id=stem,
        path=doc.path,
        title=title,
        agent=str(fm.get("agent") or "default"),
        started=started,
        ended=_iso(fm.get("ended")),
        duration_s=_number(fm.get("duration_s")),
        rounds=int(_number(fm.get("rounds")) or 0),
        tools={str(k): int(_number(v) or 0) for k, v in tools.items()},
        status=str(fm.get("status") or "unknown"),
        requests=_paragraphs(sections.get("Request", "")),
        events=tuple(e for e in events if e is not None),
        responses=_paragraphs(sections.get("Response", "")),
        metadata=metadata,
        # the compaction stamp is for the file's reader, not part of the summary
        summary=re.sub(r"(?m)^<!--.*?-->[ \t]*\n?", "", sections.get(SUMMARY_SECTION, "")).strip(),
    )


def _sections(doc: Document) -> dict[str, str]:
    """Level-2 section title → its raw text (up to the next heading of level ≤ 2)."""
    lines = doc.lines
    out: dict[str, str] = {}
    tops = [h for h in doc.headings if h.level <= 2]
    for n, heading in enumerate(tops):
        if heading.level != 2:
            continue
        end = tops[n + 1].line - 1 if n + 1 < len(tops) else len(lines)
        text = "".join(lines[heading.line : end]).replace("\r\n", "\n").replace("\r", "\n")
        out.setdefault(heading.title.strip(), text)
    return out


def _paragraphs(text: str) -> tuple[str, ...]:
    """A Request/Response section → its parts: runs of Markdown blocks between blank lines
    (a fenced block is one part, blank lines inside it included), mdmem's fences unwrapped
    and its escapes undone (:func:`unescape_lines`)."""
    lines = text.split("\n")
    spans: list[list[int]] = []
    for token in block_tokens(text):
        if token.level != 0 or not token.map or token.nesting == -1:
            continue
        start, end = token.map
        while end > start and not lines[end - 1].strip():
            end -= 1  # a list's lines can end in a blank one: the next block is another part
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    parts: list[str] = []
    for a, b in spans:
        part = "\n".join(lines[a:b]).strip("\n")  # indents are content
        if not part.strip():
            continue
        fenced = _FENCE_RE.match(part.strip())
        if fenced:  # verbatim: nothing in it is escaped
            parts.append(fenced.group("body"))
        else:
            parts.append(unescape_lines(part))
    return tuple(parts)


def escape_lines(text: str) -> str:
    """``text`` with each line that could read as a heading escaped, so it renders as text.

    A line outside code (fenced, indented or HTML blocks) is escaped when, after at most three
    spaces, it is a run of backslashes (maybe none) then ``#``, or only ``=`` or only ``-``: it
    gains one backslash there (``## x`` → ``\\## x``; a person's own ``\\# x`` →
    ``\\\\# x``). :func:`unescape_lines` takes one backslash from exactly those lines, so the
    two are inverses line by line. Writers check the round trip and fence the text when it
    fails (the escaped text can parse differently, e.g. a heading was ending an HTML block).
    """
    return _outside_code(text, _ESCAPE_RE, r"\g<indent>\\")


def unescape_lines(text: str) -> str:
    """:func:`escape_lines` undone: one backslash off each line it would escape."""
    return _outside_code(text, _UNESCAPE_RE, r"\g<indent>")


def _outside_code(text: str, pattern: re.Pattern[str], replacement: str) -> str:
    """``pattern`` replaced once on each line of ``text`` that is not in a code or HTML block
    (at any depth)."""
    lines = text.split("\n")
    if not any(pattern.match(line) for line in lines):
        return text  # the common case: no need to parse
    code = {
        n
        for t in block_tokens(text)
        if t.type in _CODE_TOKENS and t.map
        for n in range(t.map[0], t.map[1])
    }
    return "\n".join(
        line if n in code else pattern.sub(replacement, line, count=1)
        for n, line in enumerate(lines)
    )


def _event(entry: Entry) -> Event | None:
    match = _EVENT_RE.match(entry.text)
    if not match:
        return Event("", "note", entry.text, entry.importance, entry.start_line)
    first, _, rest = match.group("text").partition("\n")
    text = first.strip()
    if rest.strip():
        body = _unfence(rest.strip())
        # a fenced block holds the whole text (the item line only a preview of it)
        text = body if body != rest.strip() else f"{text}\n{rest.strip()}".strip()
    action = match.group("action").strip()
    importance = entry.importance if "importance" in entry.meta else _safe_infer(action)
    return Event(match.group("time") or "", action, text, importance, entry.start_line)


def _safe_infer(action: str) -> float:
    try:
        return infer_importance(action)
    except ValueError:
        return DEFAULT_EVENT_IMPORTANCE


def _unfence(text: str) -> str:
    match = _FENCE_RE.match(text.strip())
    return match.group("body") if match else text


def _iso(value: object) -> str | None:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value) if value else None


def _number(value: object) -> float | None:
    """A number written by hand, or None (not a number, or not a finite one)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, int | float) else float(str(value))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and abs(number) < 1e12 else None


# ---- writing ---------------------------------------------------------------------------------


def session_skeleton(
    title: str,
    agent: str,
    started: dt.datetime,
    newline: str = "\n",
    writer: Mapping[str, object] | None = None,
) -> str:
    """A new session file; ``writer`` (:func:`writer_stamp`) names the process writing it."""
    front = {"agent": agent, "started": _stamp(started), "status": "running", "rounds": 0}
    front.update(writer or {})
    lines = ["---", *(f"{k}: {_yaml_value(v)}" for k, v in front.items()), "---"]
    lines += [f"# Session: {_one_line(title)}", ""]
    for name in SECTIONS:
        lines += [f"## {name}", ""]
    return newline.join(lines)


def set_frontmatter(text: str, values: Mapping[str, object]) -> str:
    """Set top-level frontmatter keys, one line each; every other line stays as it was."""
    lines = split_lines(text)
    newline = (lines[0][len(lines[0].rstrip("\r\n")) :] if lines else "") or "\n"
    if not lines or lines[0].rstrip("\r\n").strip() != "---":
        block = ["---", *(f"{k}: {_yaml_value(v)}" for k, v in values.items()), "---"]
        return newline.join(block) + newline + text
    end = next(
        (n for n in range(1, len(lines)) if lines[n].rstrip("\r\n").strip() in ("---", "...")),
        None,
    )
    if end is None:
        raise EditNotApplicable("the frontmatter has no closing '---'")
    pending = dict(values)
    out = [lines[0]]
    n = 1
    while n < end:
        key = lines[n].split(":", 1)[0]
        if key in pending and not lines[n][:1].isspace():
            out.append(f"{key}: {_yaml_value(pending.pop(key))}{newline}")
            n += 1
            # a block-style value (indented lines below the key, as Obsidian writes) goes too
            while n < end and (lines[n][:1] in (" ", "\t") or lines[n].lstrip().startswith("- ")):
                n += 1
            continue
        out.append(lines[n])
        n += 1
    extra = [f"{k}: {_yaml_value(v)}{newline}" for k, v in pending.items()]
    return "".join(out + extra + lines[end:])


def append_to_section(text: str, path: str, title: str, block: str) -> str:
    """Append ``block`` (whole lines) at the end of ``## title``, creating it if missing."""
    doc = parse_document(path, text)
    return edits.insert_entry(doc, "event", title, block)


def section_text(text: str, path: str, title: str) -> str:
    """The raw text of ``## title`` (empty when there is none)."""
    return _sections(parse_document(path, text)).get(title, "")


def set_section(text: str, path: str, title: str, body: str) -> str:
    """Make ``## title`` hold exactly ``body`` (replacing what it held), adding it at the end
    of the file when missing. Everything outside the section stays as it was."""
    doc = parse_document(path, text)
    newline = doc.newline
    block = body.strip("\n").replace("\n", newline) + newline
    heading = next((h for h in doc.headings if h.level == 2 and h.title.strip() == title), None)
    lines = doc.lines
    if heading is None:
        lead = "" if not lines or lines[-1].strip() == "" else newline
        if lines and not lines[-1].endswith(("\n", "\r")):
            lead = newline + newline
        return text + lead + f"## {title}{newline}{newline}" + block
    end = next((h.line - 1 for h in doc.headings if h.line > heading.line and h.level <= 2), None)
    end = len(lines) if end is None else end
    trail = newline if end < len(lines) else ""
    return "".join(lines[: heading.line]) + newline + block + trail + "".join(lines[end:])


def render_event(time: str, action: str, text: str, importance: float, newline: str) -> str:
    """``- HH:MM:SS [action] text <!-- mdmem importance=… -->``, long text fenced below."""
    head = f"{time} [{action}]"
    meta = {"importance": importance}
    if "\n" not in text and _inline_safe(text):
        return edits.render_item(f"{head} {text}", meta, newline)
    preview = _one_line(text.split("\n", 1)[0])
    if len(preview) > 120:
        preview = preview[:119].rstrip() + " …"
    item = edits.render_item(f"{head} {preview}" if preview else head, meta, newline)
    fenced = fence(text, newline)
    return item + newline.join(f"  {line}" if line else "" for line in fenced.split(newline))


def render_paragraph(text: str, newline: str) -> str:
    """A Request/Response part: as written, lines that would read as headings escaped
    (:func:`escape_lines`); fenced whenever that would not read back exactly (runs of blank
    lines, text like mdmem's own fence, link definitions, a heading the escape can't stop)."""
    text = text.replace("\r\n", "\n").strip()
    escaped = escape_lines(text)
    if _block_safe(escaped) and "\n\n".join(_paragraphs(escaped)) == text:
        return escaped.replace("\n", newline) + newline
    return fence(text, newline)


def fence(text: str, newline: str) -> str:
    """``text`` in a fenced block longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text.replace("\r\n", "\n").replace("\n", newline)
    return f"{ticks}verbatim{newline}{body}{newline}{ticks}{newline}"


def _inline_safe(text: str) -> bool:
    if "<!--" in text or "-->" in text or not text.strip():
        return False
    return _block_safe(f"- {text}")


def _block_safe(text: str) -> bool:
    """Whether ``text`` placed in a section leaves the file's headings as they were."""
    probe = parse_document("probe.md", f"{text}\n\n## Sentinel\n")
    if "<!--" in text or "-->" in text:
        return False
    return [h.title for h in probe.headings] == ["Sentinel"]


def _one_line(text: str) -> str:
    """One line that can sit inside an item or frontmatter: no comment markers, no controls."""
    flat = one_line(printable(text))
    return flat.replace("<!--", "<!- -").replace("-->", "- ->")


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(round(value, 3)) if isinstance(value, float) else str(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{_yaml_value(str(k))}: {_yaml_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    text = str(value)
    if _SAFE_SCALAR.match(text) and not text.endswith(":") and not _reads_as_other_scalar(text):
        return text
    # JSON's string is YAML's double-quoted one, but for characters YAML may not hold raw
    return _YAML_UNPRINTABLE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False)
    )


def _reads_as_other_scalar(text: str) -> bool:
    """Whether YAML reads ``text`` written bare as a number, a boolean or null (an id such as
    ``0000`` or ``1e5`` would come back as 0 or 100000.0). Timestamps are meant to read as
    dates, so they stay bare."""
    import yaml  # python-frontmatter's own YAML library, loaded only for such values

    if not (text[0].isdigit() or text[0] in "+-." or text.lower() in _YAML_WORDS):
        return False
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return True
    return isinstance(loaded, bool | int | float) or loaded is None


_YAML_UNPRINTABLE = re.compile(
    "[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
"""What YAML does not read back unescaped: outside its printable set, or a line break of its
own (NEL, U+2028, U+2029), which it would fold into a space."""
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _stamp(moment: dt.datetime) -> str:
    return moment.replace(microsecond=0).isoformat()


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
        label = _one_line(str(name)) or "tool"
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
        key = _one_line(key).replace(":", " ")
        if not key:
            raise ValueError("metadata key cannot be empty")
        # the value is checked with its key: `- api_key: ...` is an assignment
        masked = self._redactor.redact(f"{key}: {_one_line(str(value))}")
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
            started=_stamp(self.started),
            ended=None if self.status == "running" else _stamp(now),
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
            values["ended"] = _stamp(now)
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


# ---- sessions whose writer is gone ----------------------------------------------------------

_TEMP_RE = re.compile(rf"^\.(?P<file>.+)\.(?P<pid>\d+)\.[^.]+{re.escape(TEMP_SUFFIX)}$")
_FRONT_RE = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)^(?:---|\.\.\.)[ \t]*\r?$", re.S | re.M)
_HEAD_BYTES = 16_384
"""A session's frontmatter is read from the head of its file (it is a few lines)."""
_PEEK_BYTES = 2048
_RUNNING_RE = re.compile(r"^status:[ \t]*[\"']?running\b", re.M)


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, from Linux's /proc), or None.

    With the pid it names one process: a pid the system gave to a new process after the
    first one died has another start.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    try:
        return int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    except (IndexError, ValueError):
        return None


def writer_stamp() -> dict[str, object]:
    """The frontmatter keys naming this process as a session's writer: ``host``, ``pid`` and
    (where the system tells) ``pid_start``."""
    pid = os.getpid()
    stamp: dict[str, object] = {"host": socket.gethostname(), "pid": pid}
    start = process_start(pid)
    if start is not None:
        stamp["pid_start"] = start
    return stamp


def _alive(pid: int) -> bool:
    try:
        return pid_alive(pid)
    except (OverflowError, ValueError):  # no such pid on any system
        return False


def writer_gone(front: Mapping[str, object], host: str) -> bool:
    """Whether a session's writer is known to be dead: the session is ``running``, it was
    started on ``host`` (only that machine can look at its processes: a workspace shared
    through git holds sessions running elsewhere), and its process is gone or is another
    process now. A session without ``host`` and ``pid`` (written by hand) is never gone."""
    if str(front.get("status")) != "running" or str(front.get("host")) != host:
        return False
    pid = str(front.get("pid", ""))
    if not pid.isdigit():
        return False
    if not _alive(int(pid)):
        return True
    recorded, now = str(front.get("pid_start", "")), process_start(int(pid))
    return recorded.isdigit() and now is not None and int(recorded) != now


def mark_interrupted(text: str, host: str) -> str:
    """``status: interrupted`` if the session's writer is gone; nothing else changes."""
    front = head_frontmatter(text)
    if front is None or not writer_gone(front, host):
        return text
    return set_frontmatter(text, {"status": "interrupted"})


def head_frontmatter(text: str) -> dict[str, object] | None:
    """The frontmatter at the start of ``text``, every value a string as written (so a host
    named ``1234`` or ``yes`` compares as written), or None."""
    match = _FRONT_RE.match(text.removeprefix("\ufeff"))
    if match is None:
        return None
    import yaml

    try:
        data = yaml.load(match.group("yaml"), Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


class InterruptedSweep:
    """Marks the sessions of ``folder`` whose writer died ``interrupted``, and removes the temp
    files dead writers left there.

    Cheap to call often: each session file is read once, then again only while this host runs
    it (a session ended, or running elsewhere, is settled); and when no file came or went in
    the folder, only the sessions this host runs are read.
    """

    def __init__(self, folder: Path, writer: Callable[[str], EditFile]) -> None:
        """``writer(name)`` writes ``folder/name`` safely."""
        self.folder = folder
        self._writer = writer
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._settled: set[str] = set()
        """Session files read once and left alone since: ended, or not this host's."""
        self._watch: set[str] = set()
        """Sessions this host was running, with a live writer, at the last look."""

    def sweep(self) -> list[str]:
        """Mark what is due; returns the ids of the sessions marked."""
        if not self._lock.acquire(blocking=False):
            return []  # another thread is sweeping right now
        try:
            try:
                stamp = self.folder.stat().st_mtime_ns
            except OSError:
                return []
            if stamp == self._stamp:  # no file came or went: only a writer may have died
                return self._mark(list(self._watch))
            self._stamp = stamp  # set first: a change while we look is seen next time
            names = self._scan()
            self._settled &= set(names)
            return self._mark([n for n in names if n not in self._settled])
        finally:
            self._lock.release()

    def _scan(self) -> list[str]:
        """The session files' names; the temp files of dead writers are removed on the way."""
        names: list[str] = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return names
        for entry in entries:
            if entry.name.endswith(".md"):
                names.append(entry.name)
            elif (match := _TEMP_RE.match(entry.name)) and not _alive(int(match["pid"])):
                try:
                    os.unlink(entry.path)
                except OSError:
                    continue
                log.info("%s/%s: removed (its writer is gone)", self.folder.name, entry.name)
        return names

    def _mark(self, names: list[str]) -> list[str]:
        host = socket.gethostname()
        marked: list[str] = []
        watch: set[str] = set()
        folder = str(self.folder)
        for name in names:
            try:
                front = _file_frontmatter(os.path.join(folder, name))
            except OSError:
                continue
            if writer_gone(front, host):
                if self._mark_one(name, host):
                    marked.append(name.removesuffix(".md"))
            elif str(front.get("status")) == "running" and str(front.get("host")) == host:
                watch.add(name)  # alive now: its writer may die before the next look
            else:
                self._settled.add(name)
        self._watch = watch
        return marked

    def _mark_one(self, name: str, host: str) -> bool:
        try:
            self._writer(name)(lambda text: mark_interrupted(text, host))
        except (MdmemError, OSError) as exc:
            log.warning("%s/%s: not marked interrupted: %s", self.folder.name, name, exc)
            return False
        log.info("%s/%s: its writer is gone; marked interrupted", self.folder.name, name)
        return True


def _file_frontmatter(path: str) -> Mapping[str, object]:
    """The frontmatter of a session file, read only as far as needed: empty unless it may be
    ``running`` (most sessions ended long ago)."""
    with open(path, "rb") as handle:
        head = handle.read(_PEEK_BYTES)
        if b"running" not in head:
            return {}
        head += handle.read(_HEAD_BYTES - len(head))
    text = head.decode("utf-8", errors="replace")
    if not _RUNNING_RE.search(text):
        return {}
    return head_frontmatter(text) or {}
