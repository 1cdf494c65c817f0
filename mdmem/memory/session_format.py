"""A session file's format: the event stream, one Markdown file per session, read back as a
:class:`SessionRecord` and rendered line by line as the session goes (the writer:
:mod:`mdmem.memory.session_writer`).

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

What a session is given reads back exactly (up to line endings and trailing whitespace): a
Request/Response line that would read as a heading is escaped, and text no escape keeps exact
(or event text that is not one plain line) goes verbatim into a fenced block.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from mdmem.layout import SESSIONS_DIR
from mdmem.markdown import edits
from mdmem.markdown.entries import Entry
from mdmem.markdown.frontmatter import yaml_value
from mdmem.markdown.parse import Document, block_tokens, parse_document
from mdmem.markdown.sections import section_texts
from mdmem.paths import slugify
from mdmem.text import one_line, printable

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
    sections = section_texts(doc)
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


# ---- rendering -------------------------------------------------------------------------------


def session_skeleton(
    title: str,
    agent: str,
    started: dt.datetime,
    newline: str = "\n",
    writer: Mapping[str, object] | None = None,
) -> str:
    """A new session file; ``writer`` (:func:`~mdmem.memory.interrupted_sessions.writer_stamp`)
    names the process writing it."""
    front = {"agent": agent, "started": iso_seconds(started), "status": "running", "rounds": 0}
    front.update(writer or {})
    lines = ["---", *(f"{k}: {yaml_value(v)}" for k, v in front.items()), "---"]
    lines += [f"# Session: {inline_text(title)}", ""]
    for name in SECTIONS:
        lines += [f"## {name}", ""]
    return newline.join(lines)


def render_event(time: str, action: str, text: str, importance: float, newline: str) -> str:
    """``- HH:MM:SS [action] text <!-- mdmem importance=… -->``, long text fenced below."""
    head = f"{time} [{action}]"
    meta = {"importance": importance}
    if "\n" not in text and _inline_safe(text):
        return edits.render_item(f"{head} {text}", meta, newline)
    preview = inline_text(text.split("\n", 1)[0])
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
    if _PLAIN_LINE.fullmatch(text):  # (no parse, nor the Markdown parser's import: most text)
        return True
    return _block_safe(f"- {text}")


_PLAIN_LINE = re.compile(r"[\w .,;:!?'\"()/@%&+=-]*")
"""One line of words and the punctuation that cannot, in an item, start a heading (a hash; a
setext underline needs a second line) nor a block that runs past the item (HTML's angle
bracket, backtick and tilde fences): :func:`_block_safe` always accepts it (a test holds the
two to the same answer), so it is not parsed."""


def _block_safe(text: str) -> bool:
    """Whether ``text`` placed in a section leaves the file's headings as they were."""
    probe = parse_document("probe.md", f"{text}\n\n## Sentinel\n")
    if "<!--" in text or "-->" in text:
        return False
    return [h.title for h in probe.headings] == ["Sentinel"]


def inline_text(text: str) -> str:
    """One line that can sit inside an item or frontmatter: no comment markers, no controls."""
    flat = one_line(printable(text))
    return flat.replace("<!--", "<!- -").replace("-->", "- ->")


def iso_seconds(moment: dt.datetime) -> str:
    """``moment`` in ISO 8601 to the second, as a session file writes its times."""
    return moment.replace(microsecond=0).isoformat()
