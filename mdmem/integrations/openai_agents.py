"""An OpenAI Agents SDK session kept in a session file: ``Runner.run(agent, text,
session=MdmemSession("user-42", ws))``.

It implements the SDK's ``Session`` protocol (``session_id``; async ``get_items``,
``add_items``, ``pop_item``, ``clear_session``) over ``.sessions/<stamp>_<slug>.md``, a native
session file whose frontmatter names ``source: openai-agents`` and the session id. Each item is
an event a person can read (``- 14:22:48 [user] What's the weather in Paris?``); the item's JSON
is kept whole in the event's metadata comment, so ``get_items`` returns exactly what was added
(secrets masked): reasoning items and images too, which the readable text only names. A person
may edit a message's text in the file; the edit is what the agent gets back. ``pop_item`` and
``clear_session`` archive (to ``## Archive`` in the same file): nothing is deleted.

The protocol is structural, so this module does not import the SDK; reading a session's
``session_settings`` (as the Runner does) imports its ``SessionSettings`` for the default.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.errors import ModeError
from mdmem.integrations.importers.common import (
    MAX_EVENT_CHARS,
    SESSIONS_DIR,
    append_to_section,
    parse_document,
    printable,
    render_event,
    session_heads,
    session_skeleton,
    session_stem,
)

if TYPE_CHECKING:
    from mdmem import Workspace

SOURCE = "openai-agents"
EVENTS = "Events"
ARCHIVE = "Archive"
_ROLES = ("user", "assistant", "system", "developer")


class MdmemSession:
    """Conversation history for the OpenAI Agents SDK, in a Markdown session file.

    ``workspace``: a :class:`~mdmem.Workspace` or its folder (default: found as
    ``Workspace.open`` finds it). ``agent`` names the session's agent (default: the
    workspace's); ``title`` its heading (default: the session id). ``session_settings`` (the
    SDK's ``SessionSettings``, or a dict of it) sets the default ``limit`` of ``get_items``, as
    for the SDK's own sessions. The file is created on the first ``add_items``.
    """

    def __init__(
        self,
        session_id: str,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        agent: str | None = None,
        title: str | None = None,
        session_settings: Any = None,
    ) -> None:
        from mdmem import Workspace

        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id must be a non-empty string")
        self.session_id = session_id
        self._settings = None if session_settings is None else _settings(session_settings)
        self.ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        if self.ws.config.mode != "full":
            raise ModeError(
                "an Agents SDK session is kept in a session file, which only full mode writes "
                "(switch with `mdmem mode full`)"
            )
        self.agent = agent or self.ws.config.agent
        self.title = title or session_id
        self._path: str | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"MdmemSession({self.session_id!r}, path={self._path!r})"

    @property
    def session_settings(self) -> Any:
        """The SDK's per-session settings: ``SessionSettings()`` (no limit) unless given, as for
        the SDK's own sessions (None only when the SDK is not installed). Made when first read,
        so a session used without the Runner never imports the SDK."""
        if self._settings is None:
            self._settings = _settings(None)
        return self._settings

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self._settings = None if value is None else _settings(value)

    # ---- the SDK's protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The items, oldest first; with ``limit`` (default: ``session_settings.limit``), the
        latest ``limit`` of them (none when it is 0 or less)."""
        self._check_open()
        if limit is None and self._settings is not None:
            limit = self._settings.limit
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[Any]) -> None:
        self._check_open()
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> Any | None:
        """The latest item, archived (or None when there is none)."""
        self._check_open()
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Archive every item: the next run starts with no history."""
        self._check_open()
        await asyncio.to_thread(self.clear)

    def close(self) -> None:
        """End this session object's use, as the SDK's ``SQLiteSession.close()`` does: every
        later call raises ``RuntimeError`` (even an empty ``add_items``), so code written for
        the SDK behaves the same. Nothing else to release (each call opens and closes the file
        it needs); the history stays in the file, and a new ``MdmemSession`` with the same id
        reads it. Closing twice is no error."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    # ---- the same, synchronous ---------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The session file (workspace-relative), or None before the first item."""
        if self._path is None:
            self._path = _find(self.ws.root, self.session_id)
        return self._path

    def items(self, limit: int | None = None) -> list[Any]:
        self._check_open()
        if limit is not None and limit <= 0:
            return []
        rel = self.path
        if rel is None or not (self.ws.root / rel).exists():
            return []
        doc = self.ws.files.read(rel)
        shown = {e.line: e.text for e in self.ws.sessions.record(Path(rel).stem).events}
        found = [item for _, item in _stored(doc.text, rel, shown)]
        return found if limit is None else found[-limit:]

    def add(self, items: list[Any]) -> None:
        self._check_open()
        if not items:
            return
        blocks = [_plain(item, self.ws.files._redactor) for item in items]
        rel = self._ensure_file()
        stamp = dt.datetime.now().strftime("%H:%M:%S")

        def edit(current: str) -> str:
            newline = "\r\n" if "\r\n" in current else "\n"
            names = _call_names(current, rel)
            text = current
            for item in blocks:
                action, readable = describe(item, names)
                names.update(_call_names_of([item]))
                block = _render(stamp, action, readable, item, newline)
                text = append_to_section(text, rel, EVENTS, block)
            return text

        self.ws.files.edit(rel, edit, create=False)

    def pop(self) -> Any | None:
        self._check_open()
        rel = self.path
        if rel is None or not (self.ws.root / rel).exists():
            return None
        popped: list[Any] = []

        def edit(current: str) -> str:
            stored = _stored(current, rel)
            popped[:] = [stored[-1][1]] if stored else []
            return _archive(current, rel, [stored[-1][0]]) if stored else current

        self.ws.files.edit(rel, edit, create=False)
        return popped[0] if popped else None

    def clear(self) -> None:
        self._check_open()
        rel = self.path
        if rel is None or not (self.ws.root / rel).exists():
            return

        def edit(current: str) -> str:
            return _archive(current, rel, [entry for entry, _ in _stored(current, rel)])

        self.ws.files.edit(rel, edit, create=False)

    def _ensure_file(self) -> str:
        """The session file, created (once, even across processes) on first use."""
        from mdmem.writes.file_lock import FileLock

        with self._lock:
            if self.path is not None and (self.ws.root / self.path).exists():
                return self.path
            self.ws.files._state_dir.mkdir(exist_ok=True)
            with FileLock(str(self.ws.files._state_dir / "agents-sessions.lock")):
                self._path = _find(self.ws.root, self.session_id) or self._create()
            return self._path

    def _create(self) -> str:
        started = dt.datetime.now().replace(microsecond=0)
        title = " ".join(self.ws.files._redactor(self.title).split())[:120] or "session"
        front = {"source": SOURCE, "conversation": self.session_id}
        base = session_stem(started, self.agent, title)
        (self.ws.root / SESSIONS_DIR).mkdir(exist_ok=True)
        for n in range(1, 1000):
            rel = f"{SESSIONS_DIR}/{base if n == 1 else f'{base}-{n}'}.md"
            if not (self.ws.root / rel).exists():
                skeleton = session_skeleton(title, self.agent, started, writer=front)
                self.ws.files.edit(rel, partial(_unless_written, skeleton))
                return rel
        raise FileExistsError(f"{SESSIONS_DIR}/{base}.md: too many sessions with this name")


