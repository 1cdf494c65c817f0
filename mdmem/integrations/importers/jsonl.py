"""A generic transcript: a JSONL file of ``{"role", "content", "timestamp"}`` messages, one
conversation per file. ``role`` is user, assistant, tool or system (system messages are
skipped); ``content`` is text or a list of text parts; ``timestamp`` (optional) is ISO 8601 or
epoch seconds. The conversation's id is the first message's ``conversation_id`` (or
``session_id``) when it has one, else the file's name and a hash of its first line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import IO, Any

from mdmem.integrations.importers.common import (
    BadRecord,
    Conversation,
    Report,
    Turn,
    jsonl,
    local_time,
    text_of,
)

SOURCE = "jsonl"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
_ID_KEYS = ("conversation_id", "session_id", "conversation")


def looks_like(record: dict[str, Any]) -> bool:
    return "role" in record and "content" in record


def conversations(stream: IO[str], name: str, report: Report) -> Iterator[Conversation]:
    turns: list[Turn] = []
    key = ""
    for line, record in jsonl(stream, name, report):
        if not key:
            given = next((record[k] for k in _ID_KEYS if isinstance(record.get(k), str)), "")
            first = json.dumps(record, sort_keys=True).encode("utf-8")
            stem = PurePosixPath(name).stem
            key = given or f"{stem}-{hashlib.sha256(first).hexdigest()[:12]}"
        role = record.get("role")
        if not isinstance(role, str) or "content" not in record:
            report(BadRecord(name, line, "not a message: needs 'role' and 'content'"))
            continue
        text = text_of(record["content"])
        time = local_time(record.get("timestamp"))
        if role in _ROLES:
            kind, tool = _ROLES[role], ""
        elif role in ("tool", "function"):
            kind, tool = "tool_result", str(record.get("name") or "tool")
        elif role in ("system", "developer"):
            continue
        else:
            report(BadRecord(name, line, f"unknown role {role!r}"))
            continue
        if text.strip():
            turns.append(Turn(kind, text, time, tool))
    if turns:
        first_user = next((t.text for t in turns if t.kind == "user"), turns[0].text)
        title = first_user.strip().split("\n", 1)[0][:80]
        yield Conversation(SOURCE, key, title, tuple(turns), None, f"{name}:1")
