"""Conversations from wherever they come from, as plain ``{"role", "content"}`` messages.

Compaction and extraction read chat messages; callers hold them as OpenAI-style dicts (content
a string or a list of parts, tool calls), as a JSONL transcript on disk, or as a recorded
session. This module turns all of them into one shape so the engines never have to care.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mdmem.errors import FileProblem
from mdmem.memory.session_format import SessionRecord

Source = Iterable[Mapping[str, Any]] | str | Path | SessionRecord
"""What :func:`load_messages` accepts."""
KEPT_KEYS = ("name", "timestamp", "date")
"""Optional string keys kept on a message: a speaker name and when it was said help both
engines (dates on key events, "who said it" in chat)."""
_ROLES = {"human": "user", "ai": "assistant", "bot": "assistant", "function": "tool"}


def load_messages(source: Source) -> list[dict[str, str]]:
    """Messages as ``{"role": ..., "content": str}`` (plus ``name``/``timestamp`` when given).

    ``source`` is a list of message dicts, a :class:`SessionRecord`, or a path: ``.jsonl``
    (one message per line), ``.json`` (a list of messages) or a session ``.md`` file. Messages
    with nothing to say (empty content, no tool calls) are dropped.
    """
    if isinstance(source, SessionRecord):
        return _session_messages(source)
    if isinstance(source, str | Path):
        return _load_file(Path(source))
    return normalize(source)


def _session_messages(record: SessionRecord) -> list[dict[str, str]]:
    """A session's messages; requests and responses carry the session's start as timestamp
    (events carry their own date and time in the text)."""
    out = normalize(record.to_messages())
    if record.started:
        for message in out:
            if not message["content"][:4].isdigit():
                message.setdefault("timestamp", record.started)
    return out


def normalize(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {n} is a {type(message).__name__}, not a dict")
        item = normalize_message(message)
        if item is not None:
            out.append(item)
    return out


def normalize_message(message: Mapping[str, Any]) -> dict[str, str] | None:
    """One message: parts joined into text, tool calls written out as ``[tool_call] f(args)``."""
    if "role" not in message and isinstance(message.get("message"), Mapping):
        # wrapped transcripts (e.g. {"type": "user", "message": {...}, "timestamp": ...})
        outer = {k: message[k] for k in KEPT_KEYS if isinstance(message.get(k), str)}
        message = {**outer, **message["message"]}
    role = str(message.get("role") or "user").lower()
    role = _ROLES.get(role, role)
    pieces = [content_text(message.get("content"))]
    pieces += [_tool_call(call) for call in message.get("tool_calls") or ()]
    if isinstance(message.get("function_call"), Mapping):
        pieces.append(_tool_call({"function": message["function_call"]}))
    content = "\n".join(p for p in pieces if p.strip()).strip()
    if not content:
        return None
    item = {"role": role, "content": content}
    for key in KEPT_KEYS:
        if isinstance(message.get(key), str) and message[key].strip():
            item[key] = message[key].strip()
    return item


def content_text(content: Any) -> str:
    """A message's content as text: strings as they are, parts joined, images as a marker."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        return _part_text(content)
    if isinstance(content, list | tuple):
        return "\n".join(t for t in (_part_text(p) for p in content) if t.strip())
    return str(content)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return str(part)
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return part["text"]
    if kind == "tool_use":  # Anthropic-style
        return _tool_call({"function": {"name": part.get("name"), "arguments": part.get("input")}})
    if kind == "tool_result":
        return "[tool_result] " + content_text(part.get("content"))
    if kind in ("image", "image_url", "input_image"):
        return "[image]"
    if "content" in part:
        return content_text(part["content"])
    return ""


def _tool_call(call: Any) -> str:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return ""
    args = function.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, default=str) if args is not None else ""
    return f"[tool_call] {function.get('name') or 'tool'}({args})"


def _load_file(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is not part of the JSON
    except OSError as exc:
        raise FileProblem(str(path), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FileProblem(str(path), "not valid UTF-8") from None
    if path.suffix == ".md":
        return _load_session(path, text)
    stripped = text.lstrip()
    if path.suffix == ".json" or stripped.startswith("["):
        return _load_json(path, text)
    return _load_jsonl(path, text)


def _load_session(path: Path, text: str) -> list[dict[str, str]]:
    from mdmem.markdown.parse import parse_document
    from mdmem.memory.session_format import parse_session

    return load_messages(parse_session(parse_document(path.as_posix(), text)))


def _load_json(path: Path, text: str) -> list[dict[str, str]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileProblem(str(path), f"invalid JSON: {exc.msg}", exc.lineno) from None
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list) or not all(isinstance(m, Mapping) for m in data):
        raise FileProblem(str(path), "expected a JSON list of message objects")
    return normalize(data)


def _load_jsonl(path: Path, text: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FileProblem(str(path), f"invalid JSON: {exc.msg}", number) from None
        if not isinstance(message, Mapping):
            kind = type(message).__name__
            raise FileProblem(str(path), f"expected a message object, got a JSON {kind}", number)
        item = normalize_message(message)
        if item is not None:
            out.append(item)
    return out