def _settings(value: Any) -> Any:
    """The SDK's ``SessionSettings`` for ``value`` (one already, or a dict of its fields; None:
    the defaults, ``SessionSettings(limit=None)``): the Runner merges a run's settings into it
    with ``resolve``, so a dict is coerced as the SDK's own sessions do."""
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError:  # no SDK: nothing can have made settings of its kind
        if value is None:
            return None
        raise
    return SessionSettings() if value is None else coerce_session_settings(value)


# ---- items as events ---------------------------------------------------------------------------


def describe(item: Mapping[str, Any], names: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The event an item is shown as: its action and readable text."""
    kind = str(item.get("type") or ("message" if "role" in item else "item"))
    names = names or {}
    if kind == "message" or "role" in item:
        role = str(item.get("role") or "assistant")
        return (role if role in _ROLES else "message"), _content_text(item.get("content"))
    if kind == "reasoning":
        summary = "\n\n".join(_content_text(part) for part in item.get("summary") or [])
        return "thinking", summary or "(reasoning)"
    if kind == "function_call":
        return "tool_call", f"{item.get('name', 'tool')}({item.get('arguments', '')})"
    if kind.endswith("_output"):
        name = names.get(str(item.get("call_id")), "tool")
        return "tool_result", f"{name} → {_content_text(item.get('output'))}"
    if kind.endswith("_call"):
        detail = item.get("action") or item.get("queries") or item.get("arguments") or ""
        text = detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
        return "tool_call", f"{kind.removesuffix('_call')}({text})"
    return "item", kind


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for part in content if (t := _content_text(part)))
    if isinstance(content, Mapping):
        kind = str(content.get("type") or "")
        if "image" in kind:
            return "[image]"
        if kind in ("input_file", "file"):
            return f"[file: {content.get('filename') or content.get('file_id') or 'attached'}]"
        for key in ("text", "refusal", "output"):
            if isinstance(content.get(key), str):
                return content[key]
        return f"[{kind}]" if kind else ""
    return str(content)


def _render(stamp: str, action: str, readable: str, item: Any, newline: str) -> str:
    text = readable.strip() or "(empty)"
    if len(text) > MAX_EVENT_CHARS:  # the readable text is cut like any event's; the item is not
        text = (
            text[:MAX_EVENT_CHARS] + f"\n[... {len(text) - MAX_EVENT_CHARS:,} characters omitted]"
        )
    block = render_event(stamp, action, text, _importance(action), newline)
    first, sep, rest = block.partition(newline)
    meta = f" shown={_digest(text)} item={_encode(item)} -->"
    return first.replace(" -->", meta, 1) + sep + rest


def _importance(action: str) -> float:
    """As native sessions infer it from the action."""
    return {"tool_call": 0.7, "tool_result": 0.75, "thinking": 0.55}.get(action, 0.5)


def _encode(item: Any) -> str:
    """The item's JSON as a metadata value: a quoted string holding no ``<`` or ``>`` (so no
    comment can end inside it) and nothing the comment parser reads as a space."""
    inner = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    inner = inner.replace("<", "\\u003c").replace(">", "\\u003e")
    return json.dumps(inner, ensure_ascii=True)


def _plain(item: Any, redact: Callable[[str], str]) -> Any:
    """An item as plain JSON data (the SDK may hand over pydantic models), its strings masked.

    A value JSON cannot hold raises ``TypeError`` before anything is written, as the SDK's
    ``SQLiteSession`` does (``json.dumps`` of the item): stored as its ``str()``, it would come
    back from ``get_items`` as something else than was added."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True, mode="json")
    data = json.loads(json.dumps(item))
    return _mask(data, redact)


