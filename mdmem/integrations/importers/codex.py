"""Codex CLI's session logs: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``, one record a line.

Each line is ``{"timestamp", "type", "payload"}``: ``session_meta`` (the session's id, start,
working folder), ``response_item`` (what the model saw and said: messages, function calls and
their outputs, reasoning summaries), ``compacted`` (a summary written when the history was
compacted), ``turn_context``, and ``event_msg`` (the same messages again, as the terminal showed
them: skipped, so nothing is imported twice). The environment and instructions Codex injects as
user or developer messages are skipped too. Logs written before the wrapper existed (the items
themselves, one a line, after a first line holding the session's id) are read as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import IO, Any

from mdmem.integrations.importers.common import (
    Conversation,
    Report,
    Turn,
    as_json,
    local_time,
    one_log,
    text_of,
)

SOURCE = "codex"
INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
"""How the messages Codex adds on its own start (not typed by the person)."""
_WRAPPED = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")


def looks_like(record: dict[str, Any]) -> bool:
    return record.get("type") in _WRAPPED and "payload" in record


def conversations(stream: IO[str], name: str, report: Report) -> Iterator[Conversation]:
    return one_log(stream, name, report, _Reader())


class _Reader:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.session_id = ""
        self.started: Any = None
        self.tools: dict[str, str] = {}

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind in _WRAPPED:
            payload = record.get("payload")
            if not isinstance(payload, dict):
                raise ValueError(f"a {kind} record without a 'payload' object")
            time = local_time(record.get("timestamp"))
            if kind == "session_meta":
                self._meta(payload)
            elif kind == "response_item":
                self._item(payload, time)
            elif kind == "compacted":
                text = str(payload.get("message") or "")
                if text.strip():
                    self.turns.append(Turn("summary", text, time))
            return  # event_msg and turn_context: nothing new
        if "record_type" in record:  # the older layout's state lines
            return
        if "type" not in record and "id" in record and not self.turns:
            self._meta(record)  # the older layout's first line
            return
        self._item(record, local_time(record.get("timestamp")))

    def _meta(self, payload: dict[str, Any]) -> None:
        self.session_id = self.session_id or str(payload.get("id") or "")
        self.started = self.started or local_time(payload.get("timestamp"))

    def _item(self, item: dict[str, Any], time: Any) -> None:
        kind = item.get("type")
        if kind == "message":
            role = item.get("role")
            text = text_of(item.get("content"))
            if role not in ("user", "assistant") or not text.strip():
                return  # developer and system messages are Codex's own instructions
            if role == "user" and text.lstrip().startswith(INJECTED):
                return
            self.turns.append(Turn(role, text, time))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            name = str(item.get("name") or kind.removesuffix("_call"))
            args = item.get("arguments", item.get("input", item.get("action")))
            self.tools[str(item.get("call_id"))] = name
            self.turns.append(
                Turn("tool_call", as_json(args if args is not None else ""), time, name)
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            name = self.tools.get(str(item.get("call_id")), "tool")
            text = _output(item.get("output"))
            if text.strip():
                self.turns.append(Turn("tool_result", text, time, name))
        elif kind == "reasoning":
            text = "\n\n".join(text_of(part) for part in item.get("summary") or [])
            if text.strip():
                self.turns.append(Turn("thinking", text, time))

    def conversation(self, name: str) -> Conversation:
        key = self.session_id or PurePosixPath(name).stem
        first = next((t.text for t in self.turns if t.kind == "user"), "")
        title = first.strip().split("\n", 1)[0][:80]
        return Conversation(SOURCE, key, title, tuple(self.turns), self.started, f"{name}:1")


def _output(value: object) -> str:
    """A tool's output: Codex writes the shell's as a JSON string ``{"output": ..., "metadata":
    {...}}``; the text inside is what the person saw."""
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(inner, dict) and isinstance(inner.get("output"), str):
            return inner["output"]
        return value
    return text_of(value)