def _mask(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value) if len(value) < 1_000_000 else value
    if isinstance(value, list):
        return [_mask(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _mask(v, redact) for k, v in value.items()}
    return value


def _stored(text: str, rel: str, shown: Mapping[int, str] | None = None) -> list[tuple[Any, Any]]:
    """(entry, item) for each event under ``## Events``, oldest first; ``shown`` holds each
    event's text as the session reader reads it, by line (to see a person's edits)."""
    doc = parse_document(rel, text)
    out = []
    for entry in doc.entries:
        if entry.heading_path[-1:] != (EVENTS,):
            continue
        readable = (shown or {}).get(entry.start_line)
        out.append((entry, _item_of(entry, readable)))
    return out


def _item_of(entry: Any, readable: str | None) -> Any:
    """The item an event holds; a message whose text a person edited comes back with the
    edit; an event written by hand becomes a message."""
    action, fallback = _event_text(entry.text)
    readable = fallback if readable is None else readable
    item = None
    if "item" in entry.meta:
        try:
            item = json.loads(entry.meta["item"])
        except json.JSONDecodeError:
            item = None
    if item is None:
        role = action if action in _ROLES else "assistant"
        return {"role": role, "content": readable}
    edited = entry.meta.get("shown") not in (None, _digest(readable))
    if edited and isinstance(item, dict) and "role" in item and action in _ROLES:
        item = {**item, "content": _edited(item.get("content"), readable)}
    return item


def _digest(text: str) -> str:
    """A short hash of an event's text as read back (whitespace at line ends and control
    characters aside): it differs when a person edited the text."""
    lines = printable(text.replace("\r\n", "\n")).split("\n")
    norm = "\n".join(line.rstrip() for line in lines).strip()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()[:12]


def _edited(content: Any, text: str) -> Any:
    """``content`` with its text replaced by ``text`` (one text part, or the string)."""
    if isinstance(content, list):
        texts = [p for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if len(texts) == 1:
            return [{**p, "text": text} if p is texts[0] else p for p in content]
    return text


def _event_text(text: str) -> tuple[str, str]:
    """``HH:MM:SS [action] text`` (a long text fenced below) → action, text."""
    head, _, body = text.partition("\n")
    action = ""
    if "[" in head and "]" in head:
        action = head[head.index("[") + 1 : head.index("]")].strip()
        head = head[head.index("]") + 1 :].strip()
    body = body.strip()
    if body.startswith("```") and body.rstrip().endswith("```"):
        lines = body.split("\n")
        return action, "\n".join(lines[1:-1])
    return action, (f"{head}\n{body}" if body else head)


def _call_names(text: str, rel: str) -> dict[str, str]:
    """Tool names by call id, from the function calls already in the file."""
    if "call_id" not in text:
        return {}
    return _call_names_of(item for _, item in _stored(text, rel))


def _call_names_of(items: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    for item in items:
        kind = str(item.get("type", "")) if isinstance(item, dict) else ""
        if kind.endswith("_call") and item.get("call_id"):
            names[str(item["call_id"])] = str(item.get("name") or kind.removesuffix("_call"))
    return names


def _archive(text: str, rel: str, entries: list[Any]) -> str:
    """Move ``entries`` (events of ``text``) to ``## Archive`` at the end of the file, each
    marked with when it was archived."""
    if not entries:
        return text
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    stamp = dt.datetime.now().replace(microsecond=0).isoformat()
    moved: list[str] = []
    for entry in sorted(entries, key=lambda e: e.start_line, reverse=True):
        block = lines[entry.start_line - 1 : entry.end_line]
        del lines[entry.start_line - 1 : entry.end_line]
        first = block[0].replace(" -->", f" archived={stamp} -->", 1)
        moved = [first, *block[1:], *moved]
    if moved and not moved[-1].endswith(("\n", "\r")):
        moved[-1] += newline
    rest = "".join(lines)
    return append_to_section(rest, rel, ARCHIVE, "".join(moved))


def _find(root: Path, session_id: str) -> str | None:
    """The session file of ``session_id`` in ``.sessions/``, read from each file's head."""
    for rel, front in session_heads(root, SOURCE):
        if front.get("source") == SOURCE and front.get("conversation") == session_id:
            return rel
    return None


def _unless_written(skeleton: str, current: str) -> str:
    """The new session file's skeleton, unless the file was written meanwhile."""
    return current or skeleton
